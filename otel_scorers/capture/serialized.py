"""Reading the values frameworks serialize into span attributes, or refusing to.

OpenInference's ``input.value`` / ``output.value``, Traceloop's ``traceloop.entity.input`` /
``.output`` and Mastra's ``input`` / ``output`` hold whatever the framework passed in or got
back: a plain string, a list of chat messages, a kwargs dict (``{"task": ..., "stream":
false}``), a Traceloop wrapper (``{"inputs": ..., "tags": [...], "kwargs": {...}}``), LangChain
message dumps (``{"lc": 1, "type": "constructor", "id": [..., "AIMessage"], "kwargs": {...}}``,
``{"type": "ai", "data": {...}}``), a LangGraph state or ``Command``, a workflow's state dump,
or a Python repr (``StopEvent(result=AgentOutput(...``). :func:`read_value` turns the shapes it
knows into messages and says how clean they are (:class:`Quality`); anything else is
*unreadable*: never sent to the judge as if it were the user's words or the agent's answer.

Known fields are searched in a fixed order per side, so that an output wrapper's ``kwargs``
(``{"tags": []}``) can never be read as the answer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from otel_scorers import safe_json
from otel_scorers.scorers.run import Message, text_of, tool_calls_of

__all__ = ["BLANK_PLACEHOLDERS", "Decoded", "Quality", "is_blank", "looks_like_repr",
           "read_value"]


class Quality(IntEnum):
    """How trustworthy text read from a value is, best last (comparisons pick the best)."""

    #: framework state decoded by its known shape (LangChain message dumps)
    SERIALIZED = 1
    #: chat messages, plain text, or a known string field of a kwargs dict
    CLEAN = 2


#: What instrumentations write in place of content they were told not to record.
BLANK_PLACEHOLDERS = frozenset({
    "__redacted__", "<redacted>", "[redacted]", "redacted", "<elided>", "[elided]", "<hidden>",
    "[hidden]", "<omitted>", "[omitted]", "***", "<content omitted>", "[content omitted]",
})


def is_blank(text: str) -> bool:
    """Empty, white space, or a redaction placeholder: not content."""
    stripped = text.strip()
    return not stripped or stripped.lower() in BLANK_PLACEHOLDERS \
        or stripped.startswith("[Scrubbed due to ")


_REPR = re.compile(r"^\s*[A-Z][A-Za-z0-9_]*\((?:[a-z_][A-Za-z0-9_]*=|\)|\[|'|\"|<)")
_DICT_REPR = re.compile(r"^\s*[\[{]\s*(?:[\[{]\s*)?'")


def looks_like_repr(text: str) -> bool:
    """A Python ``repr`` of an object or container (``AgentOutput(response=...``,
    ``{'role': ...}``, ``<... object at 0x...>``), not words."""
    return bool(_REPR.match(text) or _DICT_REPR.match(text)) or (
        text.lstrip().startswith("<") and " object at 0x" in text[:300])


@dataclass
class Decoded:
    """Messages read from one value, their quality, or why it could not be read."""

    messages: list[Message] = field(default_factory=list)
    quality: Quality = Quality.CLEAN
    unreadable: str | None = None

    @property
    def found(self) -> bool:
        return any(not is_blank(m.content) for m in self.messages)


#: Fields of a kwargs dict or wrapper that hold the request, in the order they are tried.
INPUT_FIELDS = ("messages", "inputs", "input", "task", "query", "question", "user_msg",
                "user_input", "user_message", "prompt", "message", "request", "args", "text",
                "content")
#: Fields that hold the answer, in the order they are tried.
OUTPUT_FIELDS = ("messages", "outputs", "output", "final_output", "response", "result", "answer",
                 "update", "generations", "message", "content", "text", "value")

_LANGCHAIN_ROLES = {"human": "user", "humanmessage": "user", "ai": "assistant",
                    "aimessage": "assistant", "aimessagechunk": "assistant",
                    "system": "system", "systemmessage": "system", "tool": "tool",
                    "toolmessage": "tool", "function": "tool", "functionmessage": "tool",
                    "chat": "user", "chatmessage": "user"}
_MAX_DEPTH = 8


def read_value(value: Any, role: str) -> Decoded:
    """The messages of a framework value (JSON already decoded) on the ``role`` side
    (``user`` for inputs, ``assistant`` for outputs)."""
    out = Decoded()
    _read(value, role, out, 0)
    if out.messages and not out.found and out.unreadable is None:
        out.messages = [m for m in out.messages if m.tool_calls]  # only tool calls: no text
    return out


def _read(value: Any, role: str, out: Decoded, depth: int) -> None:
    if depth > _MAX_DEPTH or value is None:
        return
    if isinstance(value, str):
        _text(value, role, out, depth)
    elif isinstance(value, Mapping):
        _mapping(value, role, out, depth)
    elif isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        for item in value:
            _read(item, role, out, depth + 1)
    elif isinstance(value, bool | int | float):
        return  # a flag or a count is not a message
    else:
        out.unreadable = out.unreadable or f"a {type(value).__name__} value"


def _text(value: str, role: str, out: Decoded, depth: int) -> None:
    stripped = value.strip()
    if not stripped:
        return
    if stripped[0] in "[{" and depth < _MAX_DEPTH:
        try:
            decoded = safe_json.loads(stripped)
        except (ValueError, RecursionError):
            decoded = None
        if isinstance(decoded, Mapping | list):
            _read(decoded, role, out, depth + 1)
            return
    if looks_like_repr(stripped):
        out.unreadable = out.unreadable or "a Python repr of a framework object"
        return
    out.messages.append(Message(role=role, content=value))


def _mapping(value: Mapping[str, Any], role: str, out: Decoded, depth: int) -> None:
    message = _langchain(value)
    if message is not None:
        out.messages.append(message)
        out.quality = min(out.quality, Quality.SERIALIZED)
        return
    if "role" in value or "parts" in value or value.get("type") == "function_call":
        out.messages.append(Message(role=_role(value.get("role"), role), content=text_of(value),
                                    tool_calls=tool_calls_of(value)))
        return
    for key in INPUT_FIELDS if role == "user" else OUTPUT_FIELDS:
        if key not in value or value[key] in (None, "", [], {}):
            continue
        before = len(out.messages)
        if key == "generations" and isinstance(value[key], Sequence):
            out.quality = min(out.quality, Quality.SERIALIZED)
        _read(value[key], role, out, depth + 1)
        if len(out.messages) > before or out.unreadable:
            return
    keys = ", ".join(sorted(str(k) for k in value)[:8])
    out.unreadable = out.unreadable or f"a JSON object with no known content field ({keys})"


def _langchain(value: Mapping[str, Any]) -> Message | None:
    """A LangChain message dump: constructor form, ``{"type", "data"}`` or a model dump."""
    if value.get("lc") == 1 and isinstance(value.get("id"), list) and \
            isinstance(value.get("kwargs"), Mapping):
        kind = str(value["id"][-1]).lower() if value["id"] else ""
        body = value["kwargs"]
    elif isinstance(value.get("type"), str) and isinstance(value.get("data"), Mapping):
        kind, body = value["type"].lower(), value["data"]
    elif isinstance(value.get("type"), str) and value["type"].lower() in _LANGCHAIN_ROLES \
            and "content" in value and "role" not in value:
        kind, body = value["type"].lower(), value
    else:
        return None
    role = _LANGCHAIN_ROLES.get(kind)
    if role is None:
        return None
    if kind in ("chat", "chatmessage") and isinstance(body.get("role"), str):
        role = _role(body["role"], role)
    return Message(role=role, content=text_of(body.get("content")),
                   tool_calls=tool_calls_of({"tool_calls": _langchain_calls(body)}))


def _langchain_calls(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    calls = body.get("tool_calls") or []
    out = []
    for call in calls if isinstance(calls, list) else []:
        if isinstance(call, Mapping) and "args" in call and "function" not in call:
            out.append({"name": call.get("name"), "arguments": call.get("args"),
                        "id": call.get("id")})
        elif isinstance(call, Mapping):
            out.append(dict(call))
    return out


def _role(value: Any, default: str) -> str:
    role = str(value or default).lower()
    return {"human": "user", "ai": "assistant", "model": "assistant",
            "developer": "system"}.get(role, role)
