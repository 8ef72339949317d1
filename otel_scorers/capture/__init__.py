"""Turn an ended span into a scorer run: the question, the instructions, the answer, the steps.

Conventions, in order of precedence: a user mapping (attribute names or a callable), GenAI
semantic conventions (``gen_ai.input.messages`` / ``gen_ai.output.messages`` /
``gen_ai.system_instructions``, then the flattened ``gen_ai.prompt.N.*`` /
``gen_ai.completion.N.*``), OpenInference (``llm.input_messages.N.*`` / ``llm.output_messages.N.*``,
then ``input.value`` / ``output.value``), Traceloop (``traceloop.entity.input`` / ``.output``) and
Mastra (``input`` / ``output`` on ``mastra.span.type`` spans); GenAI content on the span's own
log records and span events (strands) counts as the span's own.

An interaction's span rarely holds everything: the run is assembled from it and the LLM calls
under it (:func:`choose`). The question is the span's own input when it is as clean as the
first LLM call's (chat messages, plain text, a kwargs dict's ``task``), else the first call's
last user turn; the instructions are the span's own, else those of the call that gave the
answer; the answer is the span's own output when it is as clean as the last LLM call's text
output, else that output. Clean chat messages always beat decoded framework state (LangChain
dumps), and what cannot be read at all (a workflow's state dump, a Python repr) is never sent:
the run is then ``unreadable``. A turn that ends in a tool call or a handoff has no answer.

Nothing here raises: a span without usable content yields ``Captured.run is None`` with a
:class:`~otel_scorers.names.Reason`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from otel_scorers import safe_json
from otel_scorers.capture.conventions import (
    CaptureError,
    Found,
    Limits,
    attr_value,
    is_answer,
    loose_messages,
    parse_json,
)
from otel_scorers.capture.declared import output_schema_of, tools_of
from otel_scorers.capture.identity import CaptureMapping, agent_name, version_of
from otel_scorers.capture.kinds import CHAIN, HANDOFF, LLM, RETRIEVAL, TOOL
from otel_scorers.capture.logs import (
    RecordContent,
    found_in_records,
    original_events,
    span_records,
)
from otel_scorers.capture.pieces import Piece
from otel_scorers.capture.readers import READERS
from otel_scorers.capture.serialized import looks_like_repr
from otel_scorers.capture.steps import steps_of
from otel_scorers.names import RUBRIC_ATTRIBUTE, Reason
from otel_scorers.scorers.run import Message, RunLike, ScorerRun
from otel_scorers.scorers.steps import StepCounts

__all__ = ["CaptureMapping", "Captured", "Extractor", "Limits", "agent_name", "attribute_dict",
           "capture_span", "version_of"]

#: A user function that reads a run from a span itself (``None``: nothing to judge).
Extractor = Callable[[ReadableSpan], "RunLike | None"]


def attribute_dict(span: ReadableSpan) -> Mapping[str, Any]:
    """The span's attributes as a plain dict, for the hot path. Never mutate the result.

    ``span.attributes`` is a read-only view over the SDK's ``BoundedAttributes``, whose every
    lookup and iteration runs Python code (and takes a lock): about a microsecond per span for
    the few checks ``on_end`` makes. An ended span's attributes no longer change, so the dict
    inside is read directly when the SDK has one; any other span type gets a copy of the view.
    """
    inner = getattr(getattr(span, "_attributes", None), "_dict", None)
    if type(inner) is dict:
        return inner
    raw = span.attributes
    return dict(raw) if raw else {}


@dataclass(frozen=True)
class Captured:
    """The outcome of capture: a run, or the reason there is none."""

    run: ScorerRun | None
    source: str | None = None
    agent: str | None = None
    reason: str | None = None
    detail: str = ""
    #: pieces under the span that belong to nested agent spans (per-agent evaluation): a run
    #: with no steps of its own is then right to have none (its agents' steps are theirs)
    nested: int = 0
    #: the version of what was evaluated (:func:`version_of`), the metrics' ``version`` label
    version: str | None = None


def run_id(span: ReadableSpan) -> str:
    context = span.context
    if context is None:
        return "unknown"
    return f"{context.trace_id:032x}-{context.span_id:016x}"


def capture_span(span: ReadableSpan, *, attributes: Mapping[str, Any] | None = None,
                 mapping: CaptureMapping | None = None, extractor: Extractor | None = None,
                 limits: Limits | None = None,
                 descendants: Sequence[ReadableSpan | Piece] = (),
                 records: Sequence[RecordContent] = (), nested: int = 0,
                 rubric: Any = None, agent: str | None = None,
                 links: Mapping[int, int | None] | None = None,
                 steps: bool = True, cut: StepCounts | None = None) -> Captured:
    """Read the run of ``span``.

    ``attributes`` are the span's attributes as they were when it ended (the processor keeps
    them when ``exported_content: strip`` empties the span it exports); ``records`` are the
    content log records emitted for the span itself; ``descendants`` the spans under it that
    matter (LLM calls with their records, tool calls, retrievals, nested agents) and ``nested``
    how many pieces under it belong to nested agent spans instead (per-agent evaluation).
    ``rubric`` is a configured rubric for this run; an ``otel_scorers.rubric`` attribute on the
    span takes precedence over it. ``agent`` names the interaction's agent when its span does
    not (a workflow root); ``links`` (child -> parent span ids) tell the steps their agents;
    ``steps=False`` leaves the steps, the declared tools and answer schema out (no scorer
    reads them: capture costs less);
    ``cut``: the steps of the trace's pieces let go past the buffer's bound (counted in).
    """
    limits = limits or Limits()
    attrs: Mapping[str, Any] = attributes if attributes is not None else (span.attributes or {})
    agent = agent_name(span, mapping, attributes=attrs) or agent
    version = version_of(span, mapping, attributes=attrs)
    try:
        if extractor is not None:
            return replace(_from_extractor(span, extractor, agent, rubric), version=version)
        own = _collect(attrs, mapping, limits)
        own_records = (*records, *span_records(original_events(span)))
        if own_records:
            own = _merged(own, found_in_records(own_records, limits))
        pieces = [_piece(d) for d in descendants]
        calls = _calls(pieces, limits)
        found, source = choose(own, calls)
    except CaptureError as error:
        return Captured(None, agent=agent, reason=error.reason, detail=str(error))
    missing = _missing(found, calls, nested, span.name, own)
    if missing is not None:
        return Captured(None, agent=agent, reason=missing[0], detail=missing[1])
    context: dict[str, Any] = {}
    span_rubric = attrs.get(RUBRIC_ATTRIBUTE)
    chosen = span_rubric if span_rubric not in (None, "") else rubric
    if chosen is not None:
        context["rubric"] = _rubric_value(chosen)
    taken, dropped, counts = steps_of(pieces, {p.span_id: f for p, f in calls},
                                      _agent_namer(span, agent, pieces, links or {}),
                                      cut) if steps else ((), 0, None)
    declaring = [attrs, *(p.attributes or {} for p in pieces if p.kind == LLM)]
    tools = tools_of(declaring) if steps else ()
    run = ScorerRun(run_id=run_id(span), input_messages=tuple(found.inputs),
                    system_messages=tuple(found.systems), output=tuple(_text_only(found.outputs)),
                    request_context=context, steps=taken, steps_dropped=dropped,
                    step_counts=counts, tools=tools,
                    output_schema=output_schema_of(declaring) if steps else None,
                    duration_ns=_duration(span))
    return Captured(run, source=source, agent=agent, nested=nested, version=version)


def _duration(span: ReadableSpan) -> int | None:
    start, end = span.start_time, span.end_time
    return end - start if start and end and end >= start else None


def _missing(found: Found, calls: Sequence[tuple[Piece, Found]], nested: int, name: str,
             own: Found) -> tuple[str, str] | None:
    """Why nothing can be judged (reason, detail), or ``None``."""
    if found.has_user and found.has_output:
        return None
    if nested and not (found.has_input and found.has_output):
        return Reason.NESTED_AGENT, (f"the content under it ({nested} LLM calls) belongs to "
                                     "nested agent spans, which are evaluated on their own")
    part = ("question or answer" if not (found.has_output or found.has_user)
            else "answer" if not found.has_output else "question")
    notes = own.unreadable + [f"{p.name or 'a span'}: {note}" for p, f in calls
                              for note in f.unreadable]
    if notes:
        return Reason.UNREADABLE, (f"span {name!r}: the {part} could not be read ("
                                   + "; ".join(dict.fromkeys(notes))[:400] + ")")
    if not found.has_output and any(looks_like_repr(m.content) for m in found.outputs):
        return Reason.NO_CONTENT, (f"span {name!r}: no text answer (the answer recorded is a "
                                   "Python repr of a framework object, such as a tool call or "
                                   "a handoff, not text)")
    if not found.has_output and any(m.tool_calls for f in (own, *(c[1] for c in calls))
                                    for m in f.outputs):
        return Reason.NO_CONTENT, (f"span {name!r}: no text answer (the last turns end in tool "
                                   "calls, and the message text is empty)")
    where = f"span {name!r} or the {len(calls)} LLM calls under it" if calls else f"span {name!r}"
    return Reason.NO_CONTENT, f"no {part} text found on {where}"


def _calls(pieces: Sequence[Piece], limits: Limits) -> list[tuple[Piece, Found]]:
    """The content of each piece that may hold conversation (not tools, retrievals or
    handoffs, whose inputs and outputs are a step's, nor chains, whose are a graph node's
    routing: ``__end__``); a piece whose content cannot be read is kept with its notes, one
    bad piece never spoils the others."""
    calls: list[tuple[Piece, Found]] = []
    for piece in pieces:
        if piece.kind in (TOOL, RETRIEVAL, HANDOFF, CHAIN):
            continue
        try:
            found = _collect(piece.attributes or {}, None, limits)
            if piece.records:
                found = _merged(found, found_in_records(piece.records, limits))
        except CaptureError as error:
            found = Found("unreadable", unreadable=[str(error)])
        if found.has_input or found.has_output or found.unreadable or found.saw_output:
            calls.append((piece, found))
    return calls


def choose(own: Found, calls: Sequence[tuple[Piece, Found]]) -> tuple[Found, str | None]:
    """The run's question, instructions and answer from the span's own content and its LLM
    calls' (see the module docstring), and the source it names."""
    asked = [c for c in calls if c[1].has_user]
    answered = [c for c in calls if c[1].has_output]
    # the cleanest first question and last answer (chat messages before decoded state)
    first = min(asked, key=lambda c: (-c[1].input_quality, c[0].start))[1] if asked else None
    last = max(answered, key=lambda c: (c[1].output_quality, c[0].end))[1] if answered \
        else None
    out = Found(own.source)
    sources = []
    if own.has_user and (first is None or own.input_quality >= first.input_quality):
        out.inputs, out.input_quality = own.inputs, own.input_quality
        sources.append(own.source)
    elif first is not None:
        out.inputs, out.input_quality = first.inputs, first.input_quality
        sources.append(f"trace:{first.source}")
    elif own.has_turns:
        out.inputs = own.inputs
    system = next((f for f in (own, last, first, *(c[1] for c in calls)) if f is not None
                   and f.has_system), None)
    if system is not None:
        out.systems = system.systems
    if own.has_output and (last is None or own.output_quality >= last.output_quality):
        out.outputs, out.output_quality = own.outputs, own.output_quality
        sources.append(own.source)
    elif last is not None:
        out.outputs, out.output_quality = last.outputs, last.output_quality
        sources.append(f"trace:{last.source}")
    out.unreadable = list(own.unreadable)
    source = sources[0] if sources and len(set(sources)) == 1 else (
        "+".join(dict.fromkeys(sources)) if sources else None)
    return out, source


