"""OTLP spans as SDK ``ReadableSpan`` objects, so spans exported by any SDK (or a Collector) go
through the same selection, capture and scorers as spans ended in this process; and requests
split by trace id, as the Collector's load-balancing exporter routes them."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1 import trace_pb2
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from otel_scorers import safe_json
from otel_scorers.otlp.bodies import OTLPDecodeError

__all__ = ["spans_of", "split_by_trace"]

_KINDS = {0: SpanKind.INTERNAL, 1: SpanKind.INTERNAL, 2: SpanKind.SERVER, 3: SpanKind.CLIENT,
          4: SpanKind.PRODUCER, 5: SpanKind.CONSUMER}
_STATUS = {0: StatusCode.UNSET, 1: StatusCode.OK, 2: StatusCode.ERROR}


def split_by_trace(request: ExportTraceServiceRequest, parts: int
                   ) -> list[ExportTraceServiceRequest]:
    """``request`` split into ``parts`` requests by trace id (``trace_id % parts``), resource and
    scope kept: what the Collector's ``loadbalancing`` exporter does with ``routing_key:
    traceID``, so every span of a trace goes to the same place."""
    out = [ExportTraceServiceRequest() for _ in range(parts)]
    for resource_spans in request.resource_spans:
        targets: dict[int, Any] = {}
        for scope_spans in resource_spans.scope_spans:
            scopes: dict[int, Any] = {}
            for span in scope_spans.spans:
                index = int.from_bytes(span.trace_id, "big") % parts
                if index not in targets:
                    target = out[index].resource_spans.add()
                    target.resource.CopyFrom(resource_spans.resource)
                    target.schema_url = resource_spans.schema_url
                    targets[index] = target
                if index not in scopes:
                    scope = targets[index].scope_spans.add()
                    scope.scope.CopyFrom(scope_spans.scope)
                    scope.schema_url = scope_spans.schema_url
                    scopes[index] = scope
                scopes[index].spans.add().CopyFrom(span)
    return out


def spans_of(request: ExportTraceServiceRequest) -> Iterator[ReadableSpan]:
    """The request's spans as SDK ``ReadableSpan`` objects (ids, parents, times, attributes,
    events, links, status, resource and scope preserved)."""
    for resource_spans in request.resource_spans:
        resource = Resource(_attributes(resource_spans.resource.attributes),
                            resource_spans.schema_url)
        for scope_spans in resource_spans.scope_spans:
            scope = scope_spans.scope
            instrumentation = InstrumentationScope(
                scope.name, scope.version or None, scope_spans.schema_url or None,
                _attributes(scope.attributes) or None)
            for span in scope_spans.spans:
                yield _readable(span, resource, instrumentation)


def _readable(span: trace_pb2.Span, resource: Resource,
              scope: InstrumentationScope) -> ReadableSpan:
    trace_id = int.from_bytes(span.trace_id, "big")
    span_id = int.from_bytes(span.span_id, "big")
    if len(span.trace_id) != 16 or len(span.span_id) != 8 or not trace_id or not span_id:
        raise OTLPDecodeError(f"span {span.name!r} has an invalid trace or span id")
    # An exported span was sampled, whatever its flags field says: SDKs (Python's among them)
    # often fill only the is-remote bits (8 and 9) there. Marking it sampled matters: evaluation
    # spans are its children, and a parent-based sampler would otherwise drop them.
    flags = TraceFlags((span.flags & 0xFF) | TraceFlags.SAMPLED)
    context = SpanContext(trace_id, span_id, is_remote=False, trace_flags=flags)
    parent = None
    if span.parent_span_id:
        # bits 8 and 9 of the flags: "is the parent remote" is known, and it is (the span is
        # then its process's local root: its trace's interactions can be decided at its end)
        remote = span.flags & 0x300 == 0x300
        parent = SpanContext(trace_id, int.from_bytes(span.parent_span_id, "big"),
                             is_remote=remote, trace_flags=flags)
    status_code = _STATUS.get(span.status.code, StatusCode.UNSET)
    status = Status(status_code, span.status.message or None
                    if status_code is StatusCode.ERROR else None)
    events = [Event(e.name, _attributes(e.attributes), e.time_unix_nano) for e in span.events]
    links = [Link(SpanContext(int.from_bytes(link.trace_id, "big"),
                              int.from_bytes(link.span_id, "big"), is_remote=True),
                  _attributes(link.attributes))
             for link in span.links if len(link.trace_id) == 16 and len(link.span_id) == 8]
    return ReadableSpan(
        name=span.name, context=context, parent=parent, resource=resource,
        attributes=_attributes(span.attributes), events=events, links=links,
        kind=_KINDS.get(span.kind, SpanKind.INTERNAL), status=status,
        start_time=span.start_time_unix_nano or None, end_time=span.end_time_unix_nano or None,
        instrumentation_scope=scope)


def _attributes(pairs: Iterable[KeyValue]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        value = _value(pair.value, depth=0)
        if value is not None:
            out[pair.key] = value
    return out


def _value(value: AnyValue, *, depth: int) -> Any:
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "int_value":
        return value.int_value
    if kind == "double_value":
        return value.double_value
    if kind == "bytes_value":
        return value.bytes_value
    if depth > 16:
        return None
    if kind == "array_value":
        items = [_value(item, depth=depth + 1) for item in value.array_value.values]
        return tuple(item for item in items if item is not None)
    # kvlist: SDK attributes cannot hold maps; keep it as JSON text (what capture reads anyway)
    return json.dumps({kv.key: _jsonable(_value(kv.value, depth=depth + 1))
                       for kv in value.kvlist_value.values})


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return safe_json.loads(value)
        except ValueError:
            return value
    return value
