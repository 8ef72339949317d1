"""OTLP trace files: JSON lines (one ``ExportTraceServiceRequest`` per line, the Collector
``file`` exporter's default format), protobuf as the Collector ``file`` exporter writes it with
``format: proto`` (each message preceded by its length, 4 bytes big-endian) or a single bare
message; any of them gzip-compressed (``.gz``)."""

from __future__ import annotations

import gzip
import io
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from otel_scorers.otlp.bodies import MAX_MESSAGE_BYTES, OTLPDecodeError, from_json, from_protobuf

__all__ = ["read_requests"]


def read_requests(path: str | Path) -> Iterator[ExportTraceServiceRequest]:
    """Every ``ExportTraceServiceRequest`` in a file, streamed: one record in memory at a time
    (format told by content, not the name).

    Raises :class:`OTLPDecodeError` naming the file, the line or record, and the reason for
    anything unreadable (bad JSON, a bad record, a truncated or corrupt gzip stream), after
    yielding every record before it.
    """
    path = Path(path)
    position = {"line": 0}
    try:
        with path.open("rb") as raw:
            head = raw.read(2)
            raw.seek(0)
            stream: gzip.GzipFile | io.BufferedReader = (
                gzip.GzipFile(fileobj=raw) if head == b"\x1f\x8b" else raw)
            first = stream.peek(1)[:1]
            if first in (b"{", b" ", b"\n", b"\r", b"\t"):
                yield from _json_lines(stream, path, position)
            elif first == b"\x0a":  # field 1 of a bare message (as a length: over 160 MB)
                yield _bare_message(stream, path)
            else:
                yield from _protobuf_records(stream, path, position)
    except (EOFError, OSError, zlib.error) as exc:  # truncated or corrupt gzip, I/O errors
        where = f", after line/record {position['line']}" if position["line"] else ""
        reason = str(exc) or type(exc).__name__
        raise OTLPDecodeError(f"{path}{where}: cannot read the file: {reason}") from None


def _json_lines(stream: gzip.GzipFile | io.BufferedReader, path: Path,
                position: dict[str, int]) -> Iterator[ExportTraceServiceRequest]:
    while True:
        line = stream.readline(MAX_MESSAGE_BYTES + 1)
        if not line:
            return
        position["line"] += 1
        number = position["line"]
        if len(line) > MAX_MESSAGE_BYTES:
            raise OTLPDecodeError(f"{path}, line {number}: longer than {MAX_MESSAGE_BYTES} "
                                  "bytes")
        if not line.strip():
            continue
        try:
            yield from_json(line)
        except OTLPDecodeError as exc:
            raise OTLPDecodeError(f"{path}, line {number}: {exc}") from None


def _protobuf_records(stream: gzip.GzipFile | io.BufferedReader, path: Path,
                      position: dict[str, int]) -> Iterator[ExportTraceServiceRequest]:
    """4-byte big-endian length-prefixed records, as the Collector's file exporter writes."""
    while True:
        head = stream.read(4)
        if not head:
            return
        number = position["line"] + 1
        if len(head) < 4:
            raise OTLPDecodeError(f"{path}, record {number}: truncated length prefix")
        (size,) = struct.unpack(">I", head)
        if size > MAX_MESSAGE_BYTES:
            raise OTLPDecodeError(f"{path}, record {number}: a length of {size} bytes, over "
                                  f"the {MAX_MESSAGE_BYTES} limit (not an OTLP file?)")
        body = stream.read(size)
        if len(body) < size:
            raise OTLPDecodeError(f"{path}, record {number}: truncated ({len(body)} of "
                                  f"{size} bytes)")
        position["line"] = number
        try:
            yield from_protobuf(body)
        except OTLPDecodeError as exc:
            raise OTLPDecodeError(f"{path}, record {number}: {exc}") from None


def _bare_message(stream: gzip.GzipFile | io.BufferedReader, path: Path
                  ) -> ExportTraceServiceRequest:
    data = stream.read(MAX_MESSAGE_BYTES + 1)
    if len(data) > MAX_MESSAGE_BYTES:
        raise OTLPDecodeError(f"{path}: a single message over {MAX_MESSAGE_BYTES} bytes")
    try:
        request: ExportTraceServiceRequest = from_protobuf(data)
    except OTLPDecodeError as exc:
        raise OTLPDecodeError(f"{path}: {exc}") from None
    return request