def _text_only(outputs: list[Message]) -> list[Message]:
    """The output messages that have text (a tool-call turn before the answer is a step; a
    repr of a framework object is never an answer)."""
    return [m for m in outputs if is_answer(m.content)] or [
        m.model_copy(update={"content": ""}) if looks_like_repr(m.content) else m
        for m in outputs]


def _agent_namer(span: ReadableSpan, agent: str | None, pieces: Sequence[Piece],
                 links: Mapping[int, int | None]) -> Any:
    """Names the agent a span belongs to: its nearest agent span's name, else the run's."""
    named = {p.span_id: agent_name(span, attributes=p.attributes or {}, span_name=p.name)
             for p in pieces if p.kind == "agent"}
    parents = {**links, **{p.span_id: p.parent for p in pieces}}

    def agent_of(span_id: int) -> str | None:
        current: int | None = span_id
        for _ in range(64):
            if current is None:
                break
            name = named.get(current)
            if name:
                return name
            current = parents.get(current)
        return agent

    return agent_of


def _piece(item: ReadableSpan | Piece) -> Piece:
    return item if isinstance(item, Piece) else Piece.of_span(item)


def _merged(first: Found, second: Found) -> Found:
    """``first``, with each part it lacks (turns, instructions, output) taken from
    ``second``; the source is the one that gave the conversation."""
    merged = Found(first.source, list(first.inputs), list(first.systems), list(first.outputs),
                   first.input_quality, first.output_quality,
                   first.saw_output or second.saw_output,
                   first.unreadable + second.unreadable)
    if not merged.has_turns and second.has_turns:
        merged.inputs, merged.input_quality = list(second.inputs), second.input_quality
    if not merged.has_system and second.has_system:
        merged.systems = list(second.systems)
    if not merged.has_output and second.has_output and not first.saw_output:
        merged.outputs, merged.output_quality = list(second.outputs), second.output_quality
    if not (first.has_turns or first.has_output) or merged.source == "none":
        merged.source = second.source
    return merged


