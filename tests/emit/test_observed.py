"""The judge counters are tallies read at collection: the same series a counter would export."""

from __future__ import annotations

import gc
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider, ObservableCounter
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    InMemoryMetricReader,
    Sum,
)
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from otel_scorers import RubricScorer
from otel_scorers.emit.observed import tally
from otel_scorers.judge.client import JudgeClient
from otel_scorers.pipeline import ScoringSpanProcessor
from otel_scorers.testing import CapturedTelemetry, ScriptedJudgeServer, judge_responder
from tests.support import end_agent_span


def _points(reader: InMemoryMetricReader, name: str) -> tuple[Any, list[Any]]:
    data = reader.get_metrics_data()
    assert data is not None
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == name:
                    return metric.data, list(metric.data.data_points)
    raise AssertionError(f"{name} was not exported")


def test_judge_tokens_and_cost_add_up_over_processors_and_outlive_them(
        judge_server: ScriptedJudgeServer) -> None:
    """Two processors on one meter provider: one series per attribute set, their sum, a
    monotonic cumulative sum; a processor that is gone still counts (as a counter's would)."""
    judge_server.responder = judge_responder()
    # a model litellm's table prices (the scripted server answers to any name)
    judge = JudgeClient("openai/gpt-4o-mini", api_base=judge_server.url, api_key="k")
    telemetry = CapturedTelemetry.create()
    processors = [ScoringSpanProcessor([RubricScorer(judge, "- greets")],
                                       tracer_provider=telemetry.tracer_provider,
                                       meter_provider=telemetry.meter_provider)
                  for _ in range(2)]
    for processor in processors:
        telemetry.tracer_provider.add_span_processor(processor)
    telemetry.tracer_provider.add_span_processor(SimpleSpanProcessor(telemetry.spans_out))
    try:
        end_agent_span(telemetry, prompt="hello")
        end_agent_span(telemetry, prompt="again")
        for processor in processors:
            assert processor.force_flush(30_000)
        spans = telemetry.evaluation_spans()
        assert len(spans) == 4  # two runs, each scored by both processors
        spent = sum(s.attributes["otel_scorers.judge.input_tokens"] for s in spans)
        cost = sum(s.attributes["otel_scorers.judge.cost_usd"] for s in spans)
        assert spent > 0 and cost > 0
        data, points = _points(telemetry.reader, "otel_scorers.judge.tokens")
        assert isinstance(data, Sum) and data.is_monotonic
        assert data.aggregation_temporality == AggregationTemporality.CUMULATIVE
        inputs = [p for p in points if p.attributes["token_type"] == "input"]
        assert len(inputs) == 1 and inputs[0].value == spent, points
        assert dict(inputs[0].attributes) == {
            "scorer": "rubric", "agent": "support-bot", "judge_model": judge.model,
            "service_tier": "standard", "token_type": "input"}
        _, (cost_point,) = _points(telemetry.reader, "otel_scorers.judge.cost")
        assert abs(cost_point.value - cost) < 1e-12
        processors[0].shutdown()
        del processors[0]
        gc.collect()
        _, points = _points(telemetry.reader, "otel_scorers.judge.tokens")
        assert [p.value for p in points if p.attributes["token_type"] == "input"] == [spent]
    finally:
        for processor in processors:
            processor.shutdown()
        telemetry.shutdown()


def test_a_tally_is_one_series_per_attribute_set_and_reports_deltas_when_asked() -> None:
    reader = InMemoryMetricReader(
        preferred_temporality={ObservableCounter: AggregationTemporality.DELTA})
    provider = MeterProvider(metric_readers=[reader])
    meter = provider.get_meter("test")
    try:
        counted = tally(meter, "test.tally", "{call}", "calls")
        assert tally(meter, "test.tally", "{call}", "calls") is counted  # one per meter and name
        counted.add(3, {"a": "x", "b": "y"})
        counted.add(2, {"b": "y", "a": "x"})  # the same set, in another order
        counted.add(1, {"a": "z", "b": "y"})
        for broken in (-2, float("nan"), float("inf"), 0):  # a sum that never goes down
            counted.add(broken, {"a": "x", "b": "y"})
        data, points = _points(reader, "test.tally")
        assert data.aggregation_temporality == AggregationTemporality.DELTA
        assert sorted((p.attributes["a"], p.value) for p in points) == [("x", 5), ("z", 1)]
        counted.add(4, {"a": "x", "b": "y"})
        _, points = _points(reader, "test.tally")
        assert sorted((p.attributes["a"], p.value) for p in points) == [("x", 4), ("z", 0)]
    finally:
        provider.shutdown()
