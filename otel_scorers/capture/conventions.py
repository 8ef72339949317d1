"""Readers that pull an agent run's input, instructions and output out of span attributes.

One reader per convention in use: OpenTelemetry GenAI semantic conventions (structured messages
and the older flattened ``gen_ai.prompt.N.*``), OpenInference, Traceloop/OpenLLMetry and Mastra.
Each returns the messages it found, or ``None`` when the span carries none of its attributes.
Values may be JSON strings or structured values (maps and lists arrive that way over OTLP).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from otel_scorers.emit.names import Reason
from otel_scorers.scorers.run import Message, messages_from, text_of, tool_calls_text

__all__ = [
    "CONTENT_KEYS",
    "READERS",
    "CaptureError",
    "Found",
    "Limits",
    "is_content_key",
    "loose_messages",
    "value_size",
]

Attributes = Mapping[str, Any]


class CaptureError(Exception):
    """Content exists but cannot be used; ``reason`` is a :class:`Reason` value."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Limits:
    """Bounds on what capture will read: larger or deeper values are skipped, not parsed."""

    max_value_chars: int = 1_000_000
    max_messages: int = 500


@dataclass
class Found:
    """What one convention found on a span."""

    source: str
    inputs: list[Message] = field(default_factory=list)
    systems: list[Message] = field(default_factory=list)
    outputs: list[Message] = field(default_factory=list)

    @property
    def has_input(self) -> bool:
        return any(m.content.strip() for m in self.inputs + self.systems)

    @property
    def has_turns(self) -> bool:
        """Conversation turns (user, tool, earlier assistant), not only instructions."""
        return any(m.content.strip() for m in self.inputs)

    @property
    def has_system(self) -> bool:
        return any(m.content.strip() for m in self.systems)

    @property
    def has_output(self) -> bool:
        return any(m.content.strip() for m in self.outputs)


def value_size(value: Any, budget: int = 1 << 62) -> int:
    """Approximate characters held by an attribute value of any kind (strings, byte strings,
    arrays, the nested lists and maps of structured log attributes); counting stops once past
    ``budget``, so a huge value costs no more than the limit it breaks."""
    if isinstance(value, str | bytes | bytearray):
        return len(value)
    if isinstance(value, Mapping):
        total = 0
        for key, item in value.items():
            total += len(str(key)) + value_size(item, budget - total)
            if total > budget:
                break
        return total
    if isinstance(value, Sequence):
        total = 0
        for item in value:
            total += 8 + value_size(item, budget - total)
            if total > budget:
                break
        return total
    return 8


def attr_value(attrs: Attributes, key: str, limits: Limits) -> Any:
    """A content attribute, checked for size and type; ``None`` when absent."""
    value = attrs.get(key)
    if value is None:
        return None
    if isinstance(value, bytes | bytearray):
        raise CaptureError(Reason.MALFORMED, f"{key} holds binary data, not text")
    if isinstance(value, str):
        if len(value) > limits.max_value_chars:
            raise CaptureError(Reason.TOO_LARGE, f"{key} is {len(value)} characters, over the "
                                                 f"{limits.max_value_chars} capture limit")
        if "\x00" in value:
            raise CaptureError(Reason.MALFORMED, f"{key} contains NUL bytes")
        return value
    if isinstance(value, Sequence) and all(isinstance(v, str) for v in value):
        total = sum(len(v) for v in value)
        if total > limits.max_value_chars:
            raise CaptureError(Reason.TOO_LARGE, f"{key} totals {total} characters")
        return list(value)
    size = value_size(value, limits.max_value_chars)
    if size > limits.max_value_chars:
        raise CaptureError(Reason.TOO_LARGE, f"{key} holds over {limits.max_value_chars} "
                                             "characters of structured content")
    return value


def parse_json(value: Any, key: str) -> Any:
    """JSON text is decoded; other text and structured values are returned as they are."""
    if not isinstance(value, str):
        return value
    stripped = value.lstrip()
    if not stripped or stripped[0] not in "[{":
        return value
    try:
        return json.loads(value)
    except (ValueError, RecursionError) as exc:
        raise CaptureError(Reason.MALFORMED, f"{key} is not valid JSON: {exc}") from None


def structured_messages(value: Any, role: str, key: str, limits: Limits) -> list[Message]:
    """Messages from a JSON/structured value that must hold messages (GenAI conventions)."""
    parsed = parse_json(value, key)
    try:
        messages = messages_from(parsed, role)
    except (TypeError, RecursionError) as exc:
        raise CaptureError(Reason.MALFORMED, f"{key} holds no readable messages: {exc}") from None
    return messages[: limits.max_messages]


_LOOSE_KEYS = ("messages", "input", "inputs", "prompt", "query", "question", "args", "kwargs",
               "content", "text", "output", "outputs", "answer", "response", "result",
               "completion", "value")


def loose_messages(value: Any, role: str, depth: int = 0) -> list[Message]:
    """Best-effort text from an arbitrary payload (Traceloop entities, OpenInference values).

    Message lists are read as messages; mappings are searched for the usual keys (``messages``,
    ``input``, ``prompt``, ``output``, ...); anything else is kept as compact JSON text.
    """
    if depth > 6 or value is None:
        return []
    if isinstance(value, str):
        return [Message(role=role, content=value)] if value.strip() else []
    if isinstance(value, Mapping):
        if "role" in value or "parts" in value:
            return [Message(role=str(value.get("role") or role), content=text_of(value))]
        for key in _LOOSE_KEYS:
            if key in value and value[key] not in (None, "", [], {}):
                found = loose_messages(value[key], role, depth + 1)
                if found:
                    return found
        return [Message(role=role, content=json.dumps(value, default=str)[:100_000])]
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        if value and all(isinstance(v, Mapping) and ("role" in v or "parts" in v) for v in value):
            return messages_from(list(value), role)
        texts = [m for item in value for m in loose_messages(item, role, depth + 1)]
        return texts
    return [Message(role=role, content=str(value))]