def _rubric_value(value: Any) -> Any:
    """A rubric attribute: a checklist string, a JSON list, or a list of strings."""
    if isinstance(value, str) and value.lstrip().startswith("["):
        try:
            return safe_json.loads(value)
        except (ValueError, RecursionError):
            return value  # not JSON after all: read it as a checklist
    if isinstance(value, Sequence) and not isinstance(value, str):
        return list(value)
    return value


def _collect(attrs: Mapping[str, Any], mapping: CaptureMapping | None, limits: Limits) -> Found:
    """The first convention with a question (or instructions) gives the input side, the first
    with an output side gives the output: a convention that has one without text (a tool-call
    turn) stops a looser one's text from standing in for it."""
    merged = Found("none")
    candidates: list[Found] = []
    if mapping is not None:
        candidates.append(_mapped(attrs, mapping, limits))
    for reader in READERS:
        found = reader(attrs, limits)
        if found is not None:
            candidates.append(found)
    for found in candidates:
        merged.unreadable += found.unreadable
        if not merged.has_input and found.has_input:
            merged.inputs, merged.systems = found.inputs, found.systems
            merged.input_quality = found.input_quality
            merged.source = found.source
        elif not merged.has_system and found.has_system:
            merged.systems = found.systems
        if not merged.has_output and not merged.saw_output and (found.has_output
                                                                or found.saw_output):
            merged.outputs, merged.output_quality = found.outputs, found.output_quality
            merged.saw_output = found.saw_output or found.has_output
            if merged.source == "none":
                merged.source = found.source
    return merged


