"""Fused judge calls: one call for the scorers that judge a run with the same judge, the same
results as separate calls, and a broken half failing only its own scorer."""

from __future__ import annotations

import json
from typing import Any

from otel_scorers import PromptAlignmentScorer, RubricScorer
from otel_scorers.judge.client import JudgeClient
from otel_scorers.names import Decision
from otel_scorers.testing import (
    RecordedRequest,
    ScriptedJudgeServer,
    fault,
    judge_responder,
    reply,
)
from otel_scorers.testing.answers import rubric_answer
from tests.support import Telemetry, end_agent_span

ATTR = "gen_ai.evaluation.score.value"


def _results(telemetry: Telemetry) -> dict[str, Any]:
    out = {}
    for scorer in ("rubric", "prompt_alignment"):
        spans = telemetry.evaluation_spans(scorer)
        assert len(spans) == 1, scorer
        out[scorer] = dict(spans[0].attributes or {})
    return out


def _judge(telemetry: Telemetry, make_processor: Any, server: ScriptedJudgeServer,
           judge: JudgeClient, *, again: bool = False, **options: Any) -> dict[str, Any]:
    """One run judged by both scorers; ``again``: a second processor on the same provider
    (the exporter is installed once)."""
    server.reset()
    processor = make_processor([RubricScorer(judge, "- greets the user\n- is polite"),
                                PromptAlignmentScorer(judge)], cache_ttl_s=0,
                               install=not again, **options)
    if again:
        telemetry.tracer_provider.add_span_processor(processor)
    end_agent_span(telemetry)
    assert processor.force_flush(20_000)
    processor.shutdown()
    return _results(telemetry)


def test_one_call_for_both_scorers_and_the_same_results(
        telemetry: Telemetry, make_processor: Any, judge_server: ScriptedJudgeServer,
        judge: JudgeClient) -> None:
    judge_server.responder = judge_responder(
        satisfied=lambda index, _text: index == 1, user=(1.0, 0.5, 0.8, 0.3),
        prompt_tokens=301, completion_tokens=99)
    apart = _judge(telemetry, make_processor, judge_server, judge)
    assert len(judge_server.requests) == 2
    telemetry.spans_out.clear()
    together = _judge(telemetry, make_processor, judge_server, judge, again=True,
                      fuse_judge_calls=True)
    assert len(judge_server.requests) == 1  # one call answered both scorers
    request = judge_server.requests[0]
    system = request.messages[0]["content"]
    assert 'PART 1 (answer under "part1")' in system and "PART 2" in system
    assert request.body["response_format"]["type"] in ("json_schema", "json_object")
    for scorer in apart:
        assert together[scorer][ATTR] == apart[scorer][ATTR], scorer
        assert (together[scorer]["gen_ai.evaluation.score.label"]
                == apart[scorer]["gen_ai.evaluation.score.label"])
    # the call is counted once; the tokens are shared and add up to the call's
    calls = [together[s]["otel_scorers.judge.calls"] for s in ("rubric", "prompt_alignment")]
    assert sorted(calls) == [0, 1]
    assert sum(together[s]["otel_scorers.judge.input_tokens"] for s in together) == 301
    assert sum(together[s]["otel_scorers.judge.output_tokens"] for s in together) == 99
    # the user message shows each field once (the agent response is shared)
    user = request.messages[-1]["content"]
    assert user.count("BEGIN agent response") == 1


def test_a_broken_half_fails_only_its_scorer(
        telemetry: Telemetry, make_processor: Any, judge_server: ScriptedJudgeServer,
        judge: JudgeClient) -> None:
    def respond(request: RecordedRequest) -> Any:
        # a valid rubric part; the alignment part is nonsense, on the re-ask too
        return reply({"part1": rubric_answer([True, True]), "part2": {"score": "high"}})

    judge_server.responder = respond
    results = _judge(telemetry, make_processor, judge_server, judge, fuse_judge_calls=True)
    assert len(judge_server.requests) == 2  # the call and its one corrective re-ask
    assert results["rubric"][ATTR] == 1.0
    assert "error.type" not in results["rubric"]
    assert ATTR not in results["prompt_alignment"]
    assert results["prompt_alignment"]["error.type"] == "invalid_output"


