"""OTLP trace files: JSON lines (one ``ExportTraceServiceRequest`` per line, the Collector
``file`` exporter's default format), protobuf as the Collector ``file`` exporter writes it with
``format: proto`` (each message preceded by its length, 4 bytes big-endian) or a single bare
message; any of them gzip-compressed (``.gz``)."""

from __future__ import annotations

import gzip
import io
import struct
from collections.abc import Iterable, Iterator
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from otel_scorers.otlp.bodies import MAX_MESSAGE_BYTES, OTLPDecodeError, from_json, from_protobuf

__all__ = ["read_requests"]


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
            yield from_json(line)
        except OTLPDecodeError as exc:
            raise OTLPDecodeError(f"{path}, line {number}: {exc}") from exc


def _protobuf_records(stream: gzip.GzipFile | io.BufferedReader, path: Path
                      ) -> Iterator[ExportTraceServiceRequest]:
    data = stream.read()
    records = _length_prefixed(data)
    if records is None:  # not a sequence of length-prefixed records: one bare message
        try:
            yield from_protobuf(data)
        except OTLPDecodeError as exc:
            raise OTLPDecodeError(f"{path}: {exc}") from exc
        return
    for number, record in enumerate(records, start=1):
        try:
            yield from_protobuf(record)
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
