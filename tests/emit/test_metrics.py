"""Metric cardinality stays bounded whatever the application sends."""

from __future__ import annotations

from typing import Any

from otel_scorers import RubricScorer
from otel_scorers.judge.client import JudgeClient
from otel_scorers.testing import ScriptedJudgeServer, judge_responder
from tests.support import Telemetry, end_agent_span


def test_agent_names_are_capped_with_an_overflow_value(
        telemetry: Telemetry, make_processor: Any, judge: JudgeClient,
        judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder()
    processor = make_processor([RubricScorer(judge, "- greets")], max_agents=10,
                               concurrency=32)
    for i in range(60):
        end_agent_span(telemetry, agent=f"agent-{i}", prompt=f"hello {i}")
    assert processor.force_flush(60_000)
    agents = {attrs["agent"] for attrs, _ in telemetry.metrics()["otel_scorers.evaluations"]}
    assert len(agents) == 11 and "_other" in agents
    assert telemetry.metric_value("otel_scorers.evaluations", agent="_other") == 50
    assert telemetry.metric_value("otel_scorers.metric.overflow", label="agent") == 50
    # the evaluation spans keep the real name: only metric labels are capped
    names = {s.attributes["otel_scorers.agent.name"] for s in telemetry.evaluation_spans()}
    assert len(names) == 60
