"""What capture reads and how: the primitives of every convention reader.

Content attributes checked for size and type (:func:`attr_value`), JSON text decoded
(:func:`parse_json`), messages from structured or loose payloads, the attribute names that
hold conversation content in each convention (:func:`is_content_key`, used by trace assembly
and by ``exported_content: strip``) and agent names. The readers themselves, one per convention,
are in :mod:`otel_scorers.capture.readers`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from otel_scorers import safe_json
from otel_scorers.capture.serialized import Quality, is_blank, looks_like_repr, read_value
from otel_scorers.names import Reason
from otel_scorers.scorers.run import Message, messages_from

__all__ = [
    "AGENT_NAME_KEYS",
    "CONTENT_KEYS",
    "CaptureError",
    "Found",
    "Limits",
    "agent_from_span_name",
    "is_content_key",
    "loose_messages",
    "parse_json",
    "structured_messages",
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
    """What one convention (or several, merged) found on a span or log record.

    ``input_quality`` / ``output_quality`` say how clean each side is (chat messages and plain
    text beat decoded framework state); ``saw_output`` that the convention has an output side
    even when it holds no text (a turn that ends in a tool call), so that a looser convention's
    text never stands in for it; ``unreadable`` notes content that was there and could not be
    read (``input.value: a Python repr ...``).
    """

    source: str
    inputs: list[Message] = field(default_factory=list)
    systems: list[Message] = field(default_factory=list)
    outputs: list[Message] = field(default_factory=list)
    input_quality: Quality = Quality.CLEAN
    output_quality: Quality = Quality.CLEAN
    saw_output: bool = False
    unreadable: list[str] = field(default_factory=list)

    @property
    def has_input(self) -> bool:
        return self.has_turns or self.has_system

    @property
    def has_turns(self) -> bool:
        """Conversation turns (user, tool, earlier assistant), not only instructions."""
        return any(not is_blank(m.content) for m in self.inputs)

    @property
    def has_user(self) -> bool:
        """A user turn with text: a question to judge the answer against."""
        return any(m.role == "user" and not is_blank(m.content) for m in self.inputs)

    @property
    def has_system(self) -> bool:
        return any(not is_blank(m.content) for m in self.systems)

    @property
    def has_output(self) -> bool:
        """An answer with text (a Python repr of a framework object, as an instrumentation
        may write a tool call's turn, is never one)."""
        return any(is_answer(m.content) for m in self.outputs)


def agent_from_span_name(attrs: Mapping[str, Any], name: Any) -> str | None:
    """The agent name a framework gives where no agent-name attribute holds it, read from
    OpenInference spans: smolagents names an agent span ``<agent name>.run``
    (``ToolCallingAgent.run`` when the agent has no name: none); LangChain's ``create_agent``
    puts ``lc_agent_name`` in a span's ``metadata``; a LangGraph graph's root span bears the
    graph's name (an agent's name; ``LangGraph`` when it has none)."""
    kind = attrs.get("openinference.span.kind")
    if not isinstance(name, str):
        return None
    if kind == "AGENT" and name.endswith(".run") and name[:-4] \
            and name[:-4] not in _AGENT_CLASSES:
        return name[:-4][:128]
    metadata = attrs.get("metadata")
    if kind != "CHAIN" or not isinstance(metadata, str) or len(metadata) > MAX_METADATA_CHARS \
            or "ls_integration" not in metadata:
        return None
    try:
        parsed = safe_json.loads(metadata)
    except ValueError:
        return None
    if not isinstance(parsed, Mapping):
        return None
    named = parsed.get("lc_agent_name")
    if isinstance(named, str) and named.strip():
        return named.strip()[:128]
    if parsed.get("ls_integration") == "langgraph" and "langgraph_node" not in parsed \
            and name.strip() and name != "LangGraph":
        return name.strip()[:128]  # the graph's own root span
    return None


#: The longest OpenInference ``metadata`` value read for an agent's name.
MAX_METADATA_CHARS = 16_384


#: smolagents' agent classes: ``<class>.run`` is an unnamed agent's span.
_AGENT_CLASSES = frozenset({"ToolCallingAgent", "CodeAgent", "MultiStepAgent"})


def is_answer(text: str) -> bool:
    """Text that can be an answer: not blank, not a repr (``ResponseFunctionToolCall(...)``)."""
    return not is_blank(text) and not looks_like_repr(text)


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
        return safe_json.loads(value)
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


def loose_messages(value: Any, role: str, key: str, found: Found, side: str) -> list[Message]:
    """Messages from a framework value (Traceloop entities, OpenInference values, Mastra, a
    user mapping) read by :func:`~otel_scorers.capture.serialized.read_value`; what cannot be
    read is noted on ``found`` (``side``: ``input`` or ``output``), never turned into text."""
    decoded = read_value(value, role)
    if decoded.unreadable and not decoded.found:
        found.unreadable.append(f"{key}: {decoded.unreadable}")
    if side == "output":
        found.output_quality = min(found.output_quality, decoded.quality)
    else:
        found.input_quality = min(found.input_quality, decoded.quality)
    return decoded.messages


CONTENT_KEYS: tuple[str, ...] = (
    "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.prompt.0.content",
    "gen_ai.completion.0.content", "llm.input_messages.0.message.role",
    "llm.output_messages.0.message.role", "llm.input_messages.0.message.content",
)

#: Every attribute that holds conversation content in a convention capture reads (and the
#: neighbours of theirs that hold content too: tool-call arguments and results, OpenInference
#: prompt templates, invocation parameters (the OpenAI Agents SDK puts the agent's
#: instructions there), retrieved documents, embedded texts, reranked documents).
#: ``exported_content: strip`` removes these from exported spans and logs
#: (:mod:`otel_scorers.capture.strip`).
STRIP_EXACT: frozenset[str] = frozenset({
    "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions",
    "gen_ai.prompt", "gen_ai.completion", "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result", "input.value", "output.value", "llm.prompts",
    "llm.invocation_parameters", "tool.parameters", "reranker.query",
    "traceloop.entity.input", "traceloop.entity.output",
})
STRIP_PREFIXES: tuple[str, ...] = (
    "gen_ai.prompt.", "gen_ai.completion.", "llm.input_messages.", "llm.output_messages.",
    "llm.prompt_template.", "llm.prompts.",
)
#: Indexed OpenInference documents and embeddings: their text and metadata are content, their
#: ids and scores are not.
STRIP_INDEXED: tuple[str, ...] = (
    "retrieval.documents.", "embedding.embeddings.", "reranker.input_documents.",
    "reranker.output_documents.",
)
_INDEXED_CONTENT: tuple[str, ...] = (".content", ".metadata", ".text")
#: Mastra keeps content under plain ``input`` / ``output`` on its own spans.
MASTRA_CONTENT: frozenset[str] = frozenset({"input", "output"})


def is_content_key(key: str, attrs: Attributes | None = None) -> bool:
    """Whether attribute ``key`` holds conversation content (``attrs``: the span's others, to
    recognise Mastra spans)."""
    if key in STRIP_EXACT or key.startswith(STRIP_PREFIXES):
        return True
    if key.startswith(STRIP_INDEXED) and key.endswith(_INDEXED_CONTENT):
        return True
    return key in MASTRA_CONTENT and attrs is not None and "mastra.span.type" in attrs

AGENT_NAME_KEYS: tuple[str, ...] = (
    "gen_ai.agent.name", "agent.name", "traceloop.entity.name", "agent.id", "gen_ai.agent.id",
)
