"""OTLP/HTTP request bodies: decode them (protobuf or JSON, gzip or not) and write OTLP JSON.

OTLP JSON differs from protobuf's canonical JSON in two ways handled here: trace and span ids
are hex strings (not base64), and enum values are integers.
"""

from __future__ import annotations

import base64
import gzip
import io
import json
from collections.abc import Callable
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from otel_scorers import safe_json
from otel_scorers.errors import OtelScorersError

__all__ = ["MAX_MESSAGE_BYTES", "SIGNALS", "OTLPDecodeError", "decode", "decode_request",
           "from_json", "from_protobuf", "gunzip", "request_to_json"]

#: Largest request body or file record accepted (after decompression).
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
_ID_FIELDS = {"traceId": 16, "spanId": 8, "parentSpanId": 8}
#: The request message of each OTLP signal, by its ``/v1/<signal>`` path.
SIGNALS: dict[str, type[Message]] = {
    "traces": ExportTraceServiceRequest, "logs": ExportLogsServiceRequest,
    "metrics": ExportMetricsServiceRequest,
}


class OTLPDecodeError(OtelScorersError, ValueError):
    """A body or file record that is not OTLP trace data (the message says why)."""

    error_type = "invalid_otlp"


def decode_request(body: bytes, *, content_type: str = "application/x-protobuf",
                   content_encoding: str = "") -> ExportTraceServiceRequest:
    """Decode one OTLP/HTTP ``/v1/traces`` body (protobuf or JSON, gzip or not)."""
    encoding = content_encoding.strip().lower()
    if encoding == "gzip":
        body = gunzip(body)
    elif encoding not in ("", "identity"):
        raise OTLPDecodeError(f"unsupported Content-Encoding {content_encoding!r} "
                              "(gzip or none)")
    decoded = decode(body, content_type=content_type, signal="traces")
    assert isinstance(decoded, ExportTraceServiceRequest)
    return decoded


def decode(body: bytes, *, content_type: str, signal: str) -> Message:
    """Decode an uncompressed OTLP/HTTP body of ``signal`` (``traces``, ``logs``,
    ``metrics``), protobuf or JSON."""
    media = content_type.split(";", maxsplit=1)[0].strip().lower()
    kind = SIGNALS[signal]
    if media == "application/json":
        decoded: Message = from_json(body, kind)
        return decoded
    if media in ("application/x-protobuf", "application/protobuf", ""):
        decoded = from_protobuf(body, kind)
        return decoded
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


def from_protobuf(body: bytes, kind: type[Any] = ExportTraceServiceRequest) -> Any:
    request = kind()
    try:
        request.ParseFromString(body)
    except (DecodeError, ValueError, RuntimeError) as exc:  # RecursionError too
        raise OTLPDecodeError(f"body is not an OTLP {kind.__name__}: {exc}") from exc
    return request


def from_json(body: bytes | str, kind: type[Any] = ExportTraceServiceRequest) -> Any:
    try:
        data = safe_json.loads(body)
    except RecursionError:
        raise OTLPDecodeError("JSON is nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise OTLPDecodeError(f"body is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise OTLPDecodeError("OTLP JSON must be an object (resourceSpans, resourceLogs, ...)")
    try:
        _ids_to_base64(data)
        request = kind()
        json_format.ParseDict(data, request, ignore_unknown_fields=True)
        return request
    except RecursionError:
        raise OTLPDecodeError("JSON is nested too deeply") from None
    except (json_format.ParseError, ValueError, TypeError) as exc:
        raise OTLPDecodeError(f"JSON is not an OTLP {kind.__name__}: {exc}") from exc


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


def request_to_json(request: Message) -> str:
    """One line of OTLP JSON (hex ids), as the Collector ``file`` exporter writes it."""
    data = json_format.MessageToDict(request, use_integers_for_enums=True)
    _convert_ids(data, lambda _key, value: base64.b64decode(value).hex())
    return json.dumps(data, separators=(",", ":"))
