"""The version of what was evaluated (issue 52.3): the resource's ``service.version``, or the
``capture.version`` attribute, on the metrics (``version``) and the evaluation span
(``otel_scorers.version``), bounded to the most recently seen."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_scorers import RubricScorer
from otel_scorers.capture import CaptureMapping, version_of
from otel_scorers.emit import metrics as metrics_module
from otel_scorers.emit.metrics import ScorerMetrics
from otel_scorers.judge.client import JudgeClient
from otel_scorers.pipeline import ScoringSpanProcessor
from otel_scorers.scorers.result import ScoreResult
from otel_scorers.testing import ScriptedJudgeServer, judge_responder
from tests.support import genai_attributes


def points(reader: InMemoryMetricReader, name: str) -> list[dict[str, Any]]:
    data = reader.get_metrics_data()
    return [dict(point.attributes) for rm in (data.resource_metrics if data else [])
            for sm in rm.scope_metrics for metric in sm.metrics if metric.name == name
            for point in metric.data.data_points]


def run_with(resource: Resource, judge: JudgeClient, **kwargs: Any) -> tuple[
        list[Any], InMemoryMetricReader]:
    provider = TracerProvider(resource=resource)
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    spans = InMemorySpanExporter()
    processor = ScoringSpanProcessor([RubricScorer(judge, "- greets the user")],
                                     tracer_provider=provider, meter_provider=meters,
                                     events=False, **kwargs)
    provider.add_span_processor(processor)
    provider.add_span_processor(SimpleSpanProcessor(spans))
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("invoke_agent", attributes={
            **genai_attributes(agent="support-bot"), "app.prompt.version": "prompt-7"}):
        pass
    assert processor.force_flush(20_000)
    evaluations = [s for s in spans.get_finished_spans()
                   if s.name == "gen_ai.evaluation rubric"]
    provider.shutdown()
    return evaluations, reader


def test_the_resources_service_version_labels_the_metrics_and_the_evaluation_span(
        judge_server: ScriptedJudgeServer, judge: JudgeClient) -> None:
    judge_server.responder = judge_responder(satisfied=False)
    (evaluation,), reader = run_with(
        Resource.create({"service.name": "app", "service.version": "1.5.0"}), judge)
    assert evaluation.attributes is not None
    assert evaluation.attributes["otel_scorers.version"] == "1.5.0"
    for name in ("otel_scorers.evaluations", "otel_scorers.evaluation.score",
                 "otel_scorers.criterion.verdicts"):
        (attrs,) = points(reader, name)
        assert attrs["version"] == "1.5.0", name
    (verdict,) = points(reader, "otel_scorers.criterion.verdicts")
    assert verdict["judge_model"] == judge.model  # the drift inhibition matches on it


def test_a_configured_attribute_wins_and_no_version_is_none(
        judge_server: ScriptedJudgeServer, judge: JudgeClient) -> None:
    judge_server.responder = judge_responder(satisfied=True)
    (evaluation,), reader = run_with(
        Resource.create({"service.version": "1.5.0"}), judge,
        capture=CaptureMapping(version="app.prompt.version"))
    assert evaluation.attributes is not None
    assert evaluation.attributes["otel_scorers.version"] == "prompt-7"
    assert points(reader, "otel_scorers.evaluations")[0]["version"] == "prompt-7"
    (evaluation,), reader = run_with(Resource.create({"service.name": "app"}), judge)
    assert evaluation.attributes is not None
    assert "otel_scorers.version" not in evaluation.attributes
    assert points(reader, "otel_scorers.evaluations")[0]["version"] == "none"


def test_version_of_reads_text_only_and_bounds_it() -> None:
    provider = TracerProvider(resource=Resource.create({"service.version": " v" + "9" * 100,
                                                        "build": 7}))
    with provider.get_tracer("t").start_as_current_span("s", attributes={"v": 3}) as span:
        pass
    assert version_of(span) == ("v" + "9" * 100)[:64]  # type: ignore[arg-type]
    # a number is no version: the resource's value under that key is looked at next
    assert version_of(span, CaptureMapping(version="v")) is None  # type: ignore[arg-type]
    assert version_of(span, CaptureMapping(version="build")) is None  # type: ignore[arg-type]


def test_the_most_recently_seen_versions_are_kept(monkeypatch: Any) -> None:
    monkeypatch.setattr(metrics_module, "MAX_VERSIONS", 3)
    reader = InMemoryMetricReader()
    metrics = ScorerMetrics(MeterProvider(metric_readers=[reader]))
    result = ScoreResult(run_id="r", scorer="rubric", score=1.0, passed=True, label="pass")
    for version in ("1", "2", "3", "1", "4", "5"):  # "1" seen again: "2" is the oldest
        metrics.result(result, "bot", version=version)
    assert list(metrics._versions) == ["1", "4", "5"]  # "2" and then "3" gave way
    labels = {p["version"] for p in points(reader, "otel_scorers.evaluations")}
    assert labels == {"1", "2", "3", "4", "5"}  # every version recorded as itself
    overflow = points(reader, "otel_scorers.metric.overflow")
    assert overflow == [{"label": "version"}]
