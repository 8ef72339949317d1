"""``exported_content: strip``: the judge sees the conversation, the backend never does.

The processor reads a span's content on the application's thread at ``on_end`` (keeping a
reference to the original attribute dict for capture), then replaces the span's attributes with
a copy that has no content attribute, and removes the text of its GenAI span events (also on a
span with no content attributes). Log records get the same treatment in the log processor:
content attributes deleted, the message text of per-message events removed from the body. What
counts as content is :class:`otel_scorers.capture.strip.StripPolicy`, the gateway's policy too.
Scores, labels and reasons (subject to ``reasons`` and redaction) still go out.

This works because the scoring processors run first: :func:`otel_scorers.install` (and the
zero-code setup) puts them at the front of the providers' processor chains, so an exporting
processor only ever sees the stripped span or record. A processor added by hand after an
exporting one cannot strip what was already handed on: use ``install`` with ``strip``.

Why the span's own holders are replaced (``_attributes``, ``_events``: SDK state without a
public setter): the SDK hands every processor of the chain the same ended span object, and
an ended span's attributes are read-only through its public API, so the only other way to keep
content from an exporter is to wrap every exporting processor, including ones the application
adds later, which this library cannot see. The replacement is a fresh immutable
``BoundedAttributes`` (the type the SDK itself holds), and a test on each supported SDK version
(tests/pipeline/test_exported_content.py) fails if the SDK stops reading it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.trace import Event, ReadableSpan

from otel_scorers.capture import CaptureMapping
from otel_scorers.capture.conventions import is_content_key
from otel_scorers.capture.logs import ORIGINAL_EVENTS, strip_record_body
from otel_scorers.capture.strip import StripPolicy, record_event_name

__all__ = ["ContentStripper"]


class ContentStripper:
    """Removes conversation content from spans and log records this process exports."""

    def __init__(self, mapping: CaptureMapping | None = None) -> None:
        names = (mapping.input, mapping.output, mapping.system) if mapping is not None else ()
        self.policy = StripPolicy(name for name in names if name)

    def is_content(self, key: str, attrs: Mapping[str, Any]) -> bool:
        return self.policy.is_content(key, attrs)

    @staticmethod
    def has_genai_key(attrs: Mapping[str, Any]) -> bool:
        """Whether a log record's attributes hold content of a convention capture reads."""
        return any(is_content_key(key) for key in attrs)

    def has_content(self, attrs: Mapping[str, Any]) -> bool:
        """Whether ``attrs`` holds any content attribute (one pass over the keys)."""
        return self.policy.has_content(attrs)

    def strip_if_content(self, span: ReadableSpan, attrs: Mapping[str, Any]) -> None:
        """Remove content from ``span`` (``on_end``'s one call): its content attributes, and
        the text of its GenAI events even when its attributes hold none."""
        if self.has_content(attrs):
            self.strip_span(span, attrs)
            return
        self._strip_events(span)

    def strip_span(self, span: ReadableSpan, attrs: Mapping[str, Any]) -> None:
        """Give ``span`` a copy of its attributes without content (``attrs`` is not changed:
        capture keeps reading it), and GenAI events without their text."""
        kept = {key: value for key, value in attrs.items() if not self.is_content(key, attrs)}
        old = getattr(span, "_attributes", None)
        new = BoundedAttributes(maxlen=None, attributes=kept, immutable=True)
        new.dropped = getattr(old, "dropped", 0)
        span._attributes = new
        self._strip_events(span)

    def _strip_events(self, span: ReadableSpan) -> None:
        events = getattr(span, "_events", None)
        if events and any(self.policy.strips_event(event.name) for event in events):
            setattr(span, ORIGINAL_EVENTS, events)  # capture reads these (original_events)
            span._events = tuple(self._without_text(event) for event in events)

    def strip_record(self, record: Any) -> None:
        """Delete content from a log record in place (its attributes are mutable)."""
        attributes = getattr(record, "attributes", None)
        name = record_event_name(getattr(record, "event_name", None), attributes)
        if attributes:
            for key in [k for k in attributes if self.is_content(k, attributes)]:
                del attributes[key]
        body = getattr(record, "body", None)
        if body is not None and self.policy.strips_body(name):
            record.body = strip_record_body(name, body)

    def _without_text(self, event: Event) -> Event:
        if not self.policy.strips_event(event.name):
            return event
        attrs = {key: value for key, value in (event.attributes or {}).items()
                 if not self.policy.is_event_text(key)}
        return Event(event.name, attrs, event.timestamp)
