"""The worker's intake: when an offer wakes the pump, and that the pump paces idle wake-ups
itself (``offer`` on the application's thread reads no clock)."""

from __future__ import annotations

import time
from typing import Any

from otel_scorers.pipeline.worker import Worker


class Recorder:
    """A worker whose pump only admits (no jobs), recording what it took and each wake-up."""

    def __init__(self, *, idle_wake_s: float, period_s: float = 3600.0) -> None:
        self.admitted: list[Any] = []
        self.wakeups = 0
        self.worker: Worker[Any] = Worker(self._handle, queue_size=64, concurrency=2,
                                          period_s=period_s, admit=self._admit)
        self.worker.IDLE_WAKE_S = idle_wake_s  # type: ignore[misc]
        wakeup = self.worker._wakeup

        def counted(**how: bool) -> None:
            self.wakeups += 1
            wakeup(**how)

        self.worker._wakeup = counted  # type: ignore[method-assign]

    async def _handle(self, item: Any) -> None:
        return None

    def _admit(self, item: Any) -> tuple[Any, ...]:
        self.admitted.append(item)
        return ()

    def wait_until(self, test: Any, what: str) -> None:
        deadline = time.monotonic() + 60
        while not test():
            assert time.monotonic() < deadline, what
            time.sleep(0.005)

    def idle(self) -> None:
        """Until the pump sleeps with the intake empty."""
        self.wait_until(lambda: self.worker._sleeping and not self.worker.intake,
                        "the pump never went idle")


def test_an_offer_wakes_an_idle_pump_at_once() -> None:
    """With a period of an hour, only a wake-up can make the pump take the second offer."""
    recorder = Recorder(idle_wake_s=0.02)
    try:
        assert recorder.worker.offer("first")  # starts the pump
        recorder.wait_until(lambda: recorder.admitted == ["first"], "the first offer was lost")
        recorder.idle()
        assert recorder.worker.offer("second")
        recorder.wait_until(lambda: recorder.admitted == ["first", "second"],
                            "an idle pump was not woken by an offer")
        assert recorder.wakeups == 2
    finally:
        recorder.worker.stop(5)


def test_offers_while_the_pump_paces_itself_wake_it_once() -> None:
    """An offer into the empty intake of a sleeping pump wakes it; woken soon after it last
    looked, the pump waits out the rest of ``IDLE_WAKE_S`` (an hour here), and the offers
    that arrive meanwhile wake nothing; a flush ends the wait, nothing lost, in order."""
    recorder = Recorder(idle_wake_s=3600.0)
    try:
        assert recorder.worker.offer(0)
        recorder.wait_until(lambda: recorder.admitted == [0], "the first offer was lost")
        recorder.idle()
        for item in range(1, 11):
            assert recorder.worker.offer(item)
        assert recorder.wakeups == 2  # the start, and the first offer after the pump slept
        assert recorder.admitted == [0]  # the pump paces itself: nothing taken yet
        assert recorder.worker.flush(60)
        assert recorder.admitted == list(range(11))
    finally:
        recorder.worker.stop(5)


def test_a_quarter_full_intake_wakes_a_pacing_pump() -> None:
    """The pump's own pacing never holds a quarter-full intake (16 of 64 items here)."""
    recorder = Recorder(idle_wake_s=3600.0)
    try:
        assert recorder.worker.offer(0)
        recorder.idle()
        for item in range(1, 18):
            assert recorder.worker.offer(item)
        recorder.wait_until(lambda: len(recorder.admitted) == 18,
                            "a quarter-full intake did not end the pacing")
        assert recorder.admitted == list(range(18))
    finally:
        recorder.worker.stop(5)


def test_a_stopped_worker_takes_no_offer() -> None:
    recorder = Recorder(idle_wake_s=0.02)
    assert recorder.worker.offer("before")
    recorder.worker.stop(5)
    assert not recorder.worker.offer("after")
    assert recorder.admitted == ["before"]


def test_within_answers_in_time_and_cancels_what_runs_late() -> None:
    """``background_loop.within``: the awaited value in time; past the timeout a
    ``TimeoutError``, and the awaited coroutine is cancelled (it does not run on)."""
    import asyncio

    from otel_scorers.background_loop import run_sync, within

    state: dict[str, bool] = {}

    async def slow() -> str:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            state["cancelled"] = True
            raise
        return "late"

    async def quick() -> str:
        return "answer"

    async def both() -> tuple[str, str]:
        first = await within(quick(), 5.0)
        try:
            await within(slow(), 0.01)
        except TimeoutError:
            return first, "timed out"
        return first, "no timeout"

    assert run_sync(both()) == ("answer", "timed out")
    assert state == {"cancelled": True}
