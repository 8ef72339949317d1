"""Judging in a child process (``isolation: process``, ``OTEL_SCORERS_ISOLATION=process``).

Each evaluation's judge work (the prompt, the judge call through litellm, parsing) runs in one
child process started by the processor on first use; the application process keeps selection,
sampling, capture and emission (the scores still go out through the application's own
providers) and pays only for handing each captured run over a pipe and reading the result
back. The child is a plain ``python -m otel_scorers.pipeline.isolated_child`` (never the
application's ``__main__`` again, as ``multiprocessing``'s spawn would run it), with the OTel
SDK disabled and zero-code scoring and auto-instrumentation taken out of its environment, so
that it emits nothing and never scores itself.

The scorers are pickled to the child once. A scorer the child cannot rebuild (a class defined
in the application's ``__main__``, a lambda redactor) stays in the application process, with
one warning that names it. If the child dies, the evaluations it had are errors
(``connection_error``, counted) and the next evaluation starts a new child; when an evaluation
times out, the child is pinged, and one that does not answer within 5 s (stopped, or its loop
blocked) is killed and replaced the same way. A scorer that raises in the child fails as it
would here (counted ``error``, ``internal_error``), at once. Frames on the pipes
are a 4-byte length and a pickle; only this library's own child writes to them. Fused judge
calls are made per process: in the child, each scorer asks alone.

The gateway (``otel-scorers serve``) remains the choice for fleets of many processes: one
judging process for all of them instead of one per application process.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import pickle
import struct
import sys
from collections.abc import Mapping
from typing import Any

from otel_scorers.errors import JudgeConnectionError
from otel_scorers.scorers.base import Scorer
from otel_scorers.scorers.result import ScoreError, ScoreResult
from otel_scorers.scorers.run import ScorerRun

__all__ = ["IsolatedScorerError", "IsolatedScorers"]

logger = logging.getLogger(__name__)

FRAME_HEADER = struct.Struct("!I")
#: The largest frame either side accepts (a captured run is bounded by capture limits).
MAX_FRAME = 256 * 1024 * 1024
#: Seconds a child has to answer a ping after an evaluation timed out before it is replaced.
PING_TIMEOUT_S = 5.0
#: Variables that would make the child instrument or score itself.
_SCRUBBED = ("OTEL_SCORERS_ENABLED", "OTEL_PYTHON_CONFIGURATOR", "OTEL_PYTHON_DISTRO",
             "OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER", "OTEL_LOGS_EXPORTER")


class IsolatedScorerError(RuntimeError):
    """A scorer raised in the judging process (its type and message, as the child saw them)."""


class IsolatedScorers:
    """The scorers that judge in the child process; :meth:`arun` is awaited on the library's
    background loop in place of ``scorer.arun``."""

    def __init__(self, scorers: Mapping[str, Scorer]) -> None:
        self._payloads: dict[str, bytes] = {}
        for name, scorer in scorers.items():
            try:
                self._payloads[name] = pickle.dumps(scorer)
            except Exception as exc:
                logger.warning("otel-scorers: scorer %s cannot be sent to the judging process "
                               "(%s: %s); it judges in the application process", name,
                               type(exc).__name__, exc)
        self._process: asyncio.subprocess.Process | None = None
        self._starting: asyncio.Future[set[str]] | None = None
        self._pending: dict[int, asyncio.Future[ScoreResult]] = {}
        self._ids = itertools.count()
        self._remote: set[str] = set(self._payloads)
        self._pid = os.getpid()
        self._probing = False

    def handles(self, name: str) -> bool:
        return name in self._remote

    async def arun(self, name: str, run: ScorerRun) -> ScoreResult:
        """Judge ``run`` with scorer ``name`` in the child; an error result when it died."""
        try:
            ready = await self._ensure()
        except OSError as exc:
            return _died(name, run, f"could not start the judging process: {exc}")
        if name not in ready:
            raise LookupError(name)  # the caller judges it here
        process = self._process
        assert process is not None and process.stdin is not None
        ident = next(self._ids)
        future: asyncio.Future[ScoreResult] = asyncio.get_running_loop().create_future()
        self._pending[ident] = future
        try:
            write_frame(process.stdin, (ident, name, run))
            await process.stdin.drain()
            return await future
        except (ConnectionError, BrokenPipeError) as exc:
            return _died(name, run, f"the judging process went away: {exc}")
        except asyncio.CancelledError:  # the evaluation timed out: is the child stuck?
            if not self._probing:
                self._probing = True
                asyncio.get_running_loop().create_task(self._probe(process))
            raise
        finally:
            self._pending.pop(ident, None)

    async def _probe(self, process: asyncio.subprocess.Process) -> None:
        """Ping the child; kill it when it does not answer (the next evaluation gets a new
        one, and the evaluations it held fail as for a dead child)."""
        try:
            if process is not self._process or process.returncode is not None:
                return
            assert process.stdin is not None
            ident = next(self._ids)
            future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            self._pending[ident] = future
            try:
                write_frame(process.stdin, (ident, None, None))
                await process.stdin.drain()
                await asyncio.wait_for(future, PING_TIMEOUT_S)
            except (asyncio.TimeoutError, ConnectionError, BrokenPipeError):
                if process.returncode is None:
                    logger.warning("otel-scorers: the judging process (pid %s) stopped "
                                   "answering; it is replaced", process.pid)
                    process.kill()
            finally:
                self._pending.pop(ident, None)
        finally:
            self._probing = False

    async def _ensure(self) -> set[str]:
        if os.getpid() != self._pid:  # a forked child of the application: its own process
            self._pid, self._process, self._starting = os.getpid(), None, None
            self._pending = {}
        if self._starting is None or (self._starting.done() and not self._alive()):
            self._starting = asyncio.get_running_loop().create_future()
            try:
                ready = await self._start()
            except BaseException as exc:
                starting, self._starting = self._starting, None
                starting.set_exception(exc)
                starting.exception()  # retrieved: awaiting callers get it, nobody else
                raise
            self._starting.set_result(ready)
        return await asyncio.shield(self._starting)

    def _alive(self) -> bool:
        return self._process is not None and self._process.returncode is None

    async def _start(self) -> set[str]:
        env = _child_environment()
        self._process = process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "otel_scorers.pipeline.isolated_child", str(os.getpid()),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, env=env,
            limit=MAX_FRAME)
        assert process.stdin is not None and process.stdout is not None
        write_frame(process.stdin, self._payloads)
        await process.stdin.drain()
        hello = await read_frame(process.stdout)
        if hello is None:
            raise OSError(f"the judging process exited ({await process.wait()})")
        ready, failed = hello
        for name, problem in failed.items():
            logger.warning("otel-scorers: the judging process cannot rebuild scorer %s (%s); it "
                           "judges in the application process", name, problem)
        self._remote = set(ready)
        asyncio.get_running_loop().create_task(self._results(process))
        return set(ready)

    async def _results(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        while True:
            try:
                frame = await read_frame(process.stdout)
            except Exception:
                frame = None
            if frame is None:
                break
            ident, result, *failure = frame
            future = self._pending.get(ident)
            if future is None or future.done():
                continue
            if failure and failure[0] is not None:
                kind, message = failure[0]
                future.set_exception(IsolatedScorerError(f"{kind}: {message}"))
            else:
                future.set_result(result)
        code = await process.wait()
        for future in list(self._pending.values()):
            if not future.done():
                future.set_exception(ConnectionError(f"the judging process exited ({code})"))

    async def close(self) -> None:
        process = self._process
        if process is not None and process.returncode is None:
            if process.stdin is not None:
                process.stdin.close()
            try:
                await asyncio.wait_for(process.wait(), 5.0)
            except asyncio.TimeoutError:
                process.kill()


def _died(name: str, run: ScorerRun, message: str) -> ScoreResult:
    error = JudgeConnectionError(message)
    return ScoreResult(run_id=run.run_id, scorer=name, error=ScoreError.from_exception(error),
                       reason=f"Not scored: {error}")


def _child_environment() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in _SCRUBBED}
    env["OTEL_SDK_DISABLED"] = "true"
    # opentelemetry-instrument puts its sitecustomize on PYTHONPATH: not in the child
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
             if p and not p.rstrip("/").endswith("auto_instrumentation")]
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(paths)
    else:
        env.pop("PYTHONPATH", None)
    return env


def write_frame(stream: Any, value: Any) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(FRAME_HEADER.pack(len(data)) + data)


async def read_frame(stream: asyncio.StreamReader) -> Any:
    try:
        header = await stream.readexactly(FRAME_HEADER.size)
        (size,) = FRAME_HEADER.unpack(header)
        if size > MAX_FRAME:
            raise ValueError(f"frame of {size} bytes")
        return pickle.loads(await stream.readexactly(size))
    except asyncio.IncompleteReadError:
        return None
