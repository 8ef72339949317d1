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

__all__ = ["RecordView", "records_of", "take_records"]

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
                yield view_of(record)


def _event_name(record: Any) -> str:
    return str(record.event_name or next(
        (kv.value.string_value for kv in record.attributes if kv.key == "event.name"), ""))


def view_of(record: Any) -> RecordView:
    """One OTLP ``LogRecord`` as a :class:`RecordView`."""
    return RecordView(
        event_name=_event_name(record),
        attributes={kv.key: value_of(kv.value) for kv in record.attributes},
        body=value_of(record.body) if record.HasField("body") else None,
        trace_id=int.from_bytes(record.trace_id, "big") if len(record.trace_id) == 16 else 0,
        span_id=int.from_bytes(record.span_id, "big") if len(record.span_id) == 8 else 0,
        timestamp=record.time_unix_nano or record.observed_time_unix_nano)


def take_records(request: ExportLogsServiceRequest, event_name: str
                 ) -> tuple[list[RecordView], int]:
    """Remove the records named ``event_name`` from ``request`` (in place) and return them,
    with the number of records left in it."""
    taken: list[RecordView] = []
    left = 0
    for resource_logs in request.resource_logs:
        for scope_logs in resource_logs.scope_logs:
            keep = []
            for record in scope_logs.log_records:
                if _event_name(record) == event_name:
                    taken.append(view_of(record))
                else:
                    keep.append(record)
            if len(keep) != len(scope_logs.log_records):
                copies = [type(record)() for record in keep]
                for copy, record in zip(copies, keep, strict=True):
                    copy.CopyFrom(record)
                del scope_logs.log_records[:]
                scope_logs.log_records.extend(copies)
            left += len(keep)
    return taken, left


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
