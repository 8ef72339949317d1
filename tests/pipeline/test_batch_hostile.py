"""The batch lane under a provider that answers as a broken or hostile one would (issue 53):
a lost batch, a state that is not JSON, an output file that answers 404 or is over the bound,
a custom id answered twice, a full disk at the batch's record, a ``kill -9`` during the
create. The lane's promise (pipeline.batch.lane): every run is decided, the round never stops,
no line is paid twice outside the window the docs name, an oversized file is read once."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from otel_scorers.testing import ScriptedJudgeServer, judge_responder
from tests.pipeline.test_batch_lane import HERE, batch_processor, lane_env, pending, wait_for
from tests.support import Telemetry, end_agent_span

__all__ = ["lane_env"]  # the fixture, shared with test_batch_lane

pytestmark = pytest.mark.timeout(300)


def decided(processor: Any) -> int:
    stats = processor.stats()["rubric"]
    return int(stats.get("scored", 0) + stats.get("error", 0))


def errors_of(telemetry: Telemetry) -> list[str]:
    return [str(s.attributes.get("otel_scorers.error.type")) for s in
            telemetry.evaluation_spans() if s.attributes.get("otel_scorers.error.type")]


def contents(server: ScriptedJudgeServer) -> list[str]:
    return [target for method, target, _ in server.batches.calls
            if method == "GET" and target.endswith("/content")]


def test_a_lost_batch_is_asked_again_and_the_lane_goes_on(
        lane_env: Path, telemetry: Telemetry, make_processor: Any,
        judge_server: ScriptedJudgeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """``GET /v1/batches/{id}`` answers 404 (the provider deleted or lost it): its run is sent
    again in a new batch and scored; a run that came later is scored too."""
    judge_server.responder = judge_responder()
    judge_server.batches.plan("lost")
    monkeypatch.setenv("OTEL_SCORERS_BATCH_MAX_ATTEMPTS", "2")
    processor = batch_processor(make_processor, judge_server)
    end_agent_span(telemetry, prompt="q0")
    assert processor.force_flush(30_000)
    wait_for(lambda: judge_server.batches.batches, "the first batch")
    end_agent_span(telemetry, prompt="q1")
    assert processor.force_flush(30_000)
    wait_for(lambda: decided(processor) == 2, "both runs decided")
    assert processor.stats()["rubric"]["scored"] == 2
    health = processor.health()["batch"]
    assert health["lost"] == 1 and health["retried"] == 1
    wait_for(lambda: pending(lane_env) == 0, "the spool emptied")


@pytest.mark.parametrize("behaviour", ["garbage", "broken"])
def test_a_batch_whose_state_never_reads_is_given_up_cancelled_and_said(
        lane_env: Path, telemetry: Telemetry, make_processor: Any,
        judge_server: ScriptedJudgeServer, monkeypatch: pytest.MonkeyPatch,
        behaviour: str) -> None:
    """``GET /v1/batches/{id}`` answers 200 with a page that is not JSON (or 500) for ever:
    the round goes on (a later run is submitted and scored), the batch is given up after
    ``give_up_after_s``, cancelled at the provider, and its run ends as a counted error."""
    judge_server.responder = judge_responder()
    judge_server.batches.plan(behaviour)
    monkeypatch.setenv("OTEL_SCORERS_BATCH_MAX_ATTEMPTS", "1")
    monkeypatch.setenv("OTEL_SCORERS_BATCH_GIVE_UP_AFTER_S", "2")
    processor = batch_processor(make_processor, judge_server)
    end_agent_span(telemetry, prompt="q0")
    assert processor.force_flush(30_000)
    (first,) = wait_for(lambda: list(judge_server.batches.batches), "the first batch")
    end_agent_span(telemetry, prompt="q1")
    assert processor.force_flush(30_000)
    wait_for(lambda: processor.stats()["rubric"].get("scored") == 1, "the later run scored")
    wait_for(lambda: decided(processor) == 2, "the lost one decided", timeout_s=30)
    assert errors_of(telemetry) == ["batch_expired"]
    assert judge_server.batches.cancels == [first]
    health = processor.health()["batch"]
    assert health["given_up"] == 1 and health["cancelled"] == 1 and health["round_errors"]
    wait_for(lambda: pending(lane_env) == 0, "the spool emptied")


def test_an_output_file_that_answers_404_is_asked_again(
        lane_env: Path, telemetry: Telemetry, make_processor: Any,
        judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder()
    judge_server.batches.plan("no_content")
    processor = batch_processor(make_processor, judge_server)
    end_agent_span(telemetry)
    assert processor.force_flush(30_000)
    wait_for(lambda: processor.stats()["rubric"].get("scored") == 1, "scored in batch two")
    health = processor.health()["batch"]
    assert health["missing_files"] == 1 and health["retried"] == 1
    assert len(judge_server.batches.batches) == 2


def test_an_output_file_over_the_bound_is_read_once(
        lane_env: Path, telemetry: Telemetry, make_processor: Any,
        judge_server: ScriptedJudgeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Over the bound: the lines within it are used, the others are ``batch_failed`` error
    results at once, and the file is never downloaded again (it was every round)."""
    judge_server.responder = judge_responder()
    bound = 1_500
    monkeypatch.setattr("otel_scorers.judge.batch_output.MAX_FILE_BYTES", bound)
    monkeypatch.setenv("OTEL_SCORERS_BATCH_INTERVAL_S", "1")  # the three runs in one batch
    processor = batch_processor(make_processor, judge_server)
    for index in range(3):
        end_agent_span(telemetry, prompt=f"q{index}")
    assert processor.force_flush(30_000)
    wait_for(lambda: decided(processor) == 3, "every run decided")
    (batch,) = judge_server.batches.batches.values()
    output = judge_server.batches.files[batch["output_file_id"]]
    within, size = 0, 0
    for line in output.splitlines(keepends=True):
        size += len(line)
        within += size <= bound
    assert len(output) > bound and 0 < within < 3
    assert processor.stats()["rubric"]["scored"] == within
    assert errors_of(telemetry) == ["batch_failed"] * (3 - within)
    time.sleep(2.5)  # rounds go by
    assert len(contents(judge_server)) == 1
    assert processor.health()["batch"]["truncated"] == 1
    assert len(judge_server.batches.batches) == 1


