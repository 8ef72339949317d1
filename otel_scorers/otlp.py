"""OTLP trace data in and out: decode ``ExportTraceServiceRequest`` bodies and files into SDK
``ReadableSpan`` objects, so spans exported by any SDK (or a Collector) go through the same
selection, capture and scorers as spans ended in this process.

Formats read:

- OTLP/HTTP request bodies, ``application/x-protobuf`` or ``application/json``, optionally
  gzip-compressed (``Content-Encoding: gzip``);
- files: OTLP JSON lines (one ``ExportTraceServiceRequest`` per line, the Collector ``file``
  exporter's default format), OTLP protobuf as written by the Collector ``file`` exporter with
  ``format: proto`` (each message preceded by its length, 4 bytes big-endian) or a single bare
  message; any of them gzip-compressed (``.gz``).

OTLP JSON differs from protobuf's canonical JSON in two ways handled here: trace and span ids
are hex strings (not base64), and enum values are integers.
"""

from __future__ import annotations

import base64
import gzip
import io
import json
import struct
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1 import trace_pb2
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from otel_scorers.errors import OtelScorersError

__all__ = [
    "OTLPDecodeError",
    "decode_request",
    "gunzip",
    "read_requests",
    "request_to_json",
    "spans_of",
    "split_by_trace",
]

#: Largest request body or file record accepted (after decompression).
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
_ID_FIELDS = {"traceId": 16, "spanId": 8, "parentSpanId": 8}
_KINDS = {0: SpanKind.INTERNAL, 1: SpanKind.INTERNAL, 2: SpanKind.SERVER, 3: SpanKind.CLIENT,
          4: SpanKind.PRODUCER, 5: SpanKind.CONSUMER}
_STATUS = {0: StatusCode.UNSET, 1: StatusCode.OK, 2: StatusCode.ERROR}


class OTLPDecodeError(OtelScorersError, ValueError):
    """A body or file record that is not OTLP trace data (the message says why)."""

    error_type = "invalid_otlp"


# -- decoding -------------------------------------------------------------------------------
def decode_request(body: bytes, *, content_type: str = "application/x-protobuf",
                   content_encoding: str = "") -> ExportTraceServiceRequest:
    """Decode one OTLP/HTTP ``/v1/traces`` body (protobuf or JSON, gzip or not)."""
    encoding = content_encoding.strip().lower()
    if encoding == "gzip":
        body = gunzip(body)
    elif encoding not in ("", "identity"):
        raise OTLPDecodeError(f"unsupported Content-Encoding {content_encoding!r} "
                              "(gzip or none)")
    media = content_type.split(";", maxsplit=1)[0].strip().lower()
    if media == "application/json":
        return _from_json(body)
    if media in ("application/x-protobuf", "application/protobuf", ""):
        return _from_protobuf(body)
    raise OTLPDecodeError(f"unsupported Content-Type {content_type!r} "
                          "(application/x-protobuf or application/json)")


def gunzip(body: bytes) -> bytes:
    """Decompress a gzip body, refusing more than ``MAX_MESSAGE_BYTES``."""
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(body)) as stream:
            data = stream.read(MAX_MESSAGE_BYTES + 1)
    except (OSError, EOFError) as exc:
        raise OTLPDecodeError(f"body is not valid gzip: {exc}") from exc
    if len(data) > MAX_MESSAGE_BYTES:
        raise OTLPDecodeError(f"body exceeds {MAX_MESSAGE_BYTES} bytes once decompressed")
    return data


def _from_protobuf(body: bytes) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except (DecodeError, ValueError, RuntimeError) as exc:
        raise OTLPDecodeError(f"body is not an OTLP ExportTraceServiceRequest: {exc}") from exc
    return request


