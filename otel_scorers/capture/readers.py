"""Readers that pull an agent run's input, instructions and output out of span attributes.

One reader per convention in use: OpenTelemetry GenAI semantic conventions (structured messages
and the older flattened ``gen_ai.prompt.N.*``), OpenInference, Traceloop/OpenLLMetry and Mastra.
Each returns the messages it found, or ``None`` when the span carries none of its attributes.
Values may be JSON strings or structured values (maps and lists arrive that way over OTLP).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from otel_scorers.capture.conventions import (
    Found,
    Limits,
    attr_value,
    loose_messages,
    parse_json,
    structured_messages,
)
from otel_scorers.scorers.run import Message, text_of, tool_calls_of

__all__ = ["READERS", "read_genai"]

Attributes = Mapping[str, Any]


def _loose(attrs: Attributes, key: str, role: str, limits: Limits, found: Found) -> list[Message]:
    value = attr_value(attrs, key, limits)
    if value is None:
        return []
    side = "output" if role == "assistant" else "input"
    return loose_messages(parse_json(value, key), role, key, found, side)[: limits.max_messages]


def _split_systems(messages: list[Message]) -> tuple[list[Message], list[Message]]:
    systems = [m for m in messages if m.role in ("system", "developer")]
    others = [m for m in messages if m.role not in ("system", "developer")]
    return others, systems


# -- GenAI semantic conventions -----------------------------------------------------------------
def read_genai(attrs: Attributes, limits: Limits) -> Found | None:
    keys = ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions")
    if not any(k in attrs for k in keys):
        return None
    found = Found("genai")
    raw_in = attr_value(attrs, keys[0], limits)
    if raw_in is not None:
        found.inputs, found.systems = _split_systems(
            structured_messages(raw_in, "user", keys[0], limits))
    raw_sys = attr_value(attrs, keys[2], limits)
    if raw_sys is not None:
        found.systems = structured_messages(raw_sys, "system", keys[2], limits) + found.systems
    raw_out = attr_value(attrs, keys[1], limits)
    if raw_out is not None:
        found.outputs = structured_messages(raw_out, "assistant", keys[1], limits)
        found.saw_output = True
    return found


#: Roles some producers use that mean a standard one (smolagents: ``tool-call`` is the
#: assistant's call, ``tool-response`` the tool's answer).
_ROLES = {"tool-call": "assistant", "tool-response": "tool", "human": "user", "ai": "assistant",
          "model": "assistant"}


def _indexed(attrs: Attributes, prefix: str, role_key: str, content_keys: Sequence[str],
             default_role: str, limits: Limits) -> list[Message]:
    messages: list[Message] = []
    for index in range(limits.max_messages):
        base = f"{prefix}.{index}."
        role = attrs.get(base + role_key)
        contents = [attr_value(attrs, base + key, limits) for key in content_keys]
        calls = _numbered_tool_calls(attrs, base)
        if role is None and all(c is None for c in contents) and not calls:
            if index > 0:
                break
            continue  # some producers start at 1
        text = "\n".join(text_of(parse_json(c, base)) for c in contents if c is not None)
        if not text:
            text = _numbered_parts(attrs, base, limits)
        name = str(role or default_role)
        messages.append(Message(role=_ROLES.get(name, name), content=text, tool_calls=calls))
    return messages


def _numbered_parts(attrs: Attributes, base: str, limits: Limits) -> str:
    parts = []
    for index in range(limits.max_messages):
        part = attr_value(attrs, f"{base}message.contents.{index}.message_content.text", limits)
        if part is None:
            break
        parts.append(str(part))
    return "\n".join(parts)


def _numbered_tool_calls(attrs: Attributes, base: str) -> tuple[Any, ...]:
    """OpenInference ``message.tool_calls.N.tool_call.{id,function.name,function.arguments}``
    (some producers number them from 1)."""
    calls = []
    missing = 0
    for index in range(32):
        prefix = f"{base}message.tool_calls.{index}.tool_call."
        name = attrs.get(prefix + "function.name")
        if name is None:
            missing += 1
            if missing > 1:
                break
            continue
        calls.append({"name": name, "arguments": attrs.get(prefix + "function.arguments"),
                      "id": attrs.get(prefix + "id")})
    return tool_calls_of({"tool_calls": [{"function": c, "id": c["id"]} for c in calls]})


def read_genai_flat(attrs: Attributes, limits: Limits) -> Found | None:
    if "gen_ai.prompt.0.content" not in attrs and "gen_ai.completion.0.content" not in attrs \
            and "gen_ai.prompt.0.role" not in attrs and "gen_ai.prompt.1.content" not in attrs:
        return None
    found = Found("genai_flat")
    found.inputs, found.systems = _split_systems(
        _indexed(attrs, "gen_ai.prompt", "role", ("content",), "user", limits))
    found.outputs = _indexed(attrs, "gen_ai.completion", "role", ("content",), "assistant", limits)
    return found


# -- OpenInference --------------------------------------------------------------------------------
def read_openinference_messages(attrs: Attributes, limits: Limits) -> Found | None:
    if not any(key in attrs for key in _OI_PROBE):
        return None
    found = Found("openinference")
    found.inputs, found.systems = _split_systems(_indexed(
        attrs, "llm.input_messages", "message.role", ("message.content",), "user", limits))
    found.outputs = _indexed(attrs, "llm.output_messages", "message.role", ("message.content",),
                             "assistant", limits)
    found.saw_output = bool(found.outputs)
    return found


_OI_PROBE = ("llm.input_messages.0.message.role", "llm.input_messages.0.message.content",
             "llm.output_messages.0.message.role", "llm.output_messages.0.message.content")


def read_openinference_values(attrs: Attributes, limits: Limits) -> Found | None:
    if "input.value" not in attrs and "output.value" not in attrs:
        return None
    found = Found("openinference_value")
    found.inputs, found.systems = _split_systems(
        _loose(attrs, "input.value", "user", limits, found))
    found.outputs = _loose(attrs, "output.value", "assistant", limits, found)
    return found


# -- Traceloop / OpenLLMetry ----------------------------------------------------------------------
def read_traceloop(attrs: Attributes, limits: Limits) -> Found | None:
    if "traceloop.entity.input" not in attrs and "traceloop.entity.output" not in attrs:
        return None
    found = Found("traceloop")
    found.inputs, found.systems = _split_systems(
        _loose(attrs, "traceloop.entity.input", "user", limits, found))
    found.outputs = _loose(attrs, "traceloop.entity.output", "assistant", limits, found)
    return found


# -- Mastra ---------------------------------------------------------------------------------------
def read_mastra(attrs: Attributes, limits: Limits) -> Found | None:
    if "mastra.span.type" not in attrs:
        return None
    found = Found("mastra")
    found.inputs, found.systems = _split_systems(_loose(attrs, "input", "user", limits, found))
    found.outputs = _loose(attrs, "output", "assistant", limits, found)
    return found


Reader = Callable[[Attributes, Limits], "Found | None"]

#: Readers in order of precedence: the first with input gives the input side, the first with
#: output gives the output.
READERS: tuple[Reader, ...] = (
    read_genai, read_genai_flat, read_openinference_messages, read_openinference_values,
    read_traceloop, read_mastra,
)

#: Attributes that mark a span as carrying LLM conversation content (for trace assembly).