def test_a_custom_id_answered_twice_keeps_its_first_line(
        lane_env: Path, telemetry: Telemetry, make_processor: Any,
        judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder()
    judge_server.batches.plan("duplicated")
    processor = batch_processor(make_processor, judge_server)
    end_agent_span(telemetry)
    assert processor.force_flush(30_000)
    (span,) = wait_for(telemetry.evaluation_spans, "the result")
    (batch,) = judge_server.batches.batches.values()
    lines = judge_server.batches.files[batch["output_file_id"]].splitlines()
    assert len(lines) == 2 and b'\\"satisfied\\": false' in lines[1]  # the twin fails
    assert span.attributes["gen_ai.evaluation.score.label"] == "pass"
    wait_for(lambda: processor.health()["batch"]["duplicates"] == 1, "the twin counted")
    assert len(telemetry.evaluation_spans()) == 1


def test_a_full_disk_at_the_batch_record_never_sends_the_lines_again(
        lane_env: Path, telemetry: Telemetry, make_processor: Any,
        judge_server: ScriptedJudgeServer, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """The batch created, its id cannot be written (ENOSPC): followed from memory, one batch
    only (a new batch of the same lines was created every round), the results emitted."""
    from otel_scorers.judge.spool import Spool

    judge_server.responder = judge_responder()
    judge_server.batches.polls = 8  # a few rounds before it completes
    real = Spool.save_batch

    def full(self: Spool, record: Any) -> None:
        if "id" in record:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(self, record)

    monkeypatch.setattr(Spool, "save_batch", full)
    processor = batch_processor(make_processor, judge_server)
    with caplog.at_level("WARNING", logger="otel_scorers"):
        for index in range(3):
            end_agent_span(telemetry, prompt=f"q{index}")
        assert processor.force_flush(30_000)
        wait_for(lambda: len(telemetry.evaluation_spans()) == 3, "the results")
    assert len(judge_server.batches.batches) == 1
    assert processor.health()["batch"]["record_failed"] >= 1
    (line,) = [r.getMessage() for r in caplog.records if "record" in r.getMessage()]
    assert "OTEL_SCORERS_BATCH_DIR" in line and "No space left" in line


@pytest.mark.parametrize("reached", [True, False])
def test_a_create_whose_answer_is_lost_is_never_paid_twice(
        lane_env: Path, telemetry: Telemetry, make_processor: Any,
        judge_server: ScriptedJudgeServer, monkeypatch: pytest.MonkeyPatch,
        reached: bool) -> None:
    """``POST /v1/batches`` fails with no answer (a timeout, a reset): when the provider had
    created the batch, the next round finds it by its intent and adopts it; when the call
    never reached it, the intent is dropped and the runs go out in one new batch."""
    from otel_scorers.errors import JudgeConnectionError
    from otel_scorers.judge.batches import BatchAPI

    judge_server.responder = judge_responder()
    real = BatchAPI.create
    calls: list[int] = []

    async def lost(self: BatchAPI, *args: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            if reached:
                await real(self, *args)
            raise JudgeConnectionError("could not reach the batch API: TimeoutError")
        return await real(self, *args)

    monkeypatch.setattr(BatchAPI, "create", lost)
    processor = batch_processor(make_processor, judge_server)
    for index in range(2):
        end_agent_span(telemetry, prompt=f"q{index}")
    assert processor.force_flush(30_000)
    wait_for(lambda: len(telemetry.evaluation_spans()) == 2, "both results")
    assert len(judge_server.batches.batches) == 1  # one batch paid
    health = processor.health()["batch"]
    assert (health["adopted"], health["intents_dropped"]) == ((1, 0) if reached else (0, 1))
    wait_for(lambda: pending(lane_env) == 0, "the spool emptied")


def test_a_kill_9_during_the_create_adopts_the_orphan_batch(
        tmp_path: Path, judge_server: ScriptedJudgeServer) -> None:
    """The provider created the batch, the process died before it read the answer: the next
    process finds the batch by the intent in its metadata and adopts it (no second batch)."""
    judge_server.responder = judge_responder()
    judge_server.batches.create_delay_s = 30
    spool = tmp_path / "spool"
    env = {**os.environ, "OTEL_SCORERS_BATCH_DIR": str(spool),
           "OTEL_SCORERS_BATCH_INTERVAL_S": "0.2", "OTEL_SCORERS_CANARY": "false",
           "PYTHONPATH": os.pathsep.join(sys.path)}
    first = subprocess.Popen([sys.executable, str(HERE / "batch_app.py"), judge_server.url,
                              "3"], stdout=subprocess.PIPE, text=True, env=env)
    assert first.stdout is not None
    traces = json.loads(first.stdout.readline())
    wait_for(lambda: judge_server.batches.batches, "the batch created, its answer held")
    first.send_signal(signal.SIGKILL)
    first.wait(30)
    judge_server.batches.create_delay_s = 0
    judge_server.batches.polls = 1
    second = subprocess.Popen([sys.executable, str(HERE / "batch_app.py"), judge_server.url,
                               "0"], stdout=subprocess.PIPE, text=True, env=env)
    try:
        out, _ = second.communicate(timeout=120)
    finally:
        second.kill()
    results = [json.loads(line) for line in out.splitlines()[1:]]
    assert sorted(r["trace_id"] for r in results) == sorted(traces)  # each once
    assert len(judge_server.batches.batches) == 1  # adopted, not paid again
    assert list((spool / "pending").glob("*.json")) == []
    assert list((spool / "batches").glob("*.json")) == []
