"""What ``exported_content: strip`` removes: one policy for the processor and the gateway.

Whatever capture reads as conversation content is removed from what is exported, in process
(:class:`otel_scorers.pipeline.content.ContentStripper`, on SDK spans and log records) and at
the gateway (:mod:`otel_scorers.gateway.content`, on OTLP protobuf messages), by this one
policy:

- span and log-record attributes that hold content in any convention capture reads
  (:func:`~otel_scorers.capture.conventions.is_content_key`: GenAI, OpenLLMetry, OpenInference
  including ``llm.invocation_parameters``, retrieval documents and embeddings, Mastra), plus
  the attributes a capture mapping names (``capture: {input: my.prompt}``);
- the text attributes of GenAI span events (``gen_ai.*`` events: ``content``, ``message``,
  ``body``, ``gen_ai.event.content`` and any content key), whether or not the span itself has
  content attributes;
- the body of per-message GenAI log records, whether the record's event name is in its
  ``event_name`` field or (older SDKs and bridges) in an ``event.name`` attribute.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from otel_scorers.capture.conventions import is_content_key
from otel_scorers.capture.logs import CHOICE_EVENT, MESSAGE_EVENTS

__all__ = ["EVENT_NAME_KEY", "StripPolicy", "record_event_name"]

#: The attribute older SDKs and log bridges name an event by (before ``LogRecord.event_name``).
EVENT_NAME_KEY = "event.name"

#: Attributes of GenAI span events that hold text (older instrumentations put prompts there).
_EVENT_TEXT = frozenset({"content", "message", "body", "gen_ai.event.content"})


def record_event_name(event_name: str | None, attributes: Mapping[str, Any] | None) -> str:
    """A log record's event name: its ``event_name`` field, else its ``event.name``
    attribute, else ``""``."""
    if event_name:
        return event_name
    value = attributes.get(EVENT_NAME_KEY) if attributes else None
    return value if isinstance(value, str) else ""


class StripPolicy:
    """Which attributes, event attributes and record bodies hold conversation content."""

    def __init__(self, extra_keys: Iterable[str] = ()) -> None:
        self.extra_keys = frozenset(key for key in extra_keys if key)

    def is_content(self, key: str, attrs: Mapping[str, Any] | None = None) -> bool:
        """Whether attribute ``key`` (of a span with ``attrs``) holds content."""
        return key in self.extra_keys or is_content_key(key, attrs)

    def has_content(self, attrs: Mapping[str, Any]) -> bool:
        return any(self.is_content(key, attrs) for key in attrs)

    @staticmethod
    def strips_event(name: str) -> bool:
        """Whether a span event of this name may carry content (GenAI events)."""
        return name.startswith("gen_ai.")

    def is_event_text(self, key: str) -> bool:
        """Whether an attribute of a GenAI span event holds content."""
        return key in _EVENT_TEXT or self.is_content(key)

    @staticmethod
    def strips_body(event_name: str) -> bool:
        """Whether a log record of this event name carries a message in its body."""
        return event_name in MESSAGE_EVENTS or event_name == CHOICE_EVENT
