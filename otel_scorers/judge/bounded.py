"""A response size bound for the HTTP clients of litellm (the direct transport has its own).

litellm reads every provider's answer through one aiohttp session when it is given one
(``shared_session``, its aiohttp transport). This module makes such a session whose responses
raise once more than :data:`MAX_RESPONSE_BYTES` have been read, *after* decompression: a gzip
bomb or an endless body from a hostile or broken judge endpoint stops at the bound instead of
growing the application by gigabytes. litellm's transport asks aiohttp for the raw bytes
(``auto_decompress=False``) and lets httpx decode them, all at once; so a gzip or deflate body
is decoded here instead, incrementally and within the bound, and handed on without its
``Content-Encoding`` (other encodings are refused: only gzip and deflate are offered). The
session is the library's own (one per process and event loop): the application's own litellm
calls are untouched.
"""

from __future__ import annotations

import contextvars
import os
from collections.abc import AsyncIterator
from typing import Any

from otel_scorers import http

__all__ = ["ACCEPTED_ENCODINGS", "MAX_RESPONSE_BYTES", "ResponseTooLarge", "bounded_session",
           "overflowed", "watch"]

#: The largest judge answer read (a chat completion is a few kilobytes).
MAX_RESPONSE_BYTES = 8 * 1024 * 1024

#: Set per judge call: whether its response ran past the bound (litellm wraps the error).
_overflow: contextvars.ContextVar[list[bool] | None] = contextvars.ContextVar(
    "otel_scorers_response_overflow", default=None)


class ResponseTooLarge(Exception):
    """More than :data:`MAX_RESPONSE_BYTES` of response body."""


def watch() -> list[bool]:
    """Start watching the current call for an oversized response (see :func:`overflowed`)."""
    flag = [False]
    _overflow.set(flag)
    return flag


def overflowed(flag: list[bool]) -> bool:
    return flag[0]


#: What the judge may compress its answer with (the request's ``Accept-Encoding``).
ACCEPTED_ENCODINGS = "gzip, deflate"


class _Bounded:
    """A response's content stream, decoded (gzip, deflate) and counted; everything else is
    the stream's."""

    def __init__(self, stream: Any, encoding: str | None = None) -> None:
        import zlib

        self._stream = stream
        self._read = 0
        # 32 + 15: a gzip or a zlib header, found by the decoder
        self._decoder = zlib.decompressobj(32 + 15) if encoding else None

    def _count(self, data: bytes) -> bytes:
        self._read += len(data)
        if self._read > MAX_RESPONSE_BYTES:
            flag = _overflow.get()
            if flag is not None:
                flag[0] = True
            raise ResponseTooLarge(
                f"judge response is larger than {MAX_RESPONSE_BYTES // (1024 * 1024)} MB")
        return data

    def _decode(self, raw: bytes) -> bytes:
        import zlib

        decoder = self._decoder
        if decoder is None:
            return self._count(raw)
        try:  # never more out than the bound allows, however small the input
            out = decoder.decompress(raw, MAX_RESPONSE_BYTES + 1 - self._read)
            if not raw:
                out += decoder.flush()
        except zlib.error as exc:
            raise ResponseTooLarge(f"judge response is not valid gzip/deflate: {exc}") from None
        if decoder.unconsumed_tail:
            self._read = MAX_RESPONSE_BYTES  # more than the bound would come out
            return self._count(out + b"\0")
        return self._count(out)

    async def read(self, n: int = -1) -> bytes:
        if n < 0:  # never the whole body at once: chunk by chunk, counted
            chunks = []
            while chunk := await self.read(65_536):
                chunks.append(chunk)
            return b"".join(chunks)
        while True:
            raw = await self._stream.read(n)
            data = self._decode(raw)
            if data or not raw:  # a compressed chunk may decode to nothing yet
                return data

    async def readany(self) -> bytes:
        return await self.read(65_536)

    async def readchunk(self) -> tuple[bytes, bool]:
        data = await self.read(65_536)
        return data, not data

    async def readline(self) -> bytes:
        return self._count(await self._stream.readline())

    def iter_chunked(self, n: int) -> AsyncIterator[bytes]:
        return self._chunks(n)

    def iter_any(self) -> AsyncIterator[bytes]:
        return self._chunks(65_536)

    async def _chunks(self, n: int) -> AsyncIterator[bytes]:
        while chunk := await self.read(n):
            yield chunk

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._chunks(65_536)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _response_class() -> type:
    import aiohttp
    from multidict import CIMultiDict, CIMultiDictProxy

    class BoundedResponse(aiohttp.ClientResponse):
        async def start(self, connection: Any) -> Any:
            started = await super().start(connection)
            encoding = (self.headers.get("Content-Encoding") or "").strip().lower()
            if encoding in ("", "identity"):
                self.content = _Bounded(self.content)  # type: ignore[assignment]
                return started
            if encoding not in ("gzip", "x-gzip", "deflate"):
                self.close()
                raise aiohttp.ClientPayloadError(
                    f"judge response in an encoding that was not offered: {encoding[:40]}")
            self.content = _Bounded(self.content, encoding)  # type: ignore[assignment]
            # decoded here: what reads the response must not decode it again
            self._headers = CIMultiDictProxy(CIMultiDict(
                (key, value) for key, value in self.headers.items()
                if key.lower() not in ("content-encoding", "content-length")))
            return started

    return BoundedResponse


def bounded_session() -> Any:
    """This process and loop's bounded aiohttp session (made on first use, closed at exit)."""
    return http.shared("judge-litellm", _make_session)


def _make_session() -> Any:
    import aiohttp

    # proxies from the environment as litellm's own sessions take them (off by default)
    trust_env = os.environ.get("AIOHTTP_TRUST_ENV", "").lower() in ("1", "true", "yes")
    return aiohttp.ClientSession(
        response_class=_response_class(), trust_env=trust_env,
        cookie_jar=aiohttp.DummyCookieJar(),
        connector=aiohttp.TCPConnector(limit=256, limit_per_host=256))
