"""Enriched export: held spans go out with their scores, or unscored after a bound; none lost."""

from __future__ import annotations

import time
from typing import Any

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_scorers import RubricScorer
from otel_scorers.judge.client import JudgeClient
from otel_scorers.testing import ScriptedJudgeServer, hang, judge_responder
from tests.support import Telemetry, end_agent_span


def exported(out: InMemorySpanExporter, name: str) -> list[Any]:
    return [s for s in out.get_finished_spans() if s.name == name]


def test_scored_span_is_exported_with_its_scores(telemetry: Telemetry, make_processor: Any,
                                                 judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder(satisfied=lambda i, t: i == 2)
    out = InMemorySpanExporter()
    processor = make_processor(exporter=out)
    tracer = telemetry.tracer()
    with tracer.start_as_current_span("request"):
        end_agent_span(telemetry)
    assert processor.force_flush(10_000)
    agent = exported(out, "invoke_agent")
    assert len(agent) == 1
    attrs = agent[0].attributes
    assert attrs["otel_scorers.rubric.score"] == 0.0
    assert attrs["otel_scorers.rubric.label"] == "fail"
    assert attrs["otel_scorers.rubric.criterion.greets_the_user.satisfied"] is False
    assert attrs["otel_scorers.prompt_alignment.score"] == 1.0
    assert attrs["otel_scorers.prompt_alignment.label"] == "excellent"
    assert attrs["gen_ai.agent.name"] == "support-bot"  # the original attributes stay
    # every other span goes out too, unchanged: the parent and both evaluation spans
    names = sorted(s.name for s in out.get_finished_spans())
    assert names == ["gen_ai.evaluation prompt_alignment", "gen_ai.evaluation rubric",
                     "invoke_agent", "request"]
    assert len(telemetry.spans_out.get_finished_spans()) == 0  # nothing bypassed the owner


def test_hold_timeout_exports_unscored(telemetry: Telemetry, make_processor: Any,
                                       judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = lambda request: hang(5)
    out = InMemorySpanExporter()
    scorer = RubricScorer(JudgeClient(judge_server.model, api_base=judge_server.url, api_key="k",
                                      timeout_s=5), "- x")
    processor = make_processor([scorer], exporter=out, hold_timeout_s=0.3, shutdown_timeout_s=0.5)
    end_agent_span(telemetry)
    deadline = time.monotonic() + 5
    while not exported(out, "invoke_agent") and time.monotonic() < deadline:
        time.sleep(0.05)
    span = exported(out, "invoke_agent")
    assert len(span) == 1
    assert not any(k.startswith("otel_scorers.") for k in span[0].attributes)
    assert telemetry.metric_value("otel_scorers.enriched.unscored", reason="hold_timeout") == 1
    processor.shutdown()
    assert len(exported(out, "invoke_agent")) == 1  # not exported twice


def test_overflow_exports_unscored_at_once(telemetry: Telemetry, make_processor: Any,
                                           judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder(delay_s=0.3)
    out = InMemorySpanExporter()
    processor = make_processor(exporter=out, max_held=1, cache_ttl_s=0)
    for index in range(3):
        end_agent_span(telemetry, prompt=f"q{index}")
    processor.force_flush(10_000)
    agents = exported(out, "invoke_agent")
    assert len(agents) == 3
    scored = [s for s in agents if "otel_scorers.rubric.score" in s.attributes]
    assert len(scored) == 1
    assert telemetry.metric_value("otel_scorers.enriched.unscored", reason="hold_overflow") == 2
    assert len(telemetry.evaluation_spans()) == 0  # evaluation spans went to the owned exporter
    assert len(exported(out, "gen_ai.evaluation rubric")) == 3  # all three were still scored


def test_shutdown_exports_everything_held(telemetry: Telemetry, make_processor: Any,
                                          judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = lambda request: hang(30)
    out = InMemorySpanExporter()
    scorer = RubricScorer(JudgeClient(judge_server.model, api_base=judge_server.url, api_key="k",
                                      timeout_s=30), "- x")
    processor = make_processor([scorer], exporter=out, hold_timeout_s=60, shutdown_timeout_s=0.3)
    for index in range(3):
        end_agent_span(telemetry, prompt=f"q{index}")
    processor.shutdown()
    assert len(exported(out, "invoke_agent")) == 3
    assert processor.stats()["rubric"] == {"selected": 3, "dropped": 3}


def test_queue_full_exports_immediately(telemetry: Telemetry, make_processor: Any,
                                        judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder(delay_s=0.5)
    out = InMemorySpanExporter()
    processor = make_processor(exporter=out, queue_size=1, concurrency=1, cache_ttl_s=0)
    for index in range(4):
        end_agent_span(telemetry, prompt=f"q{index}")
    processor.force_flush(20_000)
    assert len(exported(out, "invoke_agent")) == 4
    assert telemetry.metric_value("otel_scorers.held.spans") == 0
