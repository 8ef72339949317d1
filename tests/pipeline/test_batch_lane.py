"""The batch lane (issue 38.1), against the scripted judge server's files and batches endpoints:
a scorer with ``lane: batch`` spools its judge requests, submits them as one batch, and emits
each answer late, on the evaluated span's context, parsed by the scorer's own code and priced at
the batch rates; partially failed and expired lines are asked again, past their attempts an
error result says why; a batch that never completes is given up on; a ``kill -9`` mid-batch and
a restart deliver every result once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from otel_scorers import RubricScorer
from otel_scorers.judge.client import JudgeClient
from otel_scorers.pipeline import ScorerSpec
from otel_scorers.testing import ScriptedJudgeServer, judge_responder
from tests.support import Telemetry, end_agent_span

pytestmark = pytest.mark.timeout(300)

# gpt-4o-mini in litellm's bundled price map, at its batch rates (the scripted judge answers
# 100 input and 50 output tokens)
BATCH_COST = 100 * 7.5e-08 + 50 * 3e-07
HERE = Path(__file__).parent


def wait_for(check: Any, what: str, timeout_s: float = 60) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


@pytest.fixture
def lane_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    spool = tmp_path / "spool"
    monkeypatch.setenv("OTEL_SCORERS_BATCH_DIR", str(spool))
    monkeypatch.setenv("OTEL_SCORERS_BATCH_INTERVAL_S", "0.2")
    monkeypatch.setenv("OTEL_SCORERS_CANARY", "false")
    return spool


def batch_processor(make_processor: Any, server: ScriptedJudgeServer) -> Any:
    judge = JudgeClient("openai/gpt-4o-mini", api_base=server.url, api_key="k",
                        structured_output="json_object")
    return make_processor([ScorerSpec(RubricScorer(judge, "- greets the user"),
                                      lane="batch")])


def pending(spool: Path) -> int:
    return len(list((spool / "pending").glob("*.json")))


def test_judgements_go_through_a_batch_and_land_late_on_their_spans(
        lane_env: Path, telemetry: Telemetry, make_processor: Any,
        judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder()
    processor = batch_processor(make_processor, judge_server)
    runs = [end_agent_span(telemetry, prompt=f"q{index}") for index in range(3)]
    assert processor.force_flush(30_000)
    # nothing asked live: three requests wait in the spool (or already in a batch)
    assert telemetry.evaluation_spans() == [] and pending(lane_env) == 3
    assert not [r for r in judge_server.requests if "batch" not in r.headers]
    spans = wait_for(lambda: len(telemetry.evaluation_spans()) == 3 and
                     telemetry.evaluation_spans(), "the batch's results")
    assert {s.parent.span_id for s in spans} == {r.context.span_id for r in runs}
    assert {s.context.trace_id for s in spans} == {r.context.trace_id for r in runs}
    for span in spans:
        assert span.attributes["otel_scorers.judge.service_tier"] == "batch"
        assert span.attributes["otel_scorers.judge.cost_usd"] == pytest.approx(BATCH_COST)
        assert span.attributes["gen_ai.evaluation.score.label"] == "pass"
    assert len(judge_server.batches.batches) == 1  # one batch of three lines
    assert [r.headers["batch"] for r in judge_server.requests] == ["batch-000002"] * 3
    assert processor.stats()["rubric"] == {"selected": 3, "scored": 3}
    wait_for(lambda: pending(lane_env) == 0, "the spool emptied")
    tiers = {a["service_tier"] for a, _ in telemetry.metrics()["otel_scorers.judge.cost"]}
    assert tiers == {"batch"}


def test_failed_and_expired_lines_are_asked_again_then_said(
        lane_env: Path, telemetry: Telemetry, make_processor: Any,
        judge_server: ScriptedJudgeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    judge_server.responder = judge_responder()
    judge_server.batches.plan("partial", "expired", "expired")
    monkeypatch.setenv("OTEL_SCORERS_BATCH_MAX_ATTEMPTS", "3")
    monkeypatch.setenv("OTEL_SCORERS_BATCH_INTERVAL_S", "1")  # the four runs in one batch
    processor = batch_processor(make_processor, judge_server)
    for index in range(4):
        end_agent_span(telemetry, prompt=f"q{index}")
    assert processor.force_flush(30_000)
    # batch 1: lines 0, 2 answered, 1, 3 failed; batch 2 (1, 3): 1 answered, 3 expired;
    # batch 3 (3): expired again: its third attempt, so an error result that says why
    wait_for(lambda: sum(processor.stats()["rubric"].get(k, 0) for k in ("scored", "error"))
             == 4, "every run decided", timeout_s=90)
    stats = processor.stats()["rubric"]
    assert stats["scored"] == 3 and stats["error"] == 1, stats
    (failed,) = [s for s in telemetry.evaluation_spans()
                 if s.attributes.get("otel_scorers.error.type")]
    assert failed.attributes["otel_scorers.error.type"] == "batch_expired"
    assert len(telemetry.evaluation_spans()) == 4  # each once
    assert len(judge_server.batches.batches) == 3
    assert processor.health()["batch"]["retried"] == 3


def test_a_batch_that_never_completes_is_given_up_on(
        lane_env: Path, telemetry: Telemetry, make_processor: Any,
        judge_server: ScriptedJudgeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    judge_server.responder = judge_responder()
    judge_server.batches.plan("never")
    monkeypatch.setenv("OTEL_SCORERS_BATCH_GIVE_UP_AFTER_S", "1")
    processor = batch_processor(make_processor, judge_server)
    end_agent_span(telemetry)
    assert processor.force_flush(30_000)
    wait_for(telemetry.evaluation_spans, "the run judged in a second batch")
    assert processor.stats()["rubric"] == {"selected": 1, "scored": 1}
    assert len(judge_server.batches.batches) == 2


def test_a_kill_9_mid_batch_and_a_restart_deliver_every_result_once(
        tmp_path: Path, judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder()
    judge_server.batches.polls = 10_000  # in progress until the test says otherwise
    spool = tmp_path / "spool"
    env = {**os.environ, "OTEL_SCORERS_BATCH_DIR": str(spool),
           "OTEL_SCORERS_BATCH_INTERVAL_S": "0.2", "OTEL_SCORERS_CANARY": "false",
           "PYTHONPATH": os.pathsep.join(sys.path)}
    first = subprocess.Popen([sys.executable, str(HERE / "batch_app.py"), judge_server.url,
                              "5"], stdout=subprocess.PIPE, text=True, env=env)
    assert first.stdout is not None
    traces = json.loads(first.stdout.readline())  # the five runs it ended
    wait_for(lambda: judge_server.batches.batches, "the batch submitted")
    wait_for(lambda: sum(len(json.loads(p.read_text())["entries"])
                         for p in (spool / "batches").glob("*.json")) == 5,
             "the five requests in the batch's record")
    first.send_signal(signal.SIGKILL)
    first.wait(30)
    judge_server.batches.polls = 1  # the batch completes at the next poll
    second = subprocess.Popen([sys.executable, str(HERE / "batch_app.py"), judge_server.url,
                               "0"], stdout=subprocess.PIPE, text=True, env=env)
    try:
        out, _ = second.communicate(timeout=120)
    finally:
        second.kill()
    results = [json.loads(line) for line in out.splitlines()[1:]]
    assert sorted(r["trace_id"] for r in results) == sorted(traces)  # each once
    assert all(r["label"] == "pass" and r["tier"] == "batch" for r in results)
    assert len(judge_server.batches.batches) == 1  # not submitted again
    assert list((spool / "pending").glob("*.json")) == []


def test_the_batch_lane_is_chosen_by_a_variable(
        lane_env: Path, monkeypatch: pytest.MonkeyPatch, telemetry: Telemetry,
        judge_server: ScriptedJudgeServer, make_processor: Any) -> None:
    """``OTEL_SCORERS_BATCH_SCORERS=rubric``: the rubric scorer batched, the alignment scorer
    live; a name no scorer has is refused at start."""
    from otel_scorers import PromptAlignmentScorer
    from otel_scorers.errors import ConfigError

    judge_server.responder = judge_responder()
    judge = JudgeClient("openai/gpt-4o-mini", api_base=judge_server.url, api_key="k",
                        structured_output="json_object")
    monkeypatch.setenv("OTEL_SCORERS_BATCH_SCORERS", "rubric")
    processor = make_processor([RubricScorer(judge, "- greets the user"),
                                PromptAlignmentScorer(judge)])
    end_agent_span(telemetry)
    assert processor.force_flush(30_000)
    assert [s.attributes["gen_ai.evaluation.name"] for s in telemetry.evaluation_spans()] == [
        "prompt_alignment"]  # live now; the rubric's in the spool
    wait_for(lambda: len(telemetry.evaluation_spans()) == 2, "the batched rubric result")
    monkeypatch.setenv("OTEL_SCORERS_BATCH_SCORERS", "rubric,nonesuch")
    with pytest.raises(ConfigError, match="nonesuch"):
        make_processor([RubricScorer(judge, "- greets the user")])


def test_an_answer_that_breaks_the_scorer_never_holds_the_batch(
        lane_env: Path, telemetry: Telemetry, make_processor: Any,
        judge_server: ScriptedJudgeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """A line whose replay raises (a bug, a scorer that breaks on it) is counted as that
    scorer's internal error and leaves the spool; the batch's other lines are emitted."""
    from otel_scorers.judge import batches

    judge_server.responder = judge_responder()
    monkeypatch.setenv("OTEL_SCORERS_BATCH_INTERVAL_S", "1")  # the runs in one batch
    real = batches.replay
    calls: list[int] = []

    async def breaks_first(scorer: Any, run: Any, body: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("a scorer bug")
        return await real(scorer, run, body)

    monkeypatch.setattr("otel_scorers.pipeline.batch.build.replay", breaks_first)
    processor = batch_processor(make_processor, judge_server)
    for index in range(3):
        end_agent_span(telemetry, prompt=f"q{index}")
    assert processor.force_flush(30_000)
    wait_for(lambda: len(telemetry.evaluation_spans()) == 2, "the two other results")
    wait_for(lambda: processor.stats()["rubric"].get("error") == 1, "the broken one counted")
    assert processor.stats()["rubric"]["scored"] == 2
    wait_for(lambda: pending(lane_env) == 0, "the spool emptied")


def test_the_batch_api_goes_through_the_judges_proxy(
        lane_env: Path, telemetry: Telemetry, make_processor: Any,
        judge_server: ScriptedJudgeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Behind an egress proxy the batch lane reaches the provider as the live judge does:
    HTTP_PROXY (with user:password@, sent as Proxy-Authorization, never in the URL) routes
    every files and batches call; the judge host here resolves nowhere, only the proxy (the
    scripted server, which records the absolute request targets) reaches it."""
    import base64

    judge_server.responder = judge_responder()
    monkeypatch.setenv("HTTP_PROXY",
                       judge_server.url.removesuffix("/v1").replace("://", "://us%40er:s3cret@"))
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    judge = JudgeClient("openai/gpt-4o-mini", api_base="http://judge.invalid:9/v1",
                        api_key="k", structured_output="json_object")
    processor = make_processor([ScorerSpec(RubricScorer(judge, "- greets the user"),
                                           lane="batch")])
    end_agent_span(telemetry)
    assert processor.force_flush(30_000)
    (span,) = wait_for(telemetry.evaluation_spans, "the result through the proxy")
    assert span.attributes["gen_ai.evaluation.score.label"] == "pass"
    calls = judge_server.batches.calls
    assert {target.split("/v1/")[0] for _, target, _ in calls} == {"http://judge.invalid:9"}
    expected = "Basic " + base64.b64encode(b"us@er:s3cret").decode()
    assert {headers.get("proxy-authorization") for _, _, headers in calls} == {expected}
    assert {headers.get("authorization") for _, _, headers in calls} == {"Bearer k"}


