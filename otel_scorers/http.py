"""The library's one HTTP stack: shared aiohttp sessions and bounded reads.

Every HTTP client of the library (the judge's direct transport and litellm's bounded transport,
the result backends' writers and their label readers) takes its session from :func:`shared`:
one session per process, event loop and purpose, made on first use, kept alive (connections
reused), forgotten in a forked child (a parent's sessions are not the child's) and closed at
exit on the loop that made it. :func:`read_bounded` reads a whole body, chunk by chunk, to a
bound (more is :class:`TooLarge`, never a truncated body taken for the whole).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any

from otel_scorers import background_loop

__all__ = ["TooLarge", "close_all", "read_bounded", "shared", "shown_url"]

#: (pid, id of the loop, purpose) -> session
_sessions: dict[tuple[int, int, str], Any] = {}


def shared(purpose: str, make: Callable[[], Any]) -> Any:
    """This process and running loop's session for ``purpose`` (``make()`` builds it)."""
    key = (os.getpid(), id(asyncio.get_running_loop()), purpose)
    session = _sessions.get(key)
    if session is None or session.closed:
        if not _sessions:
            background_loop.close_at_exit(close_all)
        for other in [k for k in _sessions if k[0] != key[0]]:
            del _sessions[other]  # a parent process's sessions are not ours
        session = _sessions[key] = make()
    return session


async def close_all() -> None:
    """Close this loop's sessions (at exit, on the loop: an unclosed one warns at exit); the
    next request makes new ones."""
    loop = id(asyncio.get_running_loop())
    for key in [k for k in _sessions if k[0] == os.getpid() and k[1] == loop]:
        session = _sessions.pop(key)
        await session.close()


def shown_url(url: str) -> str:
    """``url`` as it may be printed anywhere (a start line, an error, ``check-config``): the
    password of its authority and every query value masked (``****``), the rest as written;
    ``<invalid URL>`` for text that does not parse as one."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "<invalid URL>"
    netloc = parts.netloc
    if parts.username is not None or parts.password is not None:
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        user = f"{parts.username}:****" if parts.password is not None else "****"
        netloc = f"{user}@{host}" + (f":{port}" if port else "")
    query = urlencode([(key, "****") for key, _ in parse_qsl(parts.query,
                                                            keep_blank_values=True)],
                      safe="*") if parts.query else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


class TooLarge(Exception):
    """A body larger than the bound it was read to."""


async def read_bounded(response: Any, limit: int) -> bytes:
    """The whole body of an aiohttp ``response``, at most ``limit`` bytes; :class:`TooLarge`
    past it (a read of one chunk is never taken for the body). A body that declares its
    length within ``limit`` and is not compressed (aiohttp would inflate it) is read at once:
    the parser stops at that length, and a judge's answer is one small read."""
    length = response.content_length
    if length is not None and length <= limit and "Content-Encoding" not in response.headers:
        return bytes(await response.read())
    chunks, size = [], 0
    async for chunk in response.content.iter_chunked(65_536):
        size += len(chunk)
        if size > limit:
            raise TooLarge(f"an answer larger than {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)
