"""The steps of an interaction, read from the spans under it: tool calls (name, arguments,
result, error), retrievals (query, documents), LLM calls (model, tokens, the tool calls they
asked for) and handoffs, in time order, bounded (:mod:`otel_scorers.scorers.steps`).

Each convention names these its own way: GenAI ``execute_tool`` spans
(``gen_ai.tool.name``, ``gen_ai.tool.call.arguments`` / ``.result``), OpenInference ``TOOL`` /
``RETRIEVER`` spans (``tool.name``, ``input.value`` / ``output.value``,
``retrieval.documents.N.document.content``; a ``handoff to <agent>`` TOOL span is a handoff),
Traceloop ``tool`` / ``handoff`` spans (``traceloop.entity.*``). An LLM call counts once: a
wrapper LLM span with another LLM span under it (LlamaIndex records three per call), or one
that carries neither messages nor token counts, is not a step.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from otel_scorers import safe_json
from otel_scorers.capture import kinds
from otel_scorers.capture.conventions import Found
from otel_scorers.capture.declared import MAX_DEFINITIONS_CHARS, tools_of
from otel_scorers.capture.pieces import Piece
from otel_scorers.capture.serialized import read_value
from otel_scorers.scorers.run import text_of
from otel_scorers.scorers.steps import MAX_DOCUMENTS, Step, StepCounts, ToolCall, bounded, clip

__all__ = ["step_of_span", "steps_of", "tools_of"]  # (tools_of: capture.declared's)

_TOOL_NAME_KEYS = ("gen_ai.tool.name", "tool.name", "traceloop.entity.name")
_ARGUMENT_KEYS = ("gen_ai.tool.call.arguments", "input.value", "traceloop.entity.input")
_RESULT_KEYS = ("gen_ai.tool.call.result", "output.value", "traceloop.entity.output")
_MODEL_KEYS = ("gen_ai.request.model", "gen_ai.response.model", "llm.model_name")
_INPUT_TOKEN_KEYS = ("gen_ai.usage.input_tokens", "llm.token_count.prompt",
                     "gen_ai.usage.prompt_tokens")
_OUTPUT_TOKEN_KEYS = ("gen_ai.usage.output_tokens", "llm.token_count.completion",
                      "gen_ai.usage.completion_tokens")


def steps_of(pieces: Sequence[Piece], found: Mapping[int, Found],
             agent_of: Callable[[int], str | None], cut: StepCounts | None = None
             ) -> tuple[tuple[Step, ...], int, StepCounts | None]:
    """The steps of ``pieces`` (in time order, the first and the last past the bound), how
    many were left out, and the counts of all when some were (:func:`bounded`; ``cut``: the
    steps the trace buffer already left out). ``found`` is the content read from each LLM
    piece (by span id): its tool calls; ``agent_of`` names the agent a span belongs to."""
    wrappers = {p.parent for p in pieces if p.kind == kinds.LLM and p.parent is not None}
    steps: list[Step] = []
    for piece in sorted(pieces, key=lambda p: (p.start, p.end)):
        step = _step(piece, found.get(piece.span_id), piece.span_id in wrappers,
                     agent_of(piece.span_id))
        if step is not None:
            steps.append(step)
    return bounded(_asked_arguments(_handoff_targets(steps)), cut=cut)


def _handoff_targets(steps: list[Step]) -> list[Step]:
    """A handoff whose span does not name the agent it handed to (OpenLLMetry's
    ``triage → unknown.handoff``) is named after the agent of the first later step that ran
    under another agent; with none, its span's name stays."""
    out = list(steps)
    for index, step in enumerate(out):
        if step.kind != "handoff" or not step.name.startswith(_UNNAMED):
            continue
        after = next((s.agent for s in out[index + 1:] if s.agent and s.agent != step.agent),
                     None)
        out[index] = step.model_copy(update={"name": after or step.name[len(_UNNAMED):]})
    return out


#: The mark of a handoff step whose target its span leaves unnamed (resolved above).
_UNNAMED = "\x00unnamed:"


def step_of_span(span: Any, attrs: Mapping[str, Any]) -> Step | None:
    """The step one span is, read alone (a piece the trace buffer lets go: only its kind,
    name and failure are counted)."""
    return _step(Piece.of_span(span, attrs), None, False, None)


