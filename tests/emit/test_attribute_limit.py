"""A large rubric never costs the evaluation span its score (issue 25, item 4): the SDK keeps
128 attributes a span and drops the oldest; the essential ones are kept whatever the size."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_scorers import RubricScorer, ScoringSpanProcessor
from otel_scorers.judge.client import JudgeClient
from otel_scorers.testing import ScriptedJudgeServer, judge_responder
from tests.support import genai_attributes

ESSENTIAL = ("gen_ai.evaluation.name", "gen_ai.evaluation.score.value",
             "gen_ai.evaluation.score.label", "otel_scorers.pass", "otel_scorers.score",
             "otel_scorers.criteria.unmet", "otel_scorers.evaluated.span_id")


def _evaluation(judge_server: ScriptedJudgeServer, criteria: int, limit: int | None
                ) -> dict[str, object]:
    # criteria 3, 17 and the last are unmet
    unmet = {3, 17, criteria}
    judge_server.responder = judge_responder(satisfied=lambda i, text: i not in unmet)
    limits = SpanLimits(max_span_attributes=limit if limit is not None else SpanLimits.UNSET)
    provider = TracerProvider(span_limits=limits)
    exported = InMemorySpanExporter()
    judge = JudgeClient(judge_server.model, api_base=judge_server.url, api_key="k")
    rubric = "\n".join(f"- criterion number {i}" for i in range(1, criteria + 1))
    processor = ScoringSpanProcessor([RubricScorer(judge, rubric)], tracer_provider=provider,
                                     events=False)
    provider.add_span_processor(processor)
    provider.add_span_processor(SimpleSpanProcessor(exported))
    with provider.get_tracer("app").start_as_current_span(
            "invoke_agent", attributes=genai_attributes()):
        pass
    assert processor.force_flush(60_000)
    processor.shutdown()
    (span,) = [s for s in exported.get_finished_spans()
               if s.name.startswith("gen_ai.evaluation")]
    provider.shutdown()
    return dict(span.attributes or {})


@pytest.mark.parametrize("criteria", [26, 50])
def test_the_score_survives_any_rubric_size(judge_server: ScriptedJudgeServer,
                                            criteria: int) -> None:
    attrs = _evaluation(judge_server, criteria, 128)
    assert len(attrs) <= 128
    for key in ESSENTIAL:
        assert key in attrs, key
    assert attrs["gen_ai.evaluation.name"] == "rubric"
    assert attrs["otel_scorers.pass"] is False and attrs["gen_ai.evaluation.score.label"]
    unmet = attrs["otel_scorers.criteria.unmet"]
    assert len(unmet) == 3
    for ident in unmet:  # the unmet criteria keep their details first
        assert f"otel_scorers.criterion.{ident}.satisfied" in attrs
        assert f"otel_scorers.criterion.{ident}.description" in attrs
    described = {k.split(".")[2] for k in attrs if k.startswith("otel_scorers.criterion.")}
    assert attrs["otel_scorers.criteria.omitted"] == criteria - len(described) > 0
    assert attrs["otel_scorers.criteria.ids"] and len(attrs["otel_scorers.criteria.ids"]) == (
        criteria)


def test_a_small_rubric_is_untouched_and_an_unlimited_provider_keeps_everything(
        judge_server: ScriptedJudgeServer) -> None:
    small = _evaluation(judge_server, 5, 128)
    assert "otel_scorers.criteria.omitted" not in small
    assert sum(k.endswith(".satisfied") for k in small) == 5
    unlimited = _evaluation(judge_server, 50, None)
    assert "otel_scorers.criteria.omitted" not in unlimited
    assert sum(k.endswith(".satisfied") for k in unlimited) == 50


def test_a_tiny_limit_still_keeps_name_score_and_verdict(
        judge_server: ScriptedJudgeServer) -> None:
    attrs = _evaluation(judge_server, 10, 6)
    assert {"gen_ai.evaluation.name", "gen_ai.evaluation.score.value",
            "gen_ai.evaluation.score.label", "otel_scorers.pass"} <= set(attrs)
