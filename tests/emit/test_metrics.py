"""Metric cardinality stays bounded whatever the application sends."""

from __future__ import annotations

from typing import Any

from otel_scorers import RubricScorer
from otel_scorers.judge.client import JudgeClient
from otel_scorers.testing import CapturedTelemetry, ScriptedJudgeServer, judge_responder
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


def test_a_rubric_from_the_run_is_redacted_and_leaves_no_trace_without_reasons(
        telemetry: Telemetry, make_processor: Any, judge_server: ScriptedJudgeServer) -> None:
    from otel_scorers.judge.retry import RetryPolicy

    judge_server.responder = judge_responder(satisfied=False)
    judge = JudgeClient(judge_server.model, api_base=judge_server.url, api_key="k",
                        redactor=True, retry=RetryPolicy(max_retries=0))
    rubric = "- Confirms the refund to alice@example.com\n- Quotes order 4242-4242-4242-4242"
    processor = make_processor([RubricScorer(judge)])  # the rubric comes with each run
    end_agent_span(telemetry, **{"otel_scorers.rubric": rubric})
    processor.force_flush(10_000)
    span = telemetry.evaluation_spans()[0]
    shown = repr(dict(span.attributes))
    assert "alice@example.com" not in shown and "4242-4242" not in shown
    assert "[REDACTED:email]" in shown and "[REDACTED:card]" in shown
    assert "alice@example.com" not in judge_server.requests[0].text

    # reasons="none": no text, and no slug of the run's rubric in attribute names or labels
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from otel_scorers.pipeline import ScoringSpanProcessor

    quiet = CapturedTelemetry.create()
    processor = ScoringSpanProcessor([RubricScorer(judge)], reasons="none",
                                     tracer_provider=quiet.tracer_provider,
                                     meter_provider=quiet.meter_provider,
                                     logger_provider=quiet.logger_provider)
    quiet.tracer_provider.add_span_processor(processor)
    quiet.tracer_provider.add_span_processor(SimpleSpanProcessor(quiet.spans_out))
    try:
        end_agent_span(quiet, prompt="again", **{"otel_scorers.rubric": rubric})
        processor.force_flush(10_000)
        (evaluation,) = quiet.evaluation_spans()
        attributes = dict(evaluation.attributes)
        keys = [k for k in attributes if k.startswith("otel_scorers.criterion.")]
        assert keys and {k.split(".")[2] for k in keys} == {"c1", "c2"}, keys
        assert "refund" not in repr(attributes) and "order" not in repr(attributes)
        labels = {a["criterion"] for a, _ in quiet.metrics()["otel_scorers.criterion.verdicts"]}
        assert labels == {"c1", "c2"}
    finally:
        processor.shutdown()
        quiet.shutdown()


def test_the_series_of_each_metric_are_capped_not_only_each_label(
        telemetry: Telemetry, make_processor: Any, judge: JudgeClient,
        judge_server: ScriptedJudgeServer, monkeypatch: Any) -> None:
    """Agent and criterion caps multiply: the series of each instrument are bounded too."""
    from otel_scorers.emit import metrics

    monkeypatch.setattr(metrics, "MAX_SERIES", 40)
    judge_server.responder = judge_responder(satisfied=lambda i, text: i % 2 == 0)
    processor = make_processor([RubricScorer(judge)], concurrency=8)  # rubrics from the runs
    for run in range(20):  # 20 agents x 10 criteria of their own: 200 combinations
        rubric = "\n".join(f"- criterion {run}-{c}" for c in range(10))
        end_agent_span(telemetry, agent=f"agent-{run}", prompt=f"hello {run}",
                       **{"otel_scorers.rubric": rubric})
    assert processor.force_flush(60_000)
    verdicts = telemetry.metrics()["otel_scorers.criterion.verdicts"]
    series = {tuple(sorted(attrs.items())) for attrs, _ in verdicts}
    assert len(series) <= 40 + 4, len(series)  # the cap, plus the folded sets
    assert sum(value for _, value in verdicts) == 200  # nothing is lost, only folded
    assert any(attrs["criterion"] == "_other" and attrs["agent"] == "_other"
               for attrs, _ in verdicts)
    assert telemetry.metric_value("otel_scorers.metric.overflow", label="series") > 0


def test_scores_and_verdicts_carry_the_evaluated_runs_trace_as_exemplars(
        telemetry: Telemetry, make_processor: Any, judge: JudgeClient,
        judge_server: ScriptedJudgeServer) -> None:
    """Issue 37.2: each score, pass verdict and criterion verdict is recorded in the evaluated
    span's context, so the SDK's default (trace-based) exemplar filter keeps its trace id: a
    failing bucket links to the run that filled it."""
    judge_server.responder = judge_responder(satisfied=lambda i, _text: False)
    processor = make_processor([RubricScorer(judge, "- greets")])
    span = end_agent_span(telemetry, prompt="exemplar please")
    assert processor.force_flush(60_000)
    wanted = span.get_span_context().trace_id
    data = telemetry.reader.get_metrics_data()
    found: dict[str, list[int]] = {}
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    found.setdefault(metric.name, []).extend(
                        e.trace_id for e in point.exemplars or ())
    for name in ("otel_scorers.evaluation.score", "otel_scorers.evaluations",
                 "otel_scorers.criterion.verdicts"):
        assert found.get(name) == [wanted], (name, found.get(name))
