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
from otel_scorers.testing import Answer, ScriptedJudgeServer, fault, judge_responder
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


def test_the_first_timeout_is_one_line_for_every_scorer_sharing_the_judge(
        telemetry: Telemetry, make_processor: Any, judge_server: ScriptedJudgeServer,
        caplog: pytest.LogCaptureFixture) -> None:
    """A hanging judge is said at its first timeout (not once timeouts pass a share of recent
    calls), once for the two scorers that share it."""
    from otel_scorers.testing import hang

    judge = JudgeClient(judge_server.model, api_base=judge_server.url, api_key="k",
                        retry=NO_RETRY, timeout_s=0.5)
    processor = make_processor([RubricScorer(judge, "- greets"), PromptAlignmentScorer(judge)])
    judge_server.responder = lambda _request: hang(5)
    with caplog.at_level("WARNING", logger="otel_scorers"):
        end_agent_span(telemetry, prompt="Anyone there?")
        assert processor.force_flush(30_000)
    said = [w for w in warnings_of(caplog) if "cannot judge (timeout)" in w]
    assert len(said) == 1, warnings_of(caplog)
    assert "OTEL_SCORERS_JUDGE_TIMEOUT" in said[0]
    scorers = processor.health()["scorers"]
    assert scorers["rubric"]["failures"] == {"timeout": 1}
    assert scorers["prompt_alignment"]["failures"] == {"timeout": 1}


@pytest.mark.parametrize(("mode", "advised"), [("json_object", "=json_schema"),
                                               ("json_schema", "=json_object")])
def test_unreadable_answers_are_told_the_other_structured_output_mode(
        mode: str, advised: str, telemetry: Telemetry, make_processor: Any,
        judge_server: ScriptedJudgeServer, caplog: pytest.LogCaptureFixture) -> None:
    judge = JudgeClient(judge_server.model, api_base=judge_server.url, api_key="k",
                        retry=NO_RETRY, structured_output=mode)  # type: ignore[arg-type]
    processor = make_processor([PromptAlignmentScorer(judge)])
    judge_server.responder = lambda _request: Answer(content="I think it is fine.")
    with caplog.at_level("WARNING", logger="otel_scorers"):
        end_agent_span(telemetry, prompt="Hi?")
        assert processor.force_flush(10_000)
    said = [w for w in warnings_of(caplog) if "cannot judge" in w]
    assert len(said) == 1, warnings_of(caplog)
    fix = said[0].split("To fix:")[1]
    assert f"in use: {mode}" in fix and f"OTEL_SCORERS_JUDGE_STRUCTURED_OUTPUT{advised}" in fix
