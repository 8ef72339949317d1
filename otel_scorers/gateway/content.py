"""``exported_content: strip`` at the gateway: forwarded OTLP requests lose their GenAI content.

The gateway reads the conversation (for the judge) from the decoded request, then removes from
the request it forwards every content attribute of every convention capture reads (spans,
GenAI span events, log records) and the bodies of per-message GenAI events: the same rule as
the in-process :class:`~otel_scorers.pipeline.content.ContentStripper`, on protobuf messages.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from otel_scorers.capture.conventions import is_content_key
from otel_scorers.capture.logs import CHOICE_EVENT, MESSAGE_EVENTS

__all__ = ["strip_logs", "strip_spans"]

_EVENT_TEXT = frozenset({"content", "message", "body", "gen_ai.event.content"})


def _filter(attributes: Any, drop: Callable[[str], bool]) -> None:
    kept = [kv for kv in attributes if not drop(kv.key)]
    if len(kept) != len(attributes):
        copies = [type(kv)() for kv in kept]
        for copy, kv in zip(copies, kept, strict=True):
            copy.CopyFrom(kv)
        del attributes[:]
        attributes.extend(copies)


def strip_spans(request: ExportTraceServiceRequest) -> None:
    """Remove conversation content from every span of ``request``, in place."""
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                keys = {kv.key: None for kv in span.attributes}

                def content(key: str, keys: dict[str, None] = keys) -> bool:
                    return is_content_key(key, keys)
                _filter(span.attributes, content)
                for event in span.events:
                    if event.name.startswith("gen_ai."):
                        _filter(event.attributes,
                                lambda key: key in _EVENT_TEXT or is_content_key(key))


def strip_logs(request: ExportLogsServiceRequest) -> None:
    """Remove conversation content from every log record of ``request``, in place."""
    for resource_logs in request.resource_logs:
        for scope_logs in resource_logs.scope_logs:
            for record in scope_logs.log_records:
                _filter(record.attributes, is_content_key)
                if record.event_name in MESSAGE_EVENTS or record.event_name == CHOICE_EVENT:
                    record.ClearField("body")
