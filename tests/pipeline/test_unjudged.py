"""Runs left unjudged leave an example in their traces (issue 37.1: the alerts about them link
there): a selected run dropped because the queue was full, or skipped because the judge budget
is spent, gets an ``otel_scorers.unjudged <scorer>`` child span, at most one per scorer and
decision every ten seconds, so an overload does not multiply the export load it is part of.
On a live processor with the real SDK; the Jaeger round trip of the alerts' links is in
tests/collector_config/test_alert_links.py."""

from __future__ import annotations

import time
from typing import Any

from otel_scorers import RubricScorer
from otel_scorers.judge.client import JudgeClient
from otel_scorers.names import UNJUDGED_MARK_INTERVAL_S
from otel_scorers.pipeline import Sampling
from otel_scorers.testing import ScriptedJudgeServer, judge_responder
from tests.support import Telemetry, end_agent_span


def markers(telemetry: Telemetry) -> list[Any]:
    return [span for span in telemetry.spans() if span.name == "otel_scorers.unjudged rubric"]


def test_a_full_queue_marks_an_example_of_the_runs_it_dropped(
        telemetry: Telemetry, make_processor: Any, judge: JudgeClient,
        judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder(delay_s=0.5)
    processor = make_processor([RubricScorer(judge, "- x")], queue_size=1, concurrency=1,
                               cache_ttl_s=0)
    started = time.monotonic()
    runs = [end_agent_span(telemetry, prompt=f"q{index}", agent="support-bot")
            for index in range(20)]
    processor.force_flush(30_000)
    elapsed = time.monotonic() - started
    dropped = processor.stats()["rubric"].get("dropped", 0)
    assert dropped >= 10, processor.stats()
    marks = markers(telemetry)
    # sampled in time: one, or one more per ten seconds the burst lasted on a slow machine
    assert 1 <= len(marks) <= 1 + int(elapsed // UNJUDGED_MARK_INTERVAL_S), len(marks)
    (mark, *_) = marks
    judged = {span.parent.span_id for span in telemetry.evaluation_spans("rubric")
              if span.parent is not None}
    run = next(run for run in runs if run.context.span_id == mark.parent.span_id)
    assert run.context.span_id not in judged  # a run that was not judged
    assert mark.context.trace_id == run.context.trace_id
    assert dict(mark.attributes or {}) == {
        "otel_scorers.scorer": "rubric", "otel_scorers.decision": "dropped",
        "otel_scorers.decision.reason": "queue_full",
        "otel_scorers.evaluated.span_id": f"{run.context.span_id:016x}",
        "otel_scorers.evaluated.span_name": "invoke_agent",
        "gen_ai.agent.name": "support-bot"}


def test_a_spent_budget_marks_an_example_of_the_runs_it_skipped(
        telemetry: Telemetry, make_processor: Any, judge: JudgeClient,
        judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder()  # 150 tokens a call
    processor = make_processor([RubricScorer(judge, "- x")], concurrency=1, sampling=Sampling(
        budget_tokens_per_hour=300, pace_budget=False))
    started = time.monotonic()
    for index in range(6):
        end_agent_span(telemetry, prompt=f"q{index}")
        processor.force_flush(10_000)
    elapsed = time.monotonic() - started
    assert processor.stats()["rubric"] == {"selected": 6, "scored": 2, "budget_exhausted": 4}
    marks = markers(telemetry)
    assert 1 <= len(marks) <= 1 + int(elapsed // UNJUDGED_MARK_INTERVAL_S), len(marks)
    attributes = dict(marks[0].attributes or {})
    assert attributes["otel_scorers.decision"] == "budget_exhausted"
    assert "otel_scorers.decision.reason" not in attributes
    assert "gen_ai.evaluation.name" not in attributes  # never read as an evaluation


def test_no_marker_without_evaluation_spans(
        telemetry: Telemetry, make_processor: Any, judge: JudgeClient,
        judge_server: ScriptedJudgeServer) -> None:
    """``evaluation_spans: false`` writes no span of this library's, markers included."""
    judge_server.responder = judge_responder(delay_s=0.5)
    processor = make_processor([RubricScorer(judge, "- x")], queue_size=1, concurrency=1,
                               evaluation_spans=False)
    for index in range(6):
        end_agent_span(telemetry, prompt=f"q{index}")
    processor.force_flush(30_000)
    assert processor.stats()["rubric"].get("dropped", 0) >= 2
    assert markers(telemetry) == []
