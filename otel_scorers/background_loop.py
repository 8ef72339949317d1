"""One background event loop that runs the library's coroutines for synchronous callers.

The scorers and the judge client are written once, as coroutines. ``scorer.run()`` submits
``scorer.arun()`` to this loop and waits, so sync and async callers share one code path, and
litellm's async HTTP clients live on a single long-lived loop instead of one loop per call.
After ``os.fork()`` the child starts a fresh loop on first use.

Exit, in two steps. When the main thread finishes (before any ``atexit`` handler, while thread
pools, DNS lookups and the SDK exporters still work), :func:`at_main_thread_exit` hooks run:
processors let pending evaluations finish there, within their ``exit_timeout_s``. Later, at
``atexit``, processors shut down and the loop closes litellm's clients and stops.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import sys
import threading
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

__all__ = ["at_main_thread_exit", "before_exit", "close_at_exit", "in_loop", "on_loop",
           "run_sync", "submit", "within"]

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None


def _ensure_loop() -> asyncio.AbstractEventLoop:
    global _loop, _thread
    with _lock:
        if _loop is None or _thread is None or not _thread.is_alive():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="otel-scorers-loop",
                                      daemon=True)
            thread.start()
            _loop, _thread = loop, thread
        return _loop


def _reset_after_fork() -> None:
    global _loop, _thread, _lock
    _lock = threading.Lock()
    _loop, _thread = None, None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


_exit_hooks: list[weakref.WeakMethod[Callable[[], Any]]] = []
_closers: list[Callable[[], Coroutine[Any, Any, Any]]] = []


def close_at_exit(closer: Callable[[], Coroutine[Any, Any, Any]]) -> None:
    """Await ``closer()`` on the loop at exit, before it stops (HTTP sessions bound to it)."""
    if closer not in _closers:
        _closers.append(closer)
_main_exit_hooks: list[weakref.WeakMethod[Callable[[], Any]]] = []
_main_exit_registered = False


def at_main_thread_exit(method: Callable[[], Any]) -> None:
    """Run the bound ``method`` when the main thread finishes, before ``atexit`` handlers.

    Python runs these (``threading._register_atexit``) before it shuts down thread pools, so
    judge calls still work (a new HTTP connection resolves its host in a pool thread); the
    SDK's providers are still up, so what is emitted there is exported by their own shutdown.
    ``concurrent.futures.thread`` is imported first so that its pool shutdown, registered the
    same way and run in reverse order, comes after ours.
    """
    global _main_exit_registered
    _main_exit_hooks.append(weakref.WeakMethod(method))
    if _main_exit_registered:
        return
    register = getattr(threading, "_register_atexit", None)
    if register is None:  # not CPython 3.9+: atexit is the next best place
        atexit.register(_run_main_exit_hooks)
    else:
        with contextlib.suppress(RuntimeError):  # registering during shutdown itself
            register(_run_main_exit_hooks)
    _main_exit_registered = True


def _run_main_exit_hooks() -> None:
    for ref in list(_main_exit_hooks):
        hook = ref()
        if hook is not None:
            with contextlib.suppress(Exception):
                hook()


def before_exit(method: Callable[[], Any]) -> None:
    """Run the bound ``method`` (a processor's ``shutdown``) at exit, before the loop stops.

    atexit runs handlers last-registered first, so the loop's own handler can run before the
    OTel SDK shuts its providers down; processors registered here drain in time either way.
    """
    _exit_hooks.append(weakref.WeakMethod(method))


def _close_at_exit() -> None:
    """Close litellm's async HTTP clients and stop the loop before the interpreter finalizes.

    Otherwise the clients are garbage-collected during finalization, after this daemon thread
    was frozen (possibly holding the import lock), and their ``__del__`` (which imports) hangs
    the exit.
    """
    for ref in _exit_hooks:
        hook = ref()
        if hook is not None:
            with contextlib.suppress(Exception):
                hook()
    loop, thread = _loop, _thread
    if loop is None or thread is None or not thread.is_alive():
        return

    async def close_clients() -> None:
        for close in _closers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(close(), timeout=2.0)
        litellm = sys.modules.get("litellm")
        closer = getattr(litellm, "close_litellm_async_clients", None)
        if closer is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(closer(), timeout=2.0)

    with contextlib.suppress(Exception):
        asyncio.run_coroutine_threadsafe(close_clients(), loop).result(timeout=3.0)
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=2.0)


atexit.register(_close_at_exit)


def in_loop() -> bool:
    """True when called from the background loop's own thread."""
    return _thread is not None and threading.current_thread() is _thread


async def on_loop(coro: Coroutine[Any, Any, T]) -> T:
    """Await ``coro`` on the background loop from any event loop (directly when already on it).

    litellm binds per-loop state (its logging worker, HTTP sessions) to the loop that first
    calls it; keeping every judge call on one long-lived loop means no such state is ever left
    behind on a loop that closes (a worker's, a test's, a user's ``asyncio.run``).
    """
    if in_loop():
        return await coro
    return await asyncio.wrap_future(submit(coro))


def submit(coro: Coroutine[Any, Any, T]) -> Future[T]:
    """Schedule ``coro`` on the background loop and return a concurrent future."""
    loop = _ensure_loop()
    return asyncio.run_coroutine_threadsafe(coro, loop)


def call_soon(callback: Callable[[], Any]) -> None:
    """Run ``callback`` on the background loop soon (from any thread)."""
    _ensure_loop().call_soon_threadsafe(callback)


async def within(awaitable: Awaitable[T], timeout_s: float) -> T:
    """``await awaitable``, or :class:`TimeoutError` after ``timeout_s`` (it is cancelled).

    What ``asyncio.wait_for`` does, in the calling task: ``asyncio.timeout`` (Python 3.11+)
    arms one timer where ``wait_for`` also wraps the awaitable in a task of its own, with its
    own future and callbacks: on every evaluation's path (its deadline, each judge call's,
    the pump's wait) that was a fifth of the event loop's own work. ``wait_for`` on 3.10.
    """
    timeout = getattr(asyncio, "timeout", None)
    if timeout is None:  # Python 3.10
        return await asyncio.wait_for(awaitable, timeout_s)
    async with timeout(timeout_s):
        return await awaitable


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on the background loop and wait for its result.

    Calling it from the background loop itself would deadlock, so that raises instead.
    """
    if in_loop():
        coro.close()
        raise RuntimeError("run() called from the otel-scorers event loop: await arun() instead")
    return submit(coro).result()


async def every(interval_s: float, work: Callable[[], Awaitable[None]],
                stopped: Callable[[], bool], failed: Callable[[Exception], None]) -> None:
    """``work()`` every ``interval_s`` seconds, the first one interval after the start, until
    ``stopped()``; a failure goes to ``failed`` (unless stopping) and the next round comes as
    usual (the judge canaries, the batch lane)."""
    while not stopped():
        await asyncio.sleep(interval_s)
        if stopped():
            return
        try:
            await work()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if not stopped():
                failed(exc)
