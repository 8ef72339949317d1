"""isolation: process: judging in a child process, the scores still emitted by the
application's own providers; a scorer the child cannot rebuild judges here; a dead child is a
counted error and the next run gets a new one."""

from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from otel_scorers import PromptAlignmentScorer, RubricScorer
from otel_scorers.judge.client import JudgeClient
from otel_scorers.pipeline.isolated import _child_environment
from otel_scorers.scorers.base import BaseScorer
from otel_scorers.scorers.result import ScoreResult
from otel_scorers.scorers.run import ScorerRun
from otel_scorers.testing import ScriptedJudgeServer, hang, judge_responder
from tests.support import Telemetry, end_agent_span

ATTR = "gen_ai.evaluation.score.value"


def _scores(telemetry: Telemetry) -> dict[str, Any]:
    return {span.name.split()[-1]: dict(span.attributes or {})
            for span in telemetry.evaluation_spans()}


def test_judged_in_a_child_process_with_the_same_results(
        telemetry: Telemetry, make_processor: Any, judge_server: ScriptedJudgeServer,
        judge: JudgeClient) -> None:
    judge_server.responder = judge_responder(satisfied=False, user=(1.0, 0.5, 0.5, 0.5))
    processor = make_processor(isolation="process", cache_ttl_s=0)
    end_agent_span(telemetry)
    assert processor.force_flush(30_000)
    isolated = processor._parts.evaluation.asker.isolated
    assert isolated is not None and isolated._process is not None
    assert isolated._process.pid != os.getpid()  # the child made the judge calls
    assert len(judge_server.requests) == 2
    scores = _scores(telemetry)
    assert scores["rubric"][ATTR] == 0.0
    assert scores["rubric"]["otel_scorers.judge.calls"] == 1
    assert 0.0 < scores["prompt_alignment"][ATTR] < 1.0
    assert processor.stats()["rubric"]["scored"] == 1
    processor.shutdown()
    assert isolated._process.returncode is not None  # shutdown ended the child


class _LocalScorer(BaseScorer):
    """Importable by the child (a module-level class): judged there."""

    name = "local_scorer"

    async def score(self, run: ScorerRun) -> ScoreResult:
        return ScoreResult(run_id=run.run_id, scorer=self.name, score=float(os.getpid()),
                           reason="the pid of the judging process")


def test_a_scorer_the_child_cannot_rebuild_judges_here(
        telemetry: Telemetry, make_processor: Any, caplog: pytest.LogCaptureFixture) -> None:
    class Unpicklable(BaseScorer):  # a local class cannot be pickled
        name = "unpicklable"

        async def score(self, run: ScorerRun) -> ScoreResult:
            return ScoreResult(run_id=run.run_id, scorer=self.name, score=float(os.getpid()))

    with caplog.at_level(logging.WARNING, logger="otel_scorers"):
        processor = make_processor([Unpicklable(), _LocalScorer()], isolation="process")
    assert "unpicklable cannot be sent to the judging process" in caplog.text
    end_agent_span(telemetry)
    assert processor.force_flush(30_000)
    scores = _scores(telemetry)
    assert scores["unpicklable"][ATTR] == float(os.getpid())
    assert scores["local_scorer"][ATTR] != float(os.getpid())
    processor.shutdown()


def test_a_dead_child_is_an_error_and_the_next_run_gets_a_new_one(
        telemetry: Telemetry, make_processor: Any, judge_server: ScriptedJudgeServer,
        judge: JudgeClient) -> None:
    judge_server.responder = lambda request: hang(60)
    processor = make_processor([RubricScorer(judge, "- is polite")], isolation="process",
                               cache_ttl_s=0)
    end_agent_span(telemetry, prompt="first")
    isolated = processor._parts.evaluation.asker.isolated
    assert isolated is not None
    deadline = time.monotonic() + 30
    while not judge_server.requests and time.monotonic() < deadline:
        time.sleep(0.05)
    assert judge_server.requests  # the child is waiting for its judge
    first = isolated._process
    assert first is not None
    os.kill(first.pid, signal.SIGKILL)
    assert processor.force_flush(30_000)
    assert processor.stats()["rubric"]["error"] == 1
    assert _scores(telemetry)["rubric"]["error.type"] == "connection_error"
    judge_server.responder = judge_responder()
    end_agent_span(telemetry, prompt="second")
    assert processor.force_flush(30_000)
    assert processor.stats()["rubric"]["scored"] == 1
    assert isolated._process is not None and isolated._process.pid != first.pid
    processor.shutdown()


class _RaisingScorer(BaseScorer):
    """Importable by the child: raises there, as a buggy custom scorer would."""

    name = "raising"

    async def score(self, run: ScorerRun) -> ScoreResult:
        raise ValueError("a bug in a custom scorer")