def _mapped(attrs: Mapping[str, Any], mapping: CaptureMapping, limits: Limits) -> Found:
    found = Found("mapping")
    for key, role, target in ((mapping.input, "user", found.inputs),
                              (mapping.system, "system", found.systems),
                              (mapping.output, "assistant", found.outputs)):
        if key is None:
            continue
        value = attr_value(attrs, key, limits)
        if value is not None:
            side = "output" if role == "assistant" else "input"
            target.extend(loose_messages(parse_json(value, key), role, key, found, side))
    return found


def _from_extractor(span: ReadableSpan, extractor: Extractor, agent: str | None,
                    rubric: Any) -> Captured:
    try:
        value = extractor(span)
        if value is None:
            return Captured(None, agent=agent, reason=Reason.NO_CONTENT,
                            detail="the extractor returned nothing")
        run = ScorerRun.coerce(value)
    except Exception as exc:  # a user callable: report, never raise on the worker
        return Captured(None, agent=agent, reason=Reason.MALFORMED,
                        detail=f"extractor failed: {type(exc).__name__}: {exc}")
    updates: dict[str, Any] = {"run_id": run_id(span)}
    if rubric is not None and "rubric" not in run.request_context:
        updates["request_context"] = {**run.request_context, "rubric": rubric}
    return Captured(run.model_copy(update=updates), source="extractor", agent=agent)
