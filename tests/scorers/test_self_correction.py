from __future__ import annotations

import pytest

from otel_scorers import (
    ConfigError,
    PromptAlignmentScorer,
    RubricScorer,
    aself_correct,
    is_task_complete,
    self_correct,
)
from otel_scorers.judge.client import JudgeClient
from otel_scorers.scorers.result import ScoreError, ScoreResult
from otel_scorers.testing import ScriptedJudgeServer, alignment_answer, rubric_answer


class RecordingAgent:
    """An agent that answers from a list and records the chat it was shown."""

    def __init__(self, *replies: str) -> None:
        self.replies = list(replies)
        self.seen: list[list[dict[str, str]]] = []

    def __call__(self, messages: list[dict[str, str]]) -> str:
        self.seen.append(messages)
        return self.replies.pop(0)


def test_loop_feeds_reasons_back_until_complete(judge_server: ScriptedJudgeServer,
                                                judge: JudgeClient) -> None:
    scorer = RubricScorer(judge, "- includes an analysis section\n- includes recommendations")
    judge_server.script(rubric_answer([True, False], reasoning=["ok", "No recommendations."]),
                        rubric_answer([True, True]))
    agent = RecordingAgent("Analysis only.", "Analysis. Recommendations: do X.")
    result = self_correct(agent, "Research AI in education", scorers=[scorer], max_steps=5)
    assert result.complete and len(result.steps) == 2
    assert result.output == "Analysis. Recommendations: do X."
    feedback = agent.seen[1][-1]
    assert feedback["role"] == "user"
    assert "[FAIL] [required] includes recommendations — No recommendations." in (
        feedback["content"])
    assert agent.seen[1][-2] == {"role": "assistant", "content": "Analysis only."}
    assert [s.complete for s in result.steps] == [False, True]


def test_loop_stops_at_max_steps(judge_server: ScriptedJudgeServer, judge: JudgeClient) -> None:
    judge_server.script(*[rubric_answer([False])] * 3)
    agent = RecordingAgent("a", "b", "c", "never asked")
    result = self_correct(agent, "task", scorers=[RubricScorer(judge, "- x")], max_steps=3)
    assert not result.complete and len(result.steps) == 3 and result.output == "c"
    assert agent.replies == ["never asked"]


def test_strategy_any_and_all(judge_server: ScriptedJudgeServer, judge: JudgeClient) -> None:
    rubric = RubricScorer(judge, "- x")
    alignment = PromptAlignmentScorer(judge, evaluation_mode="user")
    judge_server.responder = lambda request: _answer_for(request.text)
    any_result = self_correct(RecordingAgent("one"), "task", scorers=[rubric, alignment],
                              strategy="any", max_steps=1)
    assert any_result.complete  # the rubric passed; alignment 0.9 is below its maximum
    all_result = self_correct(RecordingAgent("one"), "task", scorers=[rubric, alignment],
                              strategy="all", max_steps=1)
    assert not all_result.complete


def _answer_for(text: str):  # type: ignore[no-untyped-def]
    from otel_scorers.testing import reply
    if "rubric criteria" in text:
        return reply(rubric_answer([True]))
    return reply(alignment_answer(user=[0.9, 0.9, 0.9, 0.9]))


async def test_async_agent(judge_server: ScriptedJudgeServer, judge: JudgeClient) -> None:
    judge_server.script(rubric_answer([True]))

    async def agent(messages: list[dict[str, str]]) -> str:
        return "done"

    result = await aself_correct(agent, "task", scorers=[RubricScorer(judge, "- x")],
                                 system="be brief")
    assert result.complete and result.messages[0] == {"role": "system", "content": "be brief"}


def test_errors_never_complete() -> None:
    error = ScoreResult(run_id="r", scorer="s", error=ScoreError(type="timeout", message="slow"))
    ok = ScoreResult(run_id="r", scorer="s", score=1.0)
    assert not is_task_complete([error])
    assert not is_task_complete([ok, error], "all")
    assert is_task_complete([ok, error], "any")
    assert not is_task_complete([])


def test_bad_arguments() -> None:
    with pytest.raises(ConfigError):
        is_task_complete([], "most")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        self_correct(RecordingAgent("x"), "t", scorers=[], max_steps=1)


def test_a_rubric_per_run_from_the_request_context(judge_server: ScriptedJudgeServer,
                                                   judge: JudgeClient) -> None:
    scorer = RubricScorer(judge)  # no criteria: the run brings its rubric, as in Mastra
    judge_server.script(rubric_answer([True, True]))
    result = self_correct(RecordingAgent("def find_duplicates(xs): ..."),
                          "Write find_duplicates", scorers=[scorer],
                          request_context={"rubric": "- All tests pass\n- The function is named "
                                                     "find_duplicates"})
    assert result.complete and len(result.steps) == 1
    assert "c2: The function is named find_duplicates" in judge_server.requests[0].text


def test_a_rubric_scorer_without_a_rubric_is_an_error_not_complete(
        judge_server: ScriptedJudgeServer, judge: JudgeClient) -> None:
    from otel_scorers import ScorerInputError

    with pytest.raises(ScorerInputError, match="needs criteria, or a rubric in request_context"):
        self_correct(RecordingAgent("anything"), "Do it", scorers=[RubricScorer(judge)])
    assert judge_server.requests == []


def test_sequential_scoring_and_a_round_timeout(judge_server: ScriptedJudgeServer,
                                                judge: JudgeClient) -> None:
    from otel_scorers.testing import hang

    rubric = RubricScorer(judge, "- answers")
    judge_server.script(hang(5), rubric_answer([True]))
    result = self_correct(RecordingAgent("first", "second"), "Do it", scorers=[rubric],
                          parallel=False, timeout=1.0, max_steps=2)
    first, second = result.steps
    assert not first.complete and first.results[0].error is not None
    assert first.results[0].error.type == "timeout"
    assert second.complete and result.complete
    with pytest.raises(ConfigError, match="timeout"):
        self_correct(RecordingAgent("x"), "Do it", scorers=[rubric], timeout=0)