def _loose(attrs: Attributes, key: str, role: str, limits: Limits) -> list[Message]:
    value = attr_value(attrs, key, limits)
    if value is None:
        return []
    return loose_messages(parse_json(value, key), role)[: limits.max_messages]


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
    return found


def _indexed(attrs: Attributes, prefix: str, role_key: str, content_keys: Sequence[str],
             default_role: str, limits: Limits) -> list[Message]:
    messages: list[Message] = []
    for index in range(limits.max_messages):
        base = f"{prefix}.{index}."
        role = attrs.get(base + role_key)
        contents = [attr_value(attrs, base + key, limits) for key in content_keys]
        if role is None and all(c is None for c in contents):
            if index > 0:
                break
            continue  # some producers start at 1
        text = "\n".join(text_of(parse_json(c, base)) for c in contents if c is not None)
        if not text:
            text = _numbered_parts(attrs, base, limits) or _numbered_tool_calls(attrs, base)
        messages.append(Message(role=str(role or default_role), content=text))
    return messages


def _numbered_parts(attrs: Attributes, base: str, limits: Limits) -> str:
    parts = []
    for index in range(limits.max_messages):
        part = attr_value(attrs, f"{base}message.contents.{index}.message_content.text", limits)
        if part is None:
            break
        parts.append(str(part))
    return "\n".join(parts)


def _numbered_tool_calls(attrs: Attributes, base: str) -> str:
    """OpenInference ``message.tool_calls.N.tool_call.function.{name,arguments}`` as text."""
    calls = []
    for index in range(32):
        prefix = f"{base}message.tool_calls.{index}.tool_call.function."
        name = attrs.get(prefix + "name")
        if name is None:
            break
        calls.append({"name": name, "arguments": attrs.get(prefix + "arguments")})
    return tool_calls_text({"tool_calls": calls}) if calls else ""


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
    return found


_OI_PROBE = ("llm.input_messages.0.message.role", "llm.input_messages.0.message.content",
             "llm.output_messages.0.message.role", "llm.output_messages.0.message.content")


def read_openinference_values(attrs: Attributes, limits: Limits) -> Found | None:
    if "input.value" not in attrs and "output.value" not in attrs:
        return None
    found = Found("openinference_value")
    found.inputs, found.systems = _split_systems(_loose(attrs, "input.value", "user", limits))
    found.outputs = _loose(attrs, "output.value", "assistant", limits)
    return found


# -- Traceloop / OpenLLMetry ----------------------------------------------------------------------
def read_traceloop(attrs: Attributes, limits: Limits) -> Found | None:
    if "traceloop.entity.input" not in attrs and "traceloop.entity.output" not in attrs:
        return None
    found = Found("traceloop")
    found.inputs, found.systems = _split_systems(
        _loose(attrs, "traceloop.entity.input", "user", limits))
    found.outputs = _loose(attrs, "traceloop.entity.output", "assistant", limits)
    return found


# -- Mastra ---------------------------------------------------------------------------------------
def read_mastra(attrs: Attributes, limits: Limits) -> Found | None:
    if "mastra.span.type" not in attrs:
        return None
    found = Found("mastra")
    found.inputs, found.systems = _split_systems(_loose(attrs, "input", "user", limits))
    found.outputs = _loose(attrs, "output", "assistant", limits)
    return found


Reader = Callable[[Attributes, Limits], "Found | None"]

#: Readers in order of precedence: the first with input gives the input side, the first with
#: output gives the output.
READERS: tuple[Reader, ...] = (
    read_genai, read_genai_flat, read_openinference_messages, read_openinference_values,
    read_traceloop, read_mastra,
)

#: Attributes that mark a span as carrying LLM conversation content (for trace assembly).
CONTENT_KEYS: tuple[str, ...] = (
    "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.prompt.0.content",
    "gen_ai.completion.0.content", "llm.input_messages.0.message.role",
    "llm.output_messages.0.message.role", "llm.input_messages.0.message.content",
)

#: Every attribute that holds conversation content in a convention capture reads (and a few
#: neighbours of theirs that hold content too: tool-call arguments and results, OpenInference
#: prompt templates). ``exported_content: strip`` removes these from exported spans and logs.
STRIP_EXACT: frozenset[str] = frozenset({
    "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions",
    "gen_ai.prompt", "gen_ai.completion", "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result", "input.value", "output.value", "llm.prompts",
    "traceloop.entity.input", "traceloop.entity.output",
})
STRIP_PREFIXES: tuple[str, ...] = (
    "gen_ai.prompt.", "gen_ai.completion.", "llm.input_messages.", "llm.output_messages.",
    "llm.prompt_template.", "llm.prompts.",
)
#: Mastra keeps content under plain ``input`` / ``output`` on its own spans.
MASTRA_CONTENT: frozenset[str] = frozenset({"input", "output"})


def is_content_key(key: str, attrs: Attributes | None = None) -> bool:
    """Whether attribute ``key`` holds conversation content (``attrs``: the span's others, to
    recognise Mastra spans)."""
    if key in STRIP_EXACT or key.startswith(STRIP_PREFIXES):
        return True
    return key in MASTRA_CONTENT and attrs is not None and "mastra.span.type" in attrs

AGENT_NAME_KEYS: tuple[str, ...] = (
    "gen_ai.agent.name", "agent.name", "traceloop.entity.name", "agent.id", "gen_ai.agent.id",
)
