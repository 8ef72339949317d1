"""OTLP trace data in and out.

- :mod:`~otel_scorers.otlp.bodies`: OTLP/HTTP bodies (protobuf or JSON, gzip) decoded, and OTLP
  JSON written;
- :mod:`~otel_scorers.otlp.files`: exported trace files read (JSON lines or protobuf, gzip);
- :mod:`~otel_scorers.otlp.spans`: OTLP spans as SDK ``ReadableSpan`` objects;
- :mod:`~otel_scorers.otlp.telemetry`: providers sending this library's telemetry over OTLP.
"""

from otel_scorers.otlp.bodies import OTLPDecodeError, decode_request, gunzip, request_to_json
from otel_scorers.otlp.files import read_requests
from otel_scorers.otlp.spans import spans_of, split_by_trace
from otel_scorers.otlp.telemetry import Telemetry

__all__ = [
    "OTLPDecodeError",
    "Telemetry",
    "decode_request",
    "gunzip",
    "read_requests",
    "request_to_json",
    "spans_of",
    "split_by_trace",
]
