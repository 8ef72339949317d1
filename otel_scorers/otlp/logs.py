"""OTLP log records as plain objects, for the GenAI content some of them carry.

:func:`records_of` yields one :class:`RecordView` per record of an ``ExportLogsServiceRequest``
with the fields capture reads: event name, attributes and body as Python values (maps and
arrays become dicts and lists, depth-bounded), trace and span ids as integers, timestamp.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

__all__ = ["RecordView", "records_of"]

MAX_DEPTH = 16


@dataclass
class RecordView:
    """The parts of an OTLP log record that capture reads."""

    event_name: str
    attributes: dict[str, Any]
    body: Any
    trace_id: int
    span_id: int
    timestamp: int


def records_of(request: ExportLogsServiceRequest) -> Iterator[RecordView]:
    for resource_logs in request.resource_logs:
        for scope_logs in resource_logs.scope_logs:
            for record in scope_logs.log_records:
                name = record.event_name or next(
                    (kv.value.string_value for kv in record.attributes
                     if kv.key == "event.name"), "")
                yield RecordView(
                    event_name=name,
                    attributes={kv.key: value_of(kv.value) for kv in record.attributes},
                    body=value_of(record.body) if record.HasField("body") else None,
                    trace_id=int.from_bytes(record.trace_id, "big")
                    if len(record.trace_id) == 16 else 0,
                    span_id=int.from_bytes(record.span_id, "big")
                    if len(record.span_id) == 8 else 0,
                    timestamp=record.time_unix_nano or record.observed_time_unix_nano)


def value_of(value: AnyValue, depth: int = 0) -> Any:
    """An ``AnyValue`` as a Python value; past ``MAX_DEPTH`` levels, ``None``."""
    kind = value.WhichOneof("value")
    if kind is None or depth > MAX_DEPTH:
        return None
    if kind == "array_value":
        return [value_of(item, depth + 1) for item in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: value_of(kv.value, depth + 1) for kv in value.kvlist_value.values}
    return getattr(value, kind)