def _asked_arguments(steps: list[Step]) -> list[Step]:
    """Tool steps whose span records the arguments as a bare value (LangChain writes a
    one-argument tool's input as ``"Paris"``) take the JSON arguments the model asked for:
    the earliest unanswered call of that tool by an LLM step before it."""
    asked: dict[str, deque[ToolCall]] = {}  # by tool name: O(1) per step, however long the run
    out = []
    for step in steps:
        taken = step
        if step.kind == "llm":
            for made in step.tool_calls:
                asked.setdefault(made.name, deque()).append(made)
        elif step.kind == "tool":
            waiting = asked.get(step.name)
            call = waiting.popleft() if waiting else None
            if call is not None and call.arguments and not _is_object(step.arguments) \
                    and _is_object(call.arguments):
                taken = step.model_copy(update={"arguments": clip(call.arguments)})
        out.append(taken)
    return out


def _is_object(text: str | None) -> bool:
    if not text or not text.lstrip().startswith("{"):
        return False
    try:
        return isinstance(safe_json.loads(text), dict)
    except ValueError:
        return False


def _step(piece: Piece, found: Found | None, wrapper: bool, agent: str | None
          ) -> Step | None:
    fields = _fields(piece, found, wrapper)
    if fields is None:
        return None
    return Step(**{**fields, "name": str(fields["name"])[:200]}, agent=agent,
                start_ns=piece.start, end_ns=piece.end)


def _fields(piece: Piece, found: Found | None, wrapper: bool) -> dict[str, Any] | None:
    """A step's fields read from its span, by its kind (``None``: not a step)."""
    attrs = piece.attributes or {}
    if piece.kind == kinds.TOOL:
        name = _first_text(attrs, _TOOL_NAME_KEYS) or _strip_prefix(piece.name, "execute_tool ")
        if piece.name.startswith("handoff to "):
            return dict(kind="handoff", name=_text(attrs.get("output.value"))
                        or piece.name[len("handoff to "):])
        if _is_final_answer(name, piece.name, attrs):
            return None  # the answer itself (smolagents), not a step
        arguments, result = _event_io(piece)
        text, failed = tool_result(_first_text(attrs, _RESULT_KEYS) or result)
        return dict(kind="tool", name=name,
                    arguments=clip(tool_arguments(_first_text(attrs, _ARGUMENT_KEYS)
                                                  or arguments)),
                    result=clip(text), error=clip(_error(piece) or failed))
    if piece.kind == kinds.HANDOFF:
        target = _text(attrs.get("gen_ai.handoff.to_agent"))
        named = _text(attrs.get("gen_ai.agent.name"))
        if not target and named and named != _text(attrs.get("gen_ai.handoff.from_agent")):
            target = named  # (OpenLLMetry names the agent handing off here: not a target)
        return dict(kind="handoff", name=target or _UNNAMED + piece.name)
    if piece.kind == kinds.RETRIEVAL:
        return dict(kind="retrieval", name=piece.name, query=clip(_text(attrs.get("input.value"))),
                    documents=_documents(attrs), error=clip(_error(piece)))
    if piece.kind == kinds.LLM and not wrapper:
        input_tokens = _first_int(attrs, _INPUT_TOKEN_KEYS)
        output_tokens = _first_int(attrs, _OUTPUT_TOKEN_KEYS)
        calls: tuple[ToolCall, ...] = tuple(
            call for message in (found.outputs if found else []) for call in message.tool_calls)
        spoken = found is not None and (found.has_input or found.has_output or found.saw_output)
        if not spoken and input_tokens is None and output_tokens is None:
            return None  # not a model call (LlamaIndex's _prepare_chat_with_tools)
        return dict(kind="llm", name=_first_text(attrs, _MODEL_KEYS) or piece.name,
                    input_tokens=input_tokens, output_tokens=output_tokens, tool_calls=calls,
                    error=clip(_error(piece)))
    return None


def _is_final_answer(name: str | None, span_name: str, attrs: Mapping[str, Any]) -> bool:
    """smolagents' ``final_answer`` tool: how its agents give their answer."""
    if name != "final_answer":
        return False
    description = attrs.get("tool.description")
    return span_name == "FinalAnswerTool" or (
        isinstance(description, str) and description.startswith("Provides a final answer"))


#: The keys a framework's envelope adds around a tool's arguments.
_TRACELOOP_INPUT = frozenset({"input_str", "tags", "metadata", "inputs", "kwargs", "run_id",
                              "parent_run_id"})
_CALL_ENVELOPE = frozenset({"args", "kwargs", "sanitize_inputs_outputs"})
MAX_LITERAL_CHARS = 20_000


