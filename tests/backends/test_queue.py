"""The queue in front of the result sinks, with a sink of our own: bounded (past the bound a
result is dropped and counted), retried with backoff then dropped, refused writes dropped at
once, a failing sink never raises into the pipeline, everything counted in the metric."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import pytest

from otel_scorers.backends import Evaluated, SinkError, SinkQueue
from otel_scorers.background_loop import submit
from otel_scorers.scorers.result import ScoreResult


class Recording:
    """A sink that records batches, failing as told."""

    name = "recording"
    max_batch = 3

    def __init__(self, fail: list[SinkError | Exception] | None = None,
                 gate: asyncio.Event | None = None) -> None:
        self.batches: list[list[str]] = []
        self.fail = list(fail or [])
        self.gate = gate

    async def write(self, batch: Sequence[Evaluated]) -> None:
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            raise self.fail.pop(0)
        self.batches.append([item.span_id for item in batch])


def item(index: int) -> Evaluated:
    return Evaluated("0" * 32, f"{index:016x}",
                     ScoreResult(run_id="r", scorer="rubric", score=1.0, label="pass"))


def offer(queue: SinkQueue, *items: Evaluated) -> None:
    async def go() -> None:
        for one in items:
            queue.offer(one)
    submit(go()).result(10)


def test_results_are_written_in_batches_and_counted() -> None:
    counted: list[tuple[str, str, str | None, int]] = []
    sink = Recording()
    queue = SinkQueue([sink], count=lambda *row: counted.append(row))
    offer(queue, *(item(i) for i in range(7)))
    assert queue.flush(10)
    assert sum(map(len, sink.batches)) == 7 and all(len(b) <= 3 for b in sink.batches)
    assert queue.totals()["recording"] == {"written": 7, "waiting": 0}
    assert sum(n for _, outcome, _, n in counted if outcome == "written") == 7
    queue.close(1)


def test_past_its_bound_a_result_is_dropped_and_counted() -> None:
    async def make_gate() -> asyncio.Event:
        return asyncio.Event()
    gate = submit(make_gate()).result(10)
    sink = Recording(gate=gate)
    queue = SinkQueue([sink], max_items=5)
    offer(queue, *(item(i) for i in range(12)))
    assert not queue.flush(0.2)  # the sink is stuck: nothing waits on the hot path
    submit(_set(gate)).result(10)
    assert queue.flush(10)
    totals = queue.totals()["recording"]
    assert totals["dropped:queue_full"] >= 4 and totals["written"] + totals["dropped"] == 12
    queue.close(1)


def test_the_queue_is_bounded_by_bytes_too() -> None:
    """Large results fill the bound long before the count does (issue 35.8)."""
    async def make_gate() -> asyncio.Event:
        return asyncio.Event()
    gate = submit(make_gate()).result(10)
    sink = Recording(gate=gate)
    queue = SinkQueue([sink], max_items=10_000, max_bytes=1_000_000)

    def large(index: int) -> Evaluated:
        return Evaluated("0" * 32, f"{index:016x}", ScoreResult(
            run_id="r", scorer="rubric", score=0.0, label="fail", reason="x" * 100_000))

    offer(queue, *(large(i) for i in range(30)))
    totals = queue.totals()["recording"]
    assert totals["dropped:queue_full"] >= 19, totals  # about 9 fit in a megabyte (+1 taken)
    submit(_set(gate)).result(10)
    assert queue.flush(10)
    totals = queue.totals()["recording"]
    assert totals["written"] + totals["dropped"] == 30 and totals["written"] <= 11
    offer(queue, *(large(i) for i in range(5)))  # drained: room again
    assert queue.flush(10) and queue.totals()["recording"]["written"] == totals["written"] + 5
    queue.close(1)


def test_a_refused_batch_is_written_item_by_item() -> None:
    """One result the backend refuses never takes the others of its batch (issue 35.8)."""

    class Picky(Recording):
        async def write(self, batch: Sequence[Evaluated]) -> None:
            if any(one.span_id == f"{4:016x}" for one in batch):
                raise SinkError("bad item", retryable=False, reason="http_422")
            await super().write(batch)

    sink = Picky()
    queue = SinkQueue([sink])
    offer(queue, *(item(i) for i in range(7)))
    assert queue.flush(10)
    assert queue.totals()["recording"] == {"written": 6, "dropped": 1, "dropped:http_422": 1,
                                           "waiting": 0}
    assert sorted(s for b in sink.batches for s in b) == [f"{i:016x}" for i in range(7) if i != 4]
    queue.close(1)


def eventually(check: Any, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_flush_never_waits_out_a_backend_that_is_down_and_close_counts_every_result(
        caplog: pytest.LogCaptureFixture) -> None:
    """Phoenix down: ``force_flush`` tries once more and lets go (not its whole timeout);
    at close every result not written is counted, the one in a write waiting to retry too."""
    down = SinkError("Phoenix unreachable", retryable=True, reason="unreachable")
    sink = Recording(fail=[down] * 1000)
    queue = SinkQueue([sink], retry_s=600)
    offer(queue, *(item(i) for i in range(6)))
    started = time.monotonic()
    assert not queue.flush(30)
    assert time.monotonic() - started < 10  # two quick failures, not 30 s
    queue.close(0.1)
    totals = queue.totals()["recording"]
    assert totals.get("written", 0) == 0
    assert totals["dropped:shutdown"] == 6, totals  # all six, the in-flight batch included


def test_a_normal_wait_is_retried_quietly(caplog: pytest.LogCaptureFixture) -> None:
    """MLflow before the trace has arrived: retried and counted, not a warning."""
    not_yet = SinkError("MLflow does not have the trace (yet)", retryable=True,
                        reason="trace_not_found", expected=True)
    said: list[str] = []
    queue = SinkQueue([Recording(fail=[not_yet])], retry_s=30,
                      log_once=lambda _key, message: said.append(message))
    offer(queue, item(1))
    eventually(lambda: queue.flush(10))
    assert queue.totals()["recording"]["written"] == 1 and said == []
    queue.close(1)


async def _set(event: asyncio.Event) -> None:
    event.set()


def test_failures_are_retried_then_dropped_refusals_at_once() -> None:
    sink = Recording(fail=[SinkError("down", retryable=True, reason="unreachable")] * 2)
    queue = SinkQueue([sink], retry_s=30)
    offer(queue, item(1))
    # a flush lets go of a sink failing twice in a row (it never waits out a backend that is
    # down); the result stays queued and the next flush tries it again
    eventually(lambda: queue.flush(10))
    assert queue.totals()["recording"] == {"retried": 2, "written": 1, "waiting": 0}
    refused = SinkQueue([Recording(fail=[SinkError("no", retryable=False, reason="http_401")])])
    offer(refused, item(2))
    assert refused.flush(10)
    assert refused.totals()["recording"] == {"dropped": 1, "dropped:http_401": 1, "waiting": 0}
    late = SinkQueue([Recording(fail=[SinkError("down", retryable=True, reason="unreachable")]
                                * 50)], retry_s=0.6)
    offer(late, item(3))
    eventually(lambda: late.flush(10))
    assert late.totals()["recording"]["dropped:retries_exhausted"] == 1
    for q in (queue, refused, late):
        q.close(1)


def test_a_sink_that_breaks_is_counted_and_logged_never_raised() -> None:
    said: list[str] = []
    queue = SinkQueue([Recording(fail=[RuntimeError("bug")])],
                      log_once=lambda key, message: said.append(message))
    offer(queue, item(1), item(2))
    assert queue.flush(10)
    totals = queue.totals()["recording"]
    assert totals["dropped:internal_error"] >= 1 and said


def test_close_counts_what_is_left_and_later_offers() -> None:
    async def make_gate() -> asyncio.Event:
        return asyncio.Event()
    queue = SinkQueue([Recording(gate=submit(make_gate()).result(10))])
    offer(queue, *(item(i) for i in range(5)))
    queue.close(0.2)
    offer(queue, item(9))
    totals = queue.totals()["recording"]
    assert totals["dropped:shutdown"] >= 3


@pytest.mark.parametrize("endpoint", ["127.0.0.1:6006", "file:///etc/passwd", ""])
def test_a_phoenix_endpoint_must_be_http(endpoint: str) -> None:
    from otel_scorers.backends import PhoenixSink
    from otel_scorers.errors import ConfigError

    with pytest.raises(ConfigError):
        PhoenixSink(endpoint)


@pytest.mark.parametrize(("variable", "value"), [
    ("OTEL_SCORERS_MLFLOW_TRACKING_URI", "databricks"),
    ("OTEL_SCORERS_PHOENIX_ENDPOINT", "localhost:6006"),
    ("OTEL_SCORERS_MLFLOW_TRACKING_URI", "ftp://bob:s3cret@host/x")])
def test_a_bad_backend_url_is_refused_where_settings_are_read(
        variable: str, value: str, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """check-config refuses it (exit 2, the variable named, no password) as ``install()``
    does: scoring off and said, never an exception into the application (issue 35.10)."""
    from click.testing import CliRunner
    from opentelemetry.sdk.trace import TracerProvider

    from otel_scorers import install
    from otel_scorers.cli import main

    monkeypatch.setenv(variable, value)
    monkeypatch.setenv("OTEL_SCORERS_JUDGE_MODEL", "openai/x")
    result = CliRunner().invoke(main, ["check-config"])
    assert result.exit_code == 2, result.output
    assert variable in result.output and "must be an http(s) URL" in result.output
    assert "s3cret" not in result.output
    provider = TracerProvider()
    install(tracer_provider=provider)
    assert "scoring is disabled" in caplog.text and "s3cret" not in caplog.text
    provider.shutdown()


def test_the_key_is_never_in_the_sinks_repr() -> None:
    from otel_scorers.backends import PhoenixSink

    assert "secret" not in repr(PhoenixSink("http://127.0.0.1:1", api_key="secret-key-123"))


class Named(Recording):
    def __init__(self, name: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.name = name


def test_a_hung_sink_never_holds_another() -> None:
    # Each sink drains on its own: one that never answers keeps its own results waiting, the
    # other's are written meanwhile.
    async def make_gate() -> asyncio.Event:
        return asyncio.Event()
    gate = submit(make_gate()).result(10)
    hung, fine = Named("hung", gate=gate), Named("fine")
    queue = SinkQueue([hung, fine])
    offer(queue, *(item(i) for i in range(7)))
    deadline = time.monotonic() + 30
    while sum(map(len, fine.batches)) < 7 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sum(map(len, fine.batches)) == 7 and not hung.batches
    assert not queue.flush(0.1)  # the hung sink's results are still waiting
    submit(_set(gate)).result(10)
    assert queue.flush(10) and sum(map(len, hung.batches)) == 7
    assert queue.totals() == {"hung": {"written": 7, "waiting": 0},
                              "fine": {"written": 7, "waiting": 0}}
    queue.close(1)