def _from_json(body: bytes | str) -> ExportTraceServiceRequest:
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise OTLPDecodeError(f"body is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise OTLPDecodeError("OTLP JSON must be an object with resourceSpans")
    try:
        _ids_to_base64(data)
        request = ExportTraceServiceRequest()
        json_format.ParseDict(data, request, ignore_unknown_fields=True)
        return request
    except (json_format.ParseError, ValueError, TypeError) as exc:
        raise OTLPDecodeError(f"JSON is not an OTLP ExportTraceServiceRequest: {exc}") from exc


def _ids_to_base64(node: Any) -> None:
    """OTLP JSON writes ids as hex; protobuf's JSON parser expects base64 for bytes fields."""
    _convert_ids(node, _hex_to_base64)


def _hex_to_base64(key: str, value: str) -> str:
    if value == "":
        return ""
    try:
        raw = bytes.fromhex(value)
    except ValueError as exc:
        raise ValueError(f"{key} {value[:40]!r} is not hex") from exc
    if len(raw) != _ID_FIELDS[key]:
        raise ValueError(f"{key} must be {_ID_FIELDS[key] * 2} hex digits, got {len(value)}")
    return base64.b64encode(raw).decode()


def _convert_ids(node: Any, convert: Callable[[str, str], str]) -> None:
    """Rewrite, in place, every trace/span id string in a decoded OTLP JSON tree."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in _ID_FIELDS and isinstance(value, str):
                node[key] = convert(key, value)
            else:
                _convert_ids(value, convert)
    elif isinstance(node, list):
        for item in node:
            _convert_ids(item, convert)


def request_to_json(request: ExportTraceServiceRequest) -> str:
    """One line of OTLP JSON (hex ids), as the Collector ``file`` exporter writes it."""
    data = json_format.MessageToDict(request, use_integers_for_enums=True)
    _convert_ids(data, lambda _key, value: base64.b64decode(value).hex())
    return json.dumps(data, separators=(",", ":"))


# -- files ----------------------------------------------------------------------------------
def read_requests(path: str | Path) -> Iterator[ExportTraceServiceRequest]:
    """Every ``ExportTraceServiceRequest`` in a file (format told by content, not the name).

    Raises :class:`OTLPDecodeError` naming the file and record for anything unreadable.
    """
    path = Path(path)
    with path.open("rb") as raw:
        head = raw.read(2)
        raw.seek(0)
        stream: gzip.GzipFile | io.BufferedReader = (
            gzip.GzipFile(fileobj=raw) if head == b"\x1f\x8b" else raw)
        first = stream.peek(1)[:1]
        if first in (b"{", b" ", b"\n", b"\r", b"\t"):
            yield from _json_lines(stream, path)
        else:
            yield from _protobuf_records(stream, path)


def _json_lines(stream: Iterable[bytes], path: Path) -> Iterator[ExportTraceServiceRequest]:
    for number, line in enumerate(stream, start=1):
        if not line.strip():
            continue
        try:
            yield _from_json(line)
        except OTLPDecodeError as exc:
            raise OTLPDecodeError(f"{path}, line {number}: {exc}") from exc


def _protobuf_records(stream: gzip.GzipFile | io.BufferedReader, path: Path
                      ) -> Iterator[ExportTraceServiceRequest]:
    data = stream.read()
    records = _length_prefixed(data)
    if records is None:  # not a sequence of length-prefixed records: one bare message
        try:
            yield _from_protobuf(data)
        except OTLPDecodeError as exc:
            raise OTLPDecodeError(f"{path}: {exc}") from exc
        return
    for number, record in enumerate(records, start=1):
        try:
            yield _from_protobuf(record)
        except OTLPDecodeError as exc:
            raise OTLPDecodeError(f"{path}, record {number}: {exc}") from exc


def _length_prefixed(data: bytes) -> list[bytes] | None:
    """Split ``data`` into 4-byte big-endian length-prefixed records, if it is exactly that."""
    records: list[bytes] = []
    offset = 0
    while offset < len(data):
        if offset + 4 > len(data):
            return None
        (size,) = struct.unpack_from(">I", data, offset)
        offset += 4
        if size > MAX_MESSAGE_BYTES or offset + size > len(data):
            return None
        records.append(data[offset:offset + size])
        offset += size
    return records if records else None


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


# -- to SDK spans ---------------------------------------------------------------------------
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
        parent = SpanContext(trace_id, int.from_bytes(span.parent_span_id, "big"),
                             is_remote=False, trace_flags=flags)
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
            return json.loads(value)
        except ValueError:
            return value
    return value


# -- sending ------------------------------------------------------------------------------
class Telemetry:
    """Tracer, meter and logger providers exporting over OTLP/HTTP (protobuf) to ``endpoint``
    (the base URL: ``/v1/traces``, ``/v1/metrics`` and ``/v1/logs`` are appended), for the
    evaluation telemetry of ``rescore --emit`` and ``serve``. ``shutdown`` flushes them."""

    def __init__(self, endpoint: str, *, service_name: str, metric_interval_s: float = 10.0,
                 extra_readers: Sequence[Any] = (), headers: Mapping[str, str] | None = None
                 ) -> None:
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        base = endpoint.rstrip("/")
        resource = Resource.create({"service.name": service_name})
        self.endpoint = base
        self.tracer_provider = TracerProvider(resource=resource)
        extra = dict(headers) if headers else None  # None: OTEL_EXPORTER_OTLP_HEADERS applies
        self.tracer_provider.add_span_processor(BatchSpanProcessor(
            OTLPSpanExporter(endpoint=f"{base}/v1/traces", headers=extra)))
        self.meter_provider = MeterProvider(resource=resource, metric_readers=[
            PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=f"{base}/v1/metrics",
                                                             headers=extra),
                                          export_interval_millis=metric_interval_s * 1000),
            *extra_readers])
        self.logger_provider = LoggerProvider(resource=resource)
        self.logger_provider.add_log_record_processor(BatchLogRecordProcessor(
            OTLPLogExporter(endpoint=f"{base}/v1/logs", headers=extra)))

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()  # each flushes what it holds
        self.logger_provider.shutdown()
        self.meter_provider.shutdown()