def tool_arguments(raw: str | None) -> str | None:
    """The arguments the model asked for, out of a framework's envelope (JSON again): the
    ``inputs`` of Traceloop's LangChain input wrapper (``input_str``, ``tags``, ``metadata``,
    ...; its ``input_str``, a Python literal, when there are no ``inputs``), the ``kwargs`` of
    smolagents' and LlamaIndex's call record (``args``, ``sanitize_inputs_outputs``,
    ``kwargs``: the ``args`` when only they are given). Anything else is kept as it is (a
    tool whose one parameter is called ``kwargs`` is read as an envelope too)."""
    if raw is None or not raw.lstrip().startswith("{") or len(raw) > MAX_DEFINITIONS_CHARS:
        return raw
    try:
        value = safe_json.loads(raw)
    except ValueError:
        return raw
    if not isinstance(value, dict) or not value:
        return raw
    keys = set(value)
    inner: Any = None
    if "input_str" in keys and keys <= _TRACELOOP_INPUT:
        inner = value.get("inputs") if isinstance(value.get("inputs"), dict) else _literal(
            value.get("input_str"))
    elif "kwargs" in keys and keys <= _CALL_ENVELOPE and isinstance(value["kwargs"], dict):
        args = value.get("args")
        inner = value["kwargs"] if value["kwargs"] or not isinstance(args, list) or not args \
            else args
    if inner is None:
        return raw
    return json.dumps(inner, ensure_ascii=False, default=str)


def _literal(text: Any) -> Any:
    """A Python literal (a dict's repr), read safely and bounded; ``None`` when it is not one."""
    import ast

    if not isinstance(text, str) or len(text) > MAX_LITERAL_CHARS:
        return None
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, dict | list) else None


def tool_result(raw: str | None) -> tuple[str | None, str | None]:
    """A tool's result as text, and the error it reports: a framework's tool-output dump
    (LangChain ``ToolMessage``, bare or in a Traceloop wrapper; LlamaIndex ``ToolOutput``;
    a list of text parts) is read for its content, so that what grounds an answer is the
    tool's words, not the framework's envelope. Anything else is kept as it is."""
    if raw is None or not raw.lstrip().startswith(("{", "[")) or len(raw) > MAX_DEFINITIONS_CHARS:
        return raw, None
    try:
        value = safe_json.loads(raw)
    except ValueError:
        return raw, None
    if isinstance(value, Mapping) and "tool_name" in value and ("raw_output" in value
                                                                  or "blocks" in value):
        text = text_of(value.get("blocks")) or _text(value.get("raw_output"))  # LlamaIndex
        return text or raw, ("the tool reported an error" if value.get("is_error") is True
                             else None)
    decoded = read_value(value, "tool")
    if decoded.unreadable is not None or not decoded.found:
        return raw, None
    text = "\n".join(m.content for m in decoded.messages if m.content.strip())
    status = _status(value)
    return text, ("the tool reported status error" if status == "error" else None)


def _status(value: Any) -> str | None:
    """``status`` of a LangChain ``ToolMessage`` dump, wherever the dump sits."""
    if isinstance(value, Mapping):
        for key in ("status",):
            if isinstance(value.get(key), str):
                return str(value[key]).lower()
        for key in ("kwargs", "data", "output", "outputs"):
            found = _status(value.get(key))
            if found is not None:
                return found
    return None


def _event_io(piece: Piece) -> tuple[str | None, str | None]:
    """A tool span's arguments and result carried by its span events (strands: the arguments
    in ``gen_ai.tool.message``, the result in ``gen_ai.choice``)."""
    arguments = result = None
    for record in piece.records:
        body = record.body if isinstance(record.body, Mapping) else {}
        if record.event_name == "gen_ai.tool.message" and arguments is None:
            arguments = _text(body.get("content"))
        elif record.event_name == "gen_ai.choice" and result is None:
            result = _text(body.get("message"))
    return arguments, result


def _error(piece: Piece) -> str | None:
    attrs = piece.attributes or {}
    status = attrs.get("gen_ai.tool.status")
    if piece.error is None and isinstance(status, str) and status.lower() in ("error", "failed"):
        return "tool reported status " + status
    return piece.error


def _documents(attrs: Mapping[str, Any]) -> tuple[str, ...]:
    documents = []
    for index in range(MAX_DOCUMENTS):
        content = attrs.get(f"retrieval.documents.{index}.document.content")
        if content is None:
            break
        documents.append(clip(str(content)) or "")
    return tuple(documents)


def _first_text(attrs: Mapping[str, Any], keys: Sequence[str]) -> str | None:
    for key in keys:
        text = _text(attrs.get(key))
        if text:
            return text
    return None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value, default=str)


def _first_int(attrs: Mapping[str, Any], keys: Sequence[str]) -> int | None:
    for key in keys:
        value = attrs.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


def _strip_prefix(text: str, prefix: str) -> str:
    return text[len(prefix):] if text.startswith(prefix) else text
