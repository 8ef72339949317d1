"""The judging process of ``isolation: process`` (see :mod:`.isolated`): it reads the pickled
scorers, says which it could rebuild, then judges each framed ``(id, scorer, run)`` it reads on
stdin concurrently and writes ``(id, result)`` frames (``(id, None, (type, message))`` when the
scorer raised; a ``(id, None, None)`` ping is answered at once). At end of input (the
application closed the pipe) it finishes what it has, for at most 5 s, and exits; on Linux it is
killed with its parent (``PR_SET_PDEATHSIG``), so that a ``kill -9`` of the application never
leaves it behind."""

from __future__ import annotations

import asyncio
import os
import pickle
import signal
import sys
from typing import Any

from otel_scorers.pipeline.isolated import FRAME_HEADER, MAX_FRAME, read_frame
from otel_scorers.scorers.base import Scorer
from otel_scorers.scorers.run import ScorerRun


async def _serve() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_FRAME)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # stray prints of libraries go to stderr, never into the frames
    payloads = await read_frame(reader)
    scorers: dict[str, Scorer] = {}
    failed: dict[str, str] = {}
    for name, payload in (payloads or {}).items():
        try:
            scorers[name] = pickle.loads(payload)
        except Exception as exc:
            failed[name] = f"{type(exc).__name__}: {exc}"
    lock = asyncio.Lock()

    async def send(value: Any) -> None:
        data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        async with lock:
            await loop.run_in_executor(None, out.write, FRAME_HEADER.pack(len(data)) + data)

    await send((sorted(scorers), failed))

    async def judge(ident: int, name: str | None, run: ScorerRun | None) -> None:
        if name is None:  # a ping: the application checks that this process still answers
            await send((ident, "pong"))
            return
        try:
            result = await scorers[name].arun(run)  # type: ignore[arg-type]
        except Exception as exc:  # the application counts it as the scorer's own failure
            await send((ident, None, (type(exc).__name__, str(exc)[:2_000])))
            return
        await send((ident, result))

    tasks: set[asyncio.Task[None]] = set()
    while True:
        frame = await read_frame(reader)
        if frame is None:
            break
        task = loop.create_task(judge(*frame))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    if tasks:
        await asyncio.wait(tasks, timeout=5.0)


def _die_with_parent(parent: int) -> None:
    """Be killed when the application dies, whatever the way (Linux); elsewhere the closed
    pipe ends this process."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the application died before the line above
        os._exit(0)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        _die_with_parent(int(sys.argv[1]))
    asyncio.run(_serve())