def test_a_job_that_ends_submits_what_waits_and_says_where_it_is(
        lane_env: Path, telemetry: Telemetry, make_processor: Any,
        judge_server: ScriptedJudgeServer, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """A process that ends before its lane's first round: what it spooled goes out in one
    batch at exit, and one line says how many judgements wait where, who emits them, and what
    a job that runs once uses instead; the next process on the spool emits them (the batch
    submitted at exit, not a second one)."""
    judge_server.responder = judge_responder()
    judge_server.batches.polls = 10_000
    monkeypatch.setenv("OTEL_SCORERS_BATCH_INTERVAL_S", "3600")
    first = batch_processor(make_processor, judge_server)
    for index in range(3):
        end_agent_span(telemetry, prompt=f"q{index}")
    assert first.force_flush(30_000)
    assert judge_server.batches.batches == {}
    with caplog.at_level("WARNING", logger="otel_scorers"):
        first.shutdown()
    (line,) = [r.getMessage() for r in caplog.records if "wait in the spool" in r.getMessage()]
    assert line.startswith("otel-scorers: 3 batch-lane judgement(s) wait in the spool "
                           f"{lane_env} (3 submitted at exit)")
    assert "rescore --lane batch" in line
    (batch,) = judge_server.batches.batches.values()
    assert len(judge_server.batches.files[batch["input_file_id"]].splitlines()) == 3
    assert telemetry.evaluation_spans() == [] and pending(lane_env) == 3
    judge_server.batches.polls = 1
    monkeypatch.setenv("OTEL_SCORERS_BATCH_INTERVAL_S", "0.2")
    judge = JudgeClient("openai/gpt-4o-mini", api_base=judge_server.url, api_key="k",
                        structured_output="json_object")  # its spans through the first's export
    second = make_processor([ScorerSpec(RubricScorer(judge, "- greets the user"),
                                        lane="batch")], install=False)
    wait_for(lambda: len(telemetry.evaluation_spans()) == 3, "the next process emitted them")
    assert len(judge_server.batches.batches) == 1
    assert second.health()["batch"]["leading"] is True
    wait_for(lambda: pending(lane_env) == 0, "the spool emptied")


def test_a_batch_stays_under_the_providers_file_limit(
        lane_env: Path, telemetry: Telemetry, make_processor: Any,
        judge_server: ScriptedJudgeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch's input file is bounded in bytes (OpenAI takes 200 MB): what does not fit
    waits for the next batch, so a large spool never makes a file the provider refuses."""
    judge_server.responder = judge_responder()
    monkeypatch.setattr("otel_scorers.pipeline.batch.build.MAX_BATCH_BYTES", 4_000)
    monkeypatch.setenv("OTEL_SCORERS_BATCH_INTERVAL_S", "1")
    processor = batch_processor(make_processor, judge_server)
    for index in range(3):
        end_agent_span(telemetry, prompt=f"q{index}")
    assert processor.force_flush(30_000)
    wait_for(lambda: len(telemetry.evaluation_spans()) == 3, "every result, batch by batch")
    inputs = [judge_server.batches.files[b["input_file_id"]]
              for b in judge_server.batches.batches.values()]
    assert len(inputs) == 3 and all(len(data) <= 4_000 for data in inputs)
    assert sum(len(data.splitlines()) for data in inputs) == 3


def test_the_spool_reads_only_its_own_files() -> None:
    """An id from a batch record on disk (which anyone who can write the directory can
    change) never names a file outside the spool."""
    import tempfile

    from otel_scorers.judge.spool import Spool

    with tempfile.TemporaryDirectory() as root:
        spool = Spool(root, 1 << 20)
        (Path(root) / "secret.json").write_text('{"id": "x", "body": "not the spool\'s"}')
        assert spool.get("../secret") is None and spool.get("0" * 32) is None
        entry = {"id": "ab" * 16, "scorer": "rubric", "run": {}, "body": {},
                 "trace_id": "1" * 32, "span_id": "2" * 16, "attempts": 0}
        spool.add(entry)
        assert spool.get("ab" * 16) == entry
