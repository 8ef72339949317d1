"""Request bodies read with bounds, the way the Collector's ``confighttp`` reads them.

- The declared ``Content-Length`` is checked before anything is read; the body is then read in
  chunks and the read stops at the limit (a sender that lies about its length gets 413 too).
- The whole read has a deadline (``read_timeout_s``): a stalled upload ties up one admission
  slot for that long at most, never forever.
- At most one content encoding is accepted (``gzip``, ``deflate`` or none); decompression is
  incremental and every decompressed byte counts against the same limit, so a small body cannot
  expand past it (a gzip stream inside a gzip stream is just bytes after the first layer: it is
  forwarded as such, never decompressed again).
"""

from __future__ import annotations

import asyncio
import zlib
from typing import Protocol

__all__ = ["BodyError", "decompress", "read_limited"]

_CHUNK = 64 * 1024


class BodyError(Exception):
    """A body that cannot be accepted; ``status`` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class _Stream(Protocol):
    async def read(self, n: int = -1) -> bytes: ...


async def read_limited(stream: _Stream, *, declared: int | None, max_bytes: int,
                       timeout_s: float) -> bytes:
    """Read a whole body of at most ``max_bytes`` within ``timeout_s``."""
    if declared is not None and declared > max_bytes:
        raise BodyError(413, f"body of {declared} bytes exceeds the limit of {max_bytes}")
    chunks: list[bytes] = []
    size = 0

    async def read_all() -> None:
        nonlocal size
        while True:
            chunk = await stream.read(_CHUNK)
            if not chunk:
                return
            size += len(chunk)
            if size > max_bytes:
                raise BodyError(413, f"body exceeds the limit of {max_bytes} bytes")
            chunks.append(chunk)

    try:
        await asyncio.wait_for(read_all(), timeout=timeout_s)
    except asyncio.TimeoutError:
        raise BodyError(408, f"body not received within {timeout_s:g} s") from None
    return b"".join(chunks)


def decompress(body: bytes, encoding: str, *, max_bytes: int) -> bytes:
    """Undo one content encoding, stopping as soon as the output passes ``max_bytes``."""
    coding = encoding.strip().lower()
    if coding in ("", "identity"):
        return body
    if "," in coding:
        raise BodyError(415, f"one content encoding at most, got {encoding!r}")
    if coding == "gzip":
        wbits = 16 + zlib.MAX_WBITS
    elif coding == "deflate":
        wbits = zlib.MAX_WBITS
    else:
        raise BodyError(415, f"unsupported Content-Encoding {encoding!r} (gzip, deflate or "
                             "none)")
    out: list[bytes] = []
    size = 0
    data = body
    try:
        while data:  # members of a multi-member gzip stream follow one another
            decoder = zlib.decompressobj(wbits)
            while data:
                piece = decoder.decompress(data, _CHUNK)
                size += len(piece)
                if size > max_bytes:
                    raise BodyError(413, f"body exceeds {max_bytes} bytes once decompressed")
                out.append(piece)
                data = decoder.unconsumed_tail
            rest = decoder.flush(max_bytes - size + 1)
            size += len(rest)
            if size > max_bytes:
                raise BodyError(413, f"body exceeds {max_bytes} bytes once decompressed")
            out.append(rest)
            if not decoder.eof:
                raise BodyError(400, f"body is a truncated {coding} stream")
            data = decoder.unused_data
    except zlib.error as exc:
        raise BodyError(400, f"body is not valid {coding}: {exc}") from None
    return b"".join(out)