def test_a_scorer_raising_in_the_child_fails_at_once_not_as_a_timeout(
        telemetry: Telemetry, make_processor: Any, caplog: pytest.LogCaptureFixture) -> None:
    processor = make_processor([_RaisingScorer()], isolation="process",
                               evaluation_timeout_s=120)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="otel_scorers"):
        end_agent_span(telemetry)
        assert processor.force_flush(60_000)
    assert time.monotonic() - started < 60  # not the 120 s evaluation timeout
    assert processor.stats()["raising"] == {"selected": 1, "error": 1}, processor.stats()
    assert processor.health()["scorers"]["raising"]["decisions"]["error"] == {"internal_error": 1}
    assert "scorer raising failed unexpectedly" in caplog.text
    processor.shutdown()


def test_a_hung_child_is_replaced(telemetry: Telemetry, make_processor: Any,
                                  judge_server: ScriptedJudgeServer, judge: JudgeClient,
                                  caplog: pytest.LogCaptureFixture) -> None:
    judge_server.responder = judge_responder()
    processor = make_processor([RubricScorer(judge, "- is polite")], isolation="process",
                               cache_ttl_s=0, evaluation_timeout_s=4)
    end_agent_span(telemetry, prompt="first")
    assert processor.force_flush(60_000)
    isolated = processor._parts.evaluation.asker.isolated
    assert isolated is not None and isolated._process is not None
    stopped = isolated._process
    os.kill(stopped.pid, signal.SIGSTOP)  # alive, but never answers again
    try:
        with caplog.at_level(logging.WARNING, logger="otel_scorers"):
            end_agent_span(telemetry, prompt="second")
            assert processor.force_flush(60_000)
            deadline = time.monotonic() + 30
            while stopped.returncode is None and time.monotonic() < deadline:
                time.sleep(0.1)  # the ping after the timeout gets no answer: killed
        assert stopped.returncode is not None
        assert "stopped answering; it is replaced" in caplog.text
        end_agent_span(telemetry, prompt="third")
        assert processor.force_flush(60_000)
        assert processor.stats()["rubric"] == {"selected": 3, "scored": 2, "error": 1}
        assert isolated._process is not None and isolated._process.pid != stopped.pid
    finally:
        if stopped.returncode is None:
            os.kill(stopped.pid, signal.SIGKILL)
    processor.shutdown()


APP = """
import sys, time
from opentelemetry.sdk.trace import TracerProvider
from otel_scorers import RubricScorer, ScoringSpanProcessor
from otel_scorers.judge.client import JudgeClient
from tests.support import genai_attributes

provider = TracerProvider()
judge = JudgeClient("openai/x", api_base=sys.argv[1], api_key="k")
processor = ScoringSpanProcessor([RubricScorer(judge, "- is polite")], isolation="process",
                                 tracer_provider=provider)
provider.add_span_processor(processor)
with provider.get_tracer("app").start_as_current_span("invoke_agent",
                                                       attributes=genai_attributes()):
    pass
while processor._parts.evaluation.asker.isolated._process is None:
    time.sleep(0.05)
print(processor._parts.evaluation.asker.isolated._process.pid, flush=True)
time.sleep(600)
"""


def test_the_child_dies_with_an_application_killed_with_sigkill(
        judge_server: ScriptedJudgeServer) -> None:
    import subprocess
    import sys

    judge_server.responder = lambda request: hang(120)  # the child is busy judging
    root = Path(__file__).resolve().parents[2]
    app = subprocess.Popen([sys.executable, "-c", APP, judge_server.url], cwd=root,
                           stdout=subprocess.PIPE, text=True)
    try:
        assert app.stdout is not None
        child = int(app.stdout.readline())
        deadline = time.monotonic() + 60
        while not judge_server.requests and time.monotonic() < deadline:
            time.sleep(0.05)
        assert judge_server.requests  # the child is in the middle of a judge call
        app.kill()
        app.wait(10)
        deadline = time.monotonic() + 10
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child), "the judging process outlived the application"
    finally:
        if app.poll() is None:
            app.kill()


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return status.split(")")[-1].split()[0] != "Z"  # a zombie is gone, only not reaped


def test_the_child_neither_scores_nor_instruments_itself(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SCORERS_ENABLED", "true")
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        ["/app/src", "/venv/lib/site-packages/opentelemetry/instrumentation/auto_instrumentation"]))
    env = _child_environment()
    assert "OTEL_SCORERS_ENABLED" not in env and "OTEL_TRACES_EXPORTER" not in env
    assert env["OTEL_SDK_DISABLED"] == "true"
    assert env["PYTHONPATH"] == "/app/src"


def test_alignment_scorer_pickles_with_its_judge(judge: JudgeClient) -> None:
    import pickle

    for scorer in (RubricScorer(judge, "- is polite"), PromptAlignmentScorer(judge)):
        again = pickle.loads(pickle.dumps(scorer))
        assert again.judge.fingerprint == scorer.judge.fingerprint