def test_a_failed_call_fails_both(telemetry: Telemetry, make_processor: Any,
                                  judge_server: ScriptedJudgeServer, judge: JudgeClient) -> None:
    judge_server.responder = lambda request: fault(400, message="bad request")
    results = _judge(telemetry, make_processor, judge_server, judge, fuse_judge_calls=True)
    assert len(judge_server.requests) == 1
    for scorer in results:
        assert ATTR not in results[scorer]
        assert results[scorer]["error.type"]


def test_a_scorer_that_does_not_ask_leaves_the_other_alone(
        telemetry: Telemetry, make_processor: Any, judge_server: ScriptedJudgeServer,
        judge: JudgeClient) -> None:
    """A rubric scorer without criteria skips: the alignment scorer's call goes out alone, at
    once, in its usual form."""
    judge_server.responder = judge_responder()
    processor = make_processor([RubricScorer(judge), PromptAlignmentScorer(judge)],
                               cache_ttl_s=0, fuse_judge_calls=True)
    end_agent_span(telemetry)
    assert processor.force_flush(20_000)
    assert len(judge_server.requests) == 1
    assert "PART 1" not in judge_server.requests[0].messages[0]["content"]
    assert processor.stats()["prompt_alignment"][Decision.SCORED] == 1


def test_different_judges_are_never_fused(
        telemetry: Telemetry, make_processor: Any, judge_server: ScriptedJudgeServer,
        judge: JudgeClient) -> None:
    judge_server.responder = judge_responder()
    other = JudgeClient(judge_server.model, api_base=judge_server.url, api_key="test-key",
                        temperature=0.5)
    processor = make_processor([RubricScorer(judge, "- is polite"), PromptAlignmentScorer(other)],
                               cache_ttl_s=0, fuse_judge_calls=True)
    end_agent_span(telemetry)
    assert processor.force_flush(20_000)
    assert len(judge_server.requests) == 2
    assert all("PART 1" not in r.messages[0]["content"] for r in judge_server.requests)


def test_user_mode_is_told_to_leave_the_agent_instructions_out(
        telemetry: Telemetry, make_processor: Any, judge_server: ScriptedJudgeServer,
        judge: JudgeClient) -> None:
    judge_server.responder = judge_responder()
    processor = make_processor([RubricScorer(judge, "- is polite"),
                                PromptAlignmentScorer(judge, evaluation_mode="user")],
                               cache_ttl_s=0, fuse_judge_calls=True)
    end_agent_span(telemetry, system="Answer in French.")
    assert processor.force_flush(20_000)
    assert len(judge_server.requests) == 1
    system = judge_server.requests[0].messages[0]["content"]
    part2 = system.split('PART 2 (answer under "part2")', 1)[1]
    assert "This part uses only these fields: user request, agent response" in part2
    assert "This part uses only" not in system.split("PART 2", 1)[0]
    assert processor.stats()["prompt_alignment"][Decision.SCORED] == 1
    json.dumps(processor.stats())


def test_identical_runs_judged_together_join_one_call_without_waiting_on_each_other(
        judge_server: ScriptedJudgeServer, judge: JudgeClient, telemetry: Telemetry,
        make_processor: Any) -> None:
    """Two identical runs at once, each with two scorers sharing a judge, with fused calls:
    the first run's scorers make one fused call, the second run's join it (single flight)
    instead of asking; whoever joins is decided before anything is asked, so neither run can
    wait on the other until its evaluation times out."""
    judge_server.responder = judge_responder(delay_s=0.3)
    processor = make_processor([RubricScorer(judge, "- is polite"), PromptAlignmentScorer(judge)],
                               fuse_judge_calls=True, evaluation_timeout_s=20)
    for _ in range(2):
        end_agent_span(telemetry, prompt="Say hi", answer="hi")
    assert processor.force_flush(20_000)
    stats = processor.stats()
    assert stats["rubric"]["scored"] + stats["rubric"]["cached"] == 2
    assert stats["prompt_alignment"]["scored"] + stats["prompt_alignment"]["cached"] == 2
    assert len(judge_server.requests) == 1  # one fused call for both runs
    assert "PART 1" in judge_server.requests[0].messages[0]["content"]
