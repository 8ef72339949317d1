"""Never silent: the first judge failure of each kind is one log line with the fix and what
was tried, then only counted; recovery is said once; ``health()`` shows every scorer's
decisions with reasons, judge usage and its last error; ``force_flush`` is True only when every
run has its decision."""

from __future__ import annotations

from typing import Any

import pytest

from otel_scorers import PromptAlignmentScorer, RubricScorer
from otel_scorers.judge.client import JudgeClient
from otel_scorers.judge.retry import RetryPolicy
from otel_scorers.testing import ScriptedJudgeServer, fault, judge_responder
from tests.support import Telemetry, end_agent_span

NO_RETRY = RetryPolicy(max_retries=0)


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelname in ("WARNING", "ERROR")]


def test_a_rejected_key_is_one_error_line_naming_the_variable_then_only_counted(
        telemetry: Telemetry, make_processor: Any, judge_server: ScriptedJudgeServer,
        caplog: pytest.LogCaptureFixture) -> None:
    judge = JudgeClient(judge_server.model, api_base=judge_server.url, api_key="sk-wrong-123456",
                        retry=NO_RETRY)
    processor = make_processor([RubricScorer(judge, "- greets")])
    judge_server.script(*[fault(401, message="Incorrect API key provided: sk-wrong-123456")] * 3)
    with caplog.at_level("WARNING", logger="otel_scorers"):
        for index in range(3):
            end_agent_span(telemetry, prompt=f"Hello {index}?")
        assert processor.force_flush(10_000)
    said = [w for w in warnings_of(caplog) if "cannot judge" in w]
    assert len(said) == 1, warnings_of(caplog)
    assert "(auth)" in said[0] and "OTEL_SCORERS_JUDGE_API_KEY" in said[0]
    assert judge_server.url.split("/v1")[0] in said[0]  # what was tried
    assert "sk-wrong-123456" not in said[0]  # never the key
    assert not [w for w in warnings_of(caplog) if "no price" in w]  # a failed call is no price
    health = processor.health()["scorers"]["rubric"]
    assert health["decisions"] == {"selected": 3, "error": {"auth": 3}}
    assert health["failures"] == {"auth": 3}
    assert health["last_error"]["type"] == "auth" and health["last_error"]["at"] > 0
    assert "sk-wrong-123456" not in str(health)


def test_recovery_is_said_once(telemetry: Telemetry, make_processor: Any,
                               judge_server: ScriptedJudgeServer,
                               caplog: pytest.LogCaptureFixture) -> None:
    judge = JudgeClient(judge_server.model, api_base=judge_server.url, api_key="k",
                        retry=NO_RETRY)
    processor = make_processor([PromptAlignmentScorer(judge)])
    judge_server.script(fault(503), fault(503))
    with caplog.at_level("WARNING", logger="otel_scorers"):
        for index in range(2):
            end_agent_span(telemetry, prompt=f"Down {index}?")
        assert processor.force_flush(10_000)
        judge_server.responder = judge_responder()
        for index in range(2):
            end_agent_span(telemetry, prompt=f"Up {index}?")
        assert processor.force_flush(10_000)
    lines = warnings_of(caplog)
    assert len([w for w in lines if "cannot judge (server_error)" in w]) == 1, lines
    assert len([w for w in lines if "judges again" in w]) == 1, lines
    health = processor.health()["scorers"]["prompt_alignment"]
    assert health["decisions"] == {"selected": 4, "error": {"server_error": 2}, "scored": 2}
    assert health["judge"]["calls"] == 4 and health["judge"]["tokens"] > 0


def test_a_missing_rubric_is_said_once_with_the_fix(
        telemetry: Telemetry, make_processor: Any, judge: JudgeClient,
        judge_server: ScriptedJudgeServer, caplog: pytest.LogCaptureFixture) -> None:
    processor = make_processor([RubricScorer(judge)])
    with caplog.at_level("WARNING", logger="otel_scorers"):
        for index in range(2):
            end_agent_span(telemetry, prompt=f"Q {index}?")
        assert processor.force_flush(10_000)
    said = [w for w in warnings_of(caplog) if "no rubric" in w]
    assert len(said) == 1 and "OTEL_SCORERS_RUBRIC" in said[0] and "'support-bot'" in said[0]
    assert processor.health()["scorers"]["rubric"]["decisions"] == {
        "selected": 2, "filtered": {"no_rubric": 2}}
    assert judge_server.requests == []


def test_force_flush_is_false_while_runs_are_undecided(
        telemetry: Telemetry, make_processor: Any, judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder(delay_s=2.0)
    processor = make_processor()
    end_agent_span(telemetry)
    assert processor.force_flush(200) is False  # the judge takes 2 s
    assert processor.health()["pending"] >= 1
    assert processor.force_flush(20_000) is True
    assert processor.health()["pending"] == 0
