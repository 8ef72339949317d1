"""GenAI content carried by log records (events) instead of span attributes.

Two shapes are read, each joined to its span by the record's trace and span ids:

- ``gen_ai.client.inference.operation.details`` (GenAI semantic conventions; what
  ``opentelemetry-util-genai`` instrumentations emit with
  ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=EVENT_ONLY`` or ``SPAN_AND_EVENT``): the
  ``gen_ai.input.messages`` / ``gen_ai.output.messages`` / ``gen_ai.system_instructions``
  attributes as structured lists (read by the same GenAI reader as span attributes);
- the older per-message events, one record per message, in order: ``gen_ai.system.message``,
  ``gen_ai.user.message``, ``gen_ai.assistant.message``, ``gen_ai.tool.message`` (body
  ``{"content": ...}``) and ``gen_ai.choice`` (body ``{"message": {"content": ...}}``).

The same events also come as *span events* (strands-agents writes the whole conversation
there: the per-message events by default, ``operation.details`` with the newer conventions);
:func:`span_records` reads them as records, their attributes standing for the body.

:func:`content_of` keeps what a record holds of these (a record with none is not kept);
:func:`found_in_records` reads the run's messages from the records of one span.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from otel_scorers.capture.conventions import (
    CaptureError,
    Found,
    Limits,
    is_content_key,
    parse_json,
    value_size,
)
from otel_scorers.capture.readers import read_genai
from otel_scorers.names import Reason
from otel_scorers.scorers.run import Message, text_of

__all__ = [
    "OPERATION_DETAILS_EVENT",
    "ORIGINAL_EVENTS",
    "RecordContent",
    "content_of",
    "found_in_records",
    "has_genai_events",
    "original_events",
    "span_records",
    "strip_record_body",
]

OPERATION_DETAILS_EVENT = "gen_ai.client.inference.operation.details"
MESSAGE_EVENTS: Mapping[str, str] = {
    "gen_ai.system.message": "system", "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant", "gen_ai.tool.message": "tool",
}
CHOICE_EVENT = "gen_ai.choice"
#: Body keys of the per-message events that are metadata, not content.
_BODY_METADATA = ("index", "finish_reason", "id", "role")


@dataclass(frozen=True)
class RecordContent:
    """The content of one log record: its content attributes and (for per-message events)
    its body, with the record's event name and time. ``size`` approximates the characters
    held, for the buffer's byte bound."""

    event_name: str
    timestamp: int
    attributes: Mapping[str, Any]
    body: Any = None
    size: int = 0


def content_of(event_name: str | None, attributes: Mapping[str, Any] | None, body: Any,
               timestamp: int | None) -> RecordContent | None:
    """The GenAI content of a log record, or ``None`` when it carries none.

    Content attributes are recognised whatever the event name (an instrumentation may name
    its event differently); a body is content only for the per-message events.
    """
    attrs = {key: value for key, value in (attributes or {}).items() if is_content_key(key)}
    name = event_name or ""
    per_message = name in MESSAGE_EVENTS or name == CHOICE_EVENT
    kept_body = body if per_message and body not in (None, "", {}) else None
    if not attrs and kept_body is None:
        return None
    size = value_size(attrs) + (value_size(kept_body) if kept_body is not None else 0)
    return RecordContent(name, timestamp or 0, attrs, kept_body, size)


def span_records(events: Sequence[Any]) -> tuple[RecordContent, ...]:
    """The GenAI content of a span's events (``span.events``), as records of that span."""
    out: list[RecordContent] = []
    for event in events:
        name = getattr(event, "name", "")
        if not isinstance(name, str) or not name.startswith("gen_ai."):
            continue
        attributes = getattr(event, "attributes", None) or {}
        per_message = name in MESSAGE_EVENTS or name == CHOICE_EVENT
        content = content_of(name, attributes, dict(attributes) if per_message else None,
                             getattr(event, "timestamp", None))
        if content is not None:
            out.append(content)
    return tuple(out)


#: Where ``exported_content: strip`` keeps a span's events as they were, for capture, when it
#: gives the exported span events without their text.
ORIGINAL_EVENTS = "_otel_scorers_events"


def original_events(span: Any) -> Sequence[Any]:
    """A span's events as they were when it ended (before stripping), for capture."""
    kept = getattr(span, ORIGINAL_EVENTS, None)
    if kept is not None:
        return tuple(kept)
    return getattr(span, "events", None) or ()


def has_genai_events(events: Sequence[Any]) -> bool:
    """Whether any of a span's events is a GenAI content event (cheap: names only)."""
    return any(str(getattr(event, "name", "")).startswith("gen_ai.") for event in events)


def strip_record_body(event_name: str | None, body: Any) -> Any:
    """A per-message event's body without its content (``exported_content: strip``): the
    metadata keys stay, message text and tool-call arguments go."""
    if event_name not in MESSAGE_EVENTS and event_name != CHOICE_EVENT:
        return body
    if not isinstance(body, Mapping):
        return None
    kept = {key: body[key] for key in _BODY_METADATA if key in body}
    message = body.get("message")
    if isinstance(message, Mapping) and "role" in message:
        kept["message"] = {"role": message["role"]}
    return kept or None


def found_in_records(records: Sequence[RecordContent], limits: Limits) -> Found:
    """The messages of one LLM call from its records (in emission order).

    Raises :class:`CaptureError` for content that is there but unusable (too large, not
    messages), as span attributes do.
    """
    found = Found("genai_event")
    for record in records:
        if record.attributes:
            genai = read_genai(record.attributes, limits)
            if genai is not None:
                _merge(found, genai)
        if record.body is not None:
            _per_message(found, record, limits)
    return found


def _merge(into: Found, other: Found) -> None:
    if not into.has_input and other.has_input:
        into.inputs, into.systems = other.inputs, other.systems
    if not into.has_output and other.has_output:
        into.outputs = other.outputs


def _per_message(found: Found, record: RecordContent, limits: Limits) -> None:
    if record.size > limits.max_value_chars:
        raise CaptureError(Reason.TOO_LARGE, f"a {record.event_name} event holds over "
                                             f"{limits.max_value_chars} characters")
    body = record.body
    if record.event_name == CHOICE_EVENT:
        message = body.get("message") if isinstance(body, Mapping) else body
        text = _text(message)
        if text:
            found.outputs.append(Message(role="assistant", content=text))
        found.source = "genai_events"
        return
    role = MESSAGE_EVENTS[record.event_name]
    text = _text(body)
    if not text:
        return
    target = found.systems if role == "system" else found.inputs
    if len(target) < limits.max_messages:
        target.append(Message(role=role, content=text))
    found.source = "genai_events"


def _text(value: Any) -> str:
    content = value.get("content") if isinstance(value, Mapping) else value
    if isinstance(content, str) and content[:1] in "[{":
        # span-event attributes hold JSON text (strands' content blocks): text that does not
        # parse is kept as it is
        try:
            content = parse_json(content, "event content")
        except CaptureError:
            return content
    try:
        return text_of(content)
    except (TypeError, RecursionError) as exc:
        raise CaptureError(Reason.MALFORMED, f"unreadable event body: {exc}") from None
