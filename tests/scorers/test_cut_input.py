"""No false verdict from cut input (issue 36.4): a field cut to fit the judge is said on the
result (attribute, metric label); a faithfulness claim the judge could not find in a cut
context is left out of the score, never counted unsupported; a response far larger than
what the judge is shown is a counted ``input_too_large`` decision with its fix, never a score.
Against the scripted judge over real HTTP."""

from __future__ import annotations

from typing import Any

import pytest

from otel_scorers import FaithfulnessScorer, RubricScorer
from otel_scorers.judge.client import JudgeClient
from otel_scorers.scorers.run import ScorerRun
from otel_scorers.testing import ScriptedJudgeServer, judge_responder, reply
from otel_scorers.testing.answers import faithfulness_answer
from tests.support import Telemetry, genai_attributes

LIMIT = 12_000  # the judge's max_field_chars (JudgeClient's default)


def run_of(response: str, context: list[str] | None = None) -> ScorerRun:
    return ScorerRun.coerce({"input": [{"role": "user", "content": "What is the refund rule?"}],
                             "output": response,
                             **({"request_context": {"context": context}} if context else {})})


def test_a_cut_response_is_said_on_the_result(judge: JudgeClient,
                                              judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder()
    long = RubricScorer(judge, "- is polite").run(run_of("Thanks! " * 2_500))  # 20,000 chars
    assert long.score is not None and long.judge is not None
    assert long.judge.truncated == ("agent response",)
    short = RubricScorer(judge, "- is polite").run(run_of("Thanks!"))
    assert short.judge is not None and short.judge.truncated == ()


def test_a_response_ten_times_what_the_judge_sees_is_not_judged(
        judge: JudgeClient, judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder()
    result = RubricScorer(judge, "- is polite").run(run_of("x" * (10 * LIMIT + 1)))
    assert result.score is None and result.skipped == "input_too_large"
    assert "120,001 characters" in result.reason
    assert judge_server.requests == []  # no judge call for a verdict it could not make


def test_a_claim_not_found_in_a_cut_context_is_never_unsupported(
        judge: JudgeClient, judge_server: ScriptedJudgeServer) -> None:
    scorer = FaithfulnessScorer(judge)
    judge_server.responder = lambda request: reply(faithfulness_answer(
        [("Refunds take 14 days.", "yes"), ("Refunds need a receipt.", "unsure")]))
    short = scorer.run(run_of("Refunds take 14 days and need a receipt.",
                              ["Refunds take 14 days."]))
    assert short.score == 0.5  # the whole context was shown: unsure is unsupported (Mastra)
    cut = scorer.run(run_of("Refunds take 14 days and need a receipt.",
                            ["Refunds take 14 days. " + "Policy text. " * 3_000]))
    assert cut.score == 1.0 and cut.passed is True  # the unsure claim is left out
    assert "not counted against the answer" in cut.reason
    judge_server.responder = lambda request: reply(faithfulness_answer(
        [("Refunds need a receipt.", "unsure")]))
    nothing = scorer.run(run_of("Refunds need a receipt.",
                                ["Intro. " + "Policy text. " * 3_000]))
    assert nothing.score is None and nothing.skipped == "context_truncated"
    # a contradiction in the part shown still counts
    judge_server.responder = lambda request: reply(faithfulness_answer(
        [("Refunds take 3 days.", "no"), ("Refunds need a receipt.", "unsure")]))
    wrong = scorer.run(run_of("Refunds take 3 days and need a receipt.",
                              ["Refunds take 14 days. " + "Policy text. " * 3_000]))
    assert wrong.score == 0.0 and wrong.passed is False


def test_live_cut_input_is_labelled_and_too_large_is_a_counted_decision(
        telemetry: Telemetry, judge: JudgeClient, judge_server: ScriptedJudgeServer,
        make_processor: Any, caplog: pytest.LogCaptureFixture) -> None:
    judge_server.responder = judge_responder()
    processor = make_processor([RubricScorer(judge, "- is polite")])
    tracer = telemetry.tracer()
    with caplog.at_level("WARNING", logger="otel_scorers"):
        for answer in ("Thanks! " * 2_500, "y" * (10 * LIMIT + 1), "y " * (5 * LIMIT + 1)):
            with tracer.start_as_current_span("invoke_agent", attributes=genai_attributes(
                    prompt="Be polite?", answer=answer)):
                pass
        assert processor.force_flush(20_000)
    spans = telemetry.evaluation_spans()
    assert len(spans) == 1
    assert spans[0].attributes["otel_scorers.input.truncated"] == ("agent response",)
    assert telemetry.metric_value("otel_scorers.evaluations", scorer="rubric",
                                  truncated="true") == 1
    assert processor.counts.count("filtered", "input_too_large") == 2
    said = [r.getMessage() for r in caplog.records if "input_too_large" in r.getMessage()]
    assert len(said) == 1 and "max_field_chars" in said[0]
