"""A judge checked before traffic arrives: ``check_judge`` (argument, variable) makes one
request per judge at start, off the application's thread, and logs a failure with its fix;
``serve --check-judge`` exits 2 on one and serves when the judge answers."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any

import pytest

from otel_scorers import PromptAlignmentScorer, RubricScorer
from otel_scorers.judge.client import JudgeClient
from otel_scorers.judge.retry import RetryPolicy
from otel_scorers.testing import ScriptedJudgeServer, fault, judge_responder
from tests.support import free_port

pytestmark = pytest.mark.timeout(180)


def test_the_processor_checks_its_judge_at_start_and_says_what_to_fix(
        make_processor: Any, judge_server: ScriptedJudgeServer,
        caplog: pytest.LogCaptureFixture) -> None:
    judge = JudgeClient(judge_server.model, api_base=judge_server.url, api_key="sk-bad-key-1",
                        retry=RetryPolicy(max_retries=0))
    judge_server.script(fault(401, message="Incorrect API key provided: sk-bad-key-1"))
    with caplog.at_level("INFO", logger="otel_scorers"):
        started = time.monotonic()
        processor = make_processor([RubricScorer(judge, "- greets"),
                                    PromptAlignmentScorer(judge)], check_judge=True)
        assert time.monotonic() - started < 5  # off the application's thread
        assert processor.judge_check is not None
        (result,) = processor.judge_check.result(60)  # one judge for both scorers
    assert not result.ok and result.error_type == "auth"
    lines = [r.getMessage() for r in caplog.records if "start check" in r.getMessage()]
    assert len(lines) == 1 and "OTEL_SCORERS_JUDGE_API_KEY" in lines[0], lines
    assert "sk-bad-key-1" not in lines[0]
    assert len(judge_server.requests) == 1  # before any run


def test_without_the_setting_nothing_is_asked(make_processor: Any,
                                              judge_server: ScriptedJudgeServer) -> None:
    judge = JudgeClient(judge_server.model, api_base=judge_server.url, api_key="k")
    processor = make_processor([RubricScorer(judge, "- greets")])
    assert processor.judge_check is None and not judge_server.requests


def _serve(judge_base: str, port: int) -> subprocess.Popen[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    env.update({"OTEL_SCORERS_JUDGE_MODEL": "openai/scripted-judge",
                "OTEL_SCORERS_JUDGE_API_BASE": judge_base, "OTEL_SCORERS_JUDGE_API_KEY": "k",
                "OTEL_SCORERS_JUDGE_TIMEOUT": "2", "OTEL_SCORERS_RUBRIC": "- greets"})
    return subprocess.Popen(
        [sys.executable, "-m", "otel_scorers", "serve", "--upstream", "http://127.0.0.1:9",
         "--port", str(port), "--grpc-port", "0", "--check-judge"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_serve_check_judge_exits_2_on_a_dead_judge_and_serves_with_a_live_one(
        judge_server: ScriptedJudgeServer) -> None:
    dead = _serve(f"http://127.0.0.1:{free_port()}/v1", free_port())
    out, _ = dead.communicate(timeout=120)
    assert dead.returncode == 2, out
    assert "start check of judge openai/scripted-judge" in out and "connection_error" in out
    assert "Traceback" not in out

    judge_server.responder = judge_responder()
    live = _serve(judge_server.url, free_port())
    try:
        assert live.stdout is not None
        deadline = time.monotonic() + 120
        seen = ""
        while "otel-scorers gateway on" not in seen and time.monotonic() < deadline:
            line = live.stdout.readline()
            if not line:
                break
            seen += line
        assert "judge check: 1 judge(s) answered" in seen, seen
        assert "otel-scorers gateway on" in seen, seen
    finally:
        live.terminate()
        live.wait(30)
