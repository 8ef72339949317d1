"""Turn an ended span into a scorer run: read input, instructions and output from its attributes.

Conventions, in order of precedence: a user mapping (attribute names or a callable), GenAI
semantic conventions (``gen_ai.input.messages`` / ``gen_ai.output.messages`` /
``gen_ai.system_instructions``, then the flattened ``gen_ai.prompt.N.*`` /
``gen_ai.completion.N.*``), OpenInference (``llm.input_messages.N.*`` / ``llm.output_messages.N.*``,
then ``input.value`` / ``output.value``), Traceloop (``traceloop.entity.input`` / ``.output``) and
Mastra (``input`` / ``output`` on ``mastra.span.type`` spans). The input side (user turns and
system instructions) comes from the first convention that has any, the output from the first
that has one. When the span itself has neither, the run is assembled from its LLM descendants:
input and instructions from the first call, the response from the last.

Nothing here raises: a span without usable content yields ``Captured.run is None`` with a
:class:`~otel_scorers.emit.names.Reason`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from otel_scorers.capture.conventions import (
    AGENT_NAME_KEYS,
    CaptureError,
    Found,
    Limits,
    attr_value,
    loose_messages,
    parse_json,
)
from otel_scorers.capture.logs import RecordContent, found_in_records
from otel_scorers.capture.pieces import Piece
from otel_scorers.capture.readers import READERS
from otel_scorers.emit.names import RUBRIC_ATTRIBUTE, Reason
from otel_scorers.scorers.run import Message, RunLike, ScorerRun

__all__ = ["CaptureMapping", "Captured", "Extractor", "Limits", "agent_name", "attribute_dict",
           "capture_span"]

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
class CaptureMapping:
    """Attribute names of your own convention (each optional; others fall back to the defaults)."""

    input: str | None = None
    output: str | None = None
    system: str | None = None
    agent: str | None = None


@dataclass(frozen=True)
class Captured:
    """The outcome of capture: a run, or the reason there is none."""

    run: ScorerRun | None
    source: str | None = None
    agent: str | None = None
    reason: str | None = None
    detail: str = ""


def agent_name(span: ReadableSpan, mapping: CaptureMapping | None = None, *,
               attributes: Mapping[str, Any] | None = None) -> str | None:
    attrs = attributes if attributes is not None else (span.attributes or {})
    keys = ((mapping.agent,) if mapping and mapping.agent else ()) + AGENT_NAME_KEYS
    for key in keys:
        value = attrs.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()[:128]
    return None


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
                 rubric: Any = None) -> Captured:
    """Read the run of ``span``.

    ``attributes`` are the span's attributes as they were when it ended (the processor keeps
    them when ``exported_content: strip`` empties the span it exports); ``records`` are the
    content log records emitted for the span itself; ``descendants`` the content under it
    (buffered LLM spans and their records) and ``nested`` how many pieces under it belong to
    nested agent spans instead. ``rubric`` is a configured rubric for this run; an
    ``otel_scorers.rubric`` attribute on the span takes precedence over it.
    """
    limits = limits or Limits()
    attrs: Mapping[str, Any] = attributes if attributes is not None else (span.attributes or {})
    agent = agent_name(span, mapping, attributes=attrs)
    try:
        if extractor is not None:
            return _from_extractor(span, extractor, agent, rubric)
        own = _collect(attrs, mapping, limits)
        if records:
            own = _merged(own, found_in_records(records, limits))
        source = own.source if own.has_input or own.has_output else None
        if not (own.has_turns and own.has_output) and descendants:
            own, source = _assemble(own, [_piece(d) for d in descendants], limits)
    except CaptureError as error:
        return Captured(None, agent=agent, reason=error.reason, detail=str(error))
    if not (own.has_input and own.has_output) and nested:
        return Captured(None, agent=agent, reason=Reason.NESTED_AGENT,
                        detail=f"the content under it ({nested} LLM calls) belongs to nested "
                               "agent spans, which are evaluated on their own")
    if not own.has_output:
        return Captured(None, agent=agent, reason=Reason.NO_CONTENT,
                        detail="no agent output found on the span or its LLM descendants")
    if not own.has_input:
        return Captured(None, agent=agent, reason=Reason.NO_CONTENT,
                        detail="no agent input found on the span or its LLM descendants")
    context: dict[str, Any] = {}
    span_rubric = attrs.get(RUBRIC_ATTRIBUTE)
    chosen = span_rubric if span_rubric not in (None, "") else rubric
    if chosen is not None:
        context["rubric"] = _rubric_value(chosen)
    run = ScorerRun(run_id=run_id(span), input_messages=tuple(own.inputs),
                    system_messages=tuple(own.systems), output=tuple(own.outputs),
                    request_context=context)
    return Captured(run, source=source, agent=agent)


def _piece(item: ReadableSpan | Piece) -> Piece:
    return item if isinstance(item, Piece) else Piece.of_span(item)


def _merged(first: Found, second: Found) -> Found:
    """``first``, with each part it lacks (turns, instructions, output) taken from
    ``second``; the source is the one that gave the conversation."""
    merged = _filled(first, second, second.inputs, second.systems, second.outputs)
    if not (first.has_turns or first.has_output) or merged.source == "none":
        merged.source = second.source
    return merged


def _filled(own: Found, other: Found, inputs: list[Message], systems: list[Message],
            outputs: list[Message]) -> Found:
    merged = Found(own.source, list(own.inputs), list(own.systems), list(own.outputs))
    if not merged.has_turns and any(m.content.strip() for m in inputs):
        merged.inputs = list(inputs)
    if not merged.has_system and any(m.content.strip() for m in systems):
        merged.systems = list(systems)
    if not merged.has_output and any(m.content.strip() for m in outputs):
        merged.outputs = list(outputs)
    return merged


def _rubric_value(value: Any) -> Any:
    """A rubric attribute: a checklist string, a JSON list, or a list of strings."""
    if isinstance(value, str) and value.lstrip().startswith("["):
        try:
            return json.loads(value)
        except (ValueError, RecursionError):
            return value  # not JSON after all: read it as a checklist
    if isinstance(value, Sequence) and not isinstance(value, str):
        return list(value)
    return value


def _collect(attrs: Mapping[str, Any], mapping: CaptureMapping | None, limits: Limits) -> Found:
    merged = Found("none")
    candidates: list[Found] = []
    if mapping is not None:
        candidates.append(_mapped(attrs, mapping, limits))
    for reader in READERS:
        found = reader(attrs, limits)
        if found is not None:
            candidates.append(found)
    for found in candidates:
        if not merged.has_input and found.has_input:
            merged.inputs, merged.systems = found.inputs, found.systems
            merged.source = found.source
        if not merged.has_output and found.has_output:
            merged.outputs = found.outputs
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
            target.extend(loose_messages(parse_json(value, key), role))
    return found


def _assemble(own: Found, pieces: Sequence[Piece], limits: Limits) -> tuple[Found, str]:
    """Fill what the agent span lacks from its LLM calls: first call's input, last's output.

    A call's content comes from its span attributes, else from its log records (a span with
    both, ``SPAN_AND_EVENT``, is read once).
    """
    calls: list[tuple[Piece, Found]] = []
    for piece in pieces:
        try:
            found = _collect(piece.attributes or {}, None, limits)
            if piece.records:
                found = _merged(found, found_in_records(piece.records, limits))
        except CaptureError:
            continue  # one unreadable LLM call does not spoil the others
        if found.has_input or found.has_output:
            calls.append((piece, found))
    if not calls:
        return own, own.source
    first = min((c for c in calls if c[1].has_input), key=lambda c: c[0].start, default=None)
    last = max((c for c in calls if c[1].has_output), key=lambda c: c[0].end, default=None)
    merged = _filled(own, own, first[1].inputs if first else [],
                     first[1].systems if first else [],
                     _final_text(last[1].outputs) if last else [])
    return merged, f"trace:{calls[0][1].source}"


def _final_text(outputs: list[Message]) -> list[Message]:
    return [m for m in outputs if m.content.strip()] or outputs


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
