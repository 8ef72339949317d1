"""``exported_content: strip`` at the gateway: forwarded OTLP requests lose their GenAI content.

The gateway reads the conversation (for the judge) from the decoded request, then removes from
the request it forwards what :class:`otel_scorers.capture.strip.StripPolicy` calls content: the
policy of the in-process :class:`~otel_scorers.pipeline.content.ContentStripper` (a capture
mapping's keys included), here on protobuf messages. Per-message event bodies go whole.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from otel_scorers.capture.strip import EVENT_NAME_KEY, StripPolicy, record_event_name

__all__ = ["strip_logs", "strip_spans"]


def _filter(attributes: Any, drop: Callable[[str], bool]) -> None:
    kept = [kv for kv in attributes if not drop(kv.key)]
    if len(kept) != len(attributes):
        copies = [type(kv)() for kv in kept]
        for copy, kv in zip(copies, kept, strict=True):
            copy.CopyFrom(kv)
        del attributes[:]
        attributes.extend(copies)


def strip_spans(request: ExportTraceServiceRequest, policy: StripPolicy) -> None:
    """Remove conversation content from every span of ``request``, in place."""
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                keys = {kv.key: None for kv in span.attributes}

                def content(key: str, keys: dict[str, None] = keys) -> bool:
                    return policy.is_content(key, keys)
                _filter(span.attributes, content)
                for event in span.events:
                    if policy.strips_event(event.name):
                        _filter(event.attributes, policy.is_event_text)


def strip_logs(request: ExportLogsServiceRequest, policy: StripPolicy) -> None:
    """Remove conversation content from every log record of ``request``, in place."""
    for resource_logs in request.resource_logs:
        for scope_logs in resource_logs.scope_logs:
            for record in scope_logs.log_records:
                named = next((kv.value.string_value for kv in record.attributes
                              if kv.key == EVENT_NAME_KEY), None)
                name = record_event_name(record.event_name, {EVENT_NAME_KEY: named}
                                         if named else None)
                _filter(record.attributes, policy.is_content)
                if policy.strips_body(name):
                    record.ClearField("body")
