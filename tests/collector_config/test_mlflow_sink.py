"""Results written natively into a real MLflow tracking server (``.venv-mlflow``, made by
``make test``, started on 127.0.0.1 with a SQLite store): the app's traces arrive over OTLP
(``x-mlflow-experiment-id``), and each scored result becomes a Feedback assessment on trace
``tr-<trace id>``, on the evaluated span, with name, value, rationale, source and label; a
re-score updates it (no second one); a result judged before its trace was ingested lands once
the trace arrives; a server stopped mid-run and started again on the same data gets each result
once."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from otel_scorers import RubricScorer, TrajectoryScorer
from otel_scorers.backends import Evaluated, MLflowSink, SinkQueue
from otel_scorers.background_loop import submit
from otel_scorers.judge.client import JudgeClient
from otel_scorers.pipeline import ScoringSpanProcessor
from otel_scorers.scorers.result import ScoreResult
from otel_scorers.testing import ScriptedJudgeServer, judge_responder
from tests.servers import call, running_mlflow
from tests.support import digest_of, free_port, genai_attributes, reviewed_canaries

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

@pytest.fixture(scope="module")
def mlflow() -> Iterator[tuple[str, str]]:
    """A tracking server and the id of an experiment for the app's traces."""
    with running_mlflow() as base:
        experiment = call(base, "POST", "/api/2.0/mlflow/experiments/create",
                          {"name": "support-app"})["experiment_id"]
        yield base, experiment


def assessments(base: str, trace_id: str, *, count: int, timeout_s: float = 30
                ) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    found: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        try:
            info = call(base, "GET", f"/api/3.0/mlflow/traces/tr-{trace_id}")
            found = info["trace"]["trace_info"].get("assessments", [])
        except urllib.error.HTTPError as exc:
            if exc.code != 404:
                raise
        if len(found) >= count:
            break
        time.sleep(0.3)
    return found


def exporter(base: str, experiment: str) -> OTLPSpanExporter:
    return OTLPSpanExporter(endpoint=f"{base}/v1/traces",
                            headers={"x-mlflow-experiment-id": experiment})


def test_live_evaluations_become_assessments_on_the_trace(
        mlflow: tuple[str, str], judge_server: ScriptedJudgeServer, judge: JudgeClient,
        monkeypatch: pytest.MonkeyPatch) -> None:
    base, experiment = mlflow
    judge_server.responder = judge_responder(satisfied=lambda i, _t: i == 1)
    monkeypatch.setenv("OTEL_SCORERS_MLFLOW_TRACKING_URI", base)
    monkeypatch.setenv("OTEL_SCORERS_MLFLOW_EXPERIMENT", experiment)
    provider = TracerProvider(resource=Resource.create({"service.name": "support-app"}))
    processor = ScoringSpanProcessor(
        [RubricScorer(judge, "- greets the user\n- cites a source"), TrajectoryScorer(["lookup"])],
        tracer_provider=provider, events=False)
    provider.add_span_processor(processor)
    provider.add_span_processor(SimpleSpanProcessor(exporter(base, experiment)))
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("invoke_agent support-bot", attributes=genai_attributes(
            prompt="Reset my password?", answer="Hello! Settings > Security.")) as agent:
        with tracer.start_as_current_span("execute_tool lookup", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
                "gen_ai.tool.call.result": "Settings > Security"}):
            pass
        context = agent.get_span_context()
    assert processor.force_flush(60_000)
    provider.shutdown()
    found = {a["assessment_name"]: a for a in assessments(
        base, f"{context.trace_id:032x}", count=2)}
    assert set(found) == {"rubric", "trajectory"}, found
    rubric, trajectory = found["rubric"], found["trajectory"]
    assert rubric["feedback"]["value"] == 0.0 and rubric["metadata"]["label"] == "fail"
    assert rubric["source"] == {"source_type": "LLM_JUDGE", "source_id": "otel-scorers"}
    assert trajectory["source"]["source_type"] == "CODE"
    assert trajectory["feedback"]["value"] == 1.0
    assert rubric["span_id"] == f"{context.span_id:016x}"
    assert "cites a source" in rubric["rationale"]
    criteria = json.loads(rubric["metadata"]["criteria"])
    assert [(c["id"], c["satisfied"]) for c in criteria] == [
        ("greets_the_user", True), ("cites_a_source", False)]
    assert rubric["metadata"]["judge_model"] == judge.model
    # which evaluator produced each (provenance), as strings in MLflow's metadata map
    from otel_scorers.scorers.provenance import fingerprint_of

    assert rubric["metadata"]["evaluator_id"] == "rubric"
    assert rubric["metadata"]["evaluator_type"] == "llm"
    assert rubric["metadata"]["evaluator_fingerprint"] == fingerprint_of(processor.scorers[0])
    assert trajectory["metadata"]["evaluator_type"] == "code"
    assert processor.health()["sinks"]["mlflow"]["written"] == 2
    processor.shutdown()
    # the failure digest reads them back (issue 37.4)
    link = digest_of(["--mlflow", base, "--experiment", experiment], f"{context.trace_id:032x}")
    # its example links to the trace in the experiment's traces page of MLflow's UI, by the id
    # MLflow's API knows it by
    trace = f"tr-{context.trace_id:032x}"
    assert link == (f"{base}/#/experiments/{experiment}/traces?selectedEvaluationId={trace}"
                    f"&traceId={trace}")
    info = call(base, "GET", f"/api/3.0/mlflow/traces/{trace}")
    assert info["trace"]["trace_info"]["trace_location"]["mlflow_experiment"][
        "experiment_id"] == experiment
    with urllib.request.urlopen(link, timeout=30) as page:  # the UI serves the page
        assert page.status == 200 and "text/html" in page.headers["Content-Type"]



def test_batch_results_reach_mlflow_late_on_their_trace(
        mlflow: tuple[str, str], judge_server: ScriptedJudgeServer, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The batch lane (issue 38.1): the result lands as an assessment on the run's trace when
    the batch comes back."""
    from tests.support import batched_run

    base, experiment = mlflow
    judge_server.responder = judge_responder(satisfied=lambda i, _t: i == 1)
    monkeypatch.setenv("OTEL_SCORERS_MLFLOW_TRACKING_URI", base)
    monkeypatch.setenv("OTEL_SCORERS_MLFLOW_EXPERIMENT", experiment)
    context, found = batched_run(
        judge_server, exporter(base, experiment), tmp_path, monkeypatch,
        lambda context, timeout_s: assessments(base, f"{context.trace_id:032x}", count=1,
                                               timeout_s=timeout_s))
    (rubric,) = found
    assert rubric["assessment_name"] == "rubric" and rubric["metadata"]["label"] == "fail"
    assert rubric["span_id"] == f"{context.span_id:016x}"


def result(score: float) -> ScoreResult:
    return ScoreResult(run_id="r", scorer="rubric", score=score,
                       label="pass" if score else "fail", reason=f"scored {score}")


def offer(queue: SinkQueue, item: Evaluated) -> None:
    async def go() -> None:
        queue.offer(item)
    submit(go()).result(10)


def test_a_result_before_its_trace_lands_and_a_rescore_updates_it(
        mlflow: tuple[str, str]) -> None:
    base, experiment = mlflow
    queue = SinkQueue([MLflowSink(base, experiment=experiment)], retry_s=60)
    provider = TracerProvider()  # the span is exported after its result was offered
    with provider.get_tracer("app").start_as_current_span(
            "invoke_agent early", attributes=genai_attributes(prompt="early")) as agent:
        context = agent.get_span_context()
    item = Evaluated(f"{context.trace_id:032x}", f"{context.span_id:016x}", result(0.0))
    offer(queue, item)
    assert not queue.flush(1.5)  # no such trace yet: retried
    assert queue.totals()["mlflow"]["retried"] >= 1
    exporter(base, experiment).export([agent])  # type: ignore[list-item]
    assert queue.flush(60)
    first = assessments(base, item.trace_id, count=1)
    assert [(a["assessment_name"], a["feedback"]["value"]) for a in first] == [("rubric", 0.0)]
    offer(queue, Evaluated(item.trace_id, item.span_id, result(1.0)))  # a re-score
    assert queue.flush(60)
    again = assessments(base, item.trace_id, count=1)
    assert [(a["assessment_name"], a["feedback"]["value"]) for a in again] == [("rubric", 1.0)]
    assert again[0]["assessment_id"] == first[0]["assessment_id"]  # updated, not added
    assert queue.totals()["mlflow"]["written"] == 2
    queue.close(1)


def test_calibrate_and_the_canaries_read_the_reviewers_feedback_from_mlflow(
        mlflow: tuple[str, str], judge_server: ScriptedJudgeServer, judge: JudgeClient,
        monkeypatch: pytest.MonkeyPatch, make_processor: Any) -> None:
    from click.testing import CliRunner

    from otel_scorers import PromptAlignmentScorer
    from otel_scorers.cli import main

    base, _ = mlflow
    experiment = call(base, "POST", "/api/2.0/mlflow/experiments/create",
                      {"name": "reviewed"})["experiment_id"]
    judge_server.responder = judge_responder()  # every criterion met, alignment 1.0
    monkeypatch.setenv("OTEL_SCORERS_MLFLOW_TRACKING_URI", base)
    monkeypatch.setenv("OTEL_SCORERS_MLFLOW_EXPERIMENT", experiment)
    traces = []
    for prompt, answer in (("Reviewed one?", "Hello! Yes."), ("Reviewed two?", "No.")):
        provider = TracerProvider()
        processor = ScoringSpanProcessor(
            [RubricScorer(judge, "- greets the user"), PromptAlignmentScorer(judge)],
            tracer_provider=provider, events=False)
        provider.add_span_processor(processor)
        provider.add_span_processor(SimpleSpanProcessor(exporter(base, experiment)))
        with provider.get_tracer("app").start_as_current_span(
                "invoke_agent support-bot", attributes=genai_attributes(
                    prompt=prompt, answer=answer)) as agent:
            traces.append(f"tr-{agent.get_span_context().trace_id:032x}")
        assert processor.force_flush(60_000)
        processor.shutdown()
        provider.shutdown()
    assert all(len(assessments(base, t[3:], count=2)) == 2 for t in traces)
    for trace, name, value in ((traces[0], "rubric", "pass"), (traces[1], "rubric", "fail"),
                               (traces[0], "prompt_alignment", 0.9)):
        call(base, "POST", f"/api/3.0/mlflow/traces/{trace}/assessments", {"assessment": {
            "assessment_name": name, "trace_id": trace, "feedback": {"value": value},
            "source": {"source_type": "HUMAN", "source_id": "reviewer@example.com"}}})
    result = CliRunner().invoke(main, [
        "calibrate", "--cases", "mlflow", "--model", judge_server.model, "--api-base",
        judge_server.url, "--api-key", "k", "--json", "-", "--no-progress"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout[result.stdout.index("{"):])
    assert report["cases"] == 3 and report["errors"] == 0
    assert report["pass_agreement"] == 0.5
    assert report["band_hit_rate"] == 1.0 and report["alignment_mae"] == 0.1

    # a second reviewer on the same run: each reviewer's label is a case of its own (issue 35.9)
    call(base, "POST", f"/api/3.0/mlflow/traces/{traces[1]}/assessments", {"assessment": {
        "assessment_name": "rubric", "trace_id": traces[1], "feedback": {"value": "fail"},
        "source": {"source_type": "HUMAN", "source_id": "second@example.com"}}})
    result = CliRunner().invoke(main, [
        "calibrate", "--cases", "mlflow", "--model", judge_server.model, "--api-base",
        judge_server.url, "--api-key", "k", "--json", "-", "--no-progress", "--scorer",
        "rubric"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout[result.stdout.index("{"):])
    assert report["cases"] == 3 and report["pass_agreement"] == 0.3333

    # the live canaries hold the judge to the same labels (issue 36.1): this judge passes all
    monkeypatch.setenv("OTEL_SCORERS_CANARY_FILE", "mlflow")
    monkeypatch.setenv("OTEL_SCORERS_CANARY_INTERVAL_S", "0.1")
    reviewed_canaries(make_processor([RubricScorer(judge, "- greets the user")]))


def test_mlflow_stopped_mid_run_then_restarted_loses_nothing_and_writes_each_result_once(
        judge_server: ScriptedJudgeServer, judge: JudgeClient, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The tracking server up (assessments written), stopped while more runs are judged (the
    app's spans and evaluation spans go out as ever, results retried), started again on the
    same database and port: one assessment per result, none duplicated."""
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    judge_server.responder = judge_responder()
    port, work = free_port(), str(tmp_path)  # the restarted server keeps its SQLite store
    provider = TracerProvider()
    kept = InMemorySpanExporter()
    tracer = provider.get_tracer("app")

    def judged(prompt: str) -> Any:
        with tracer.start_as_current_span("invoke_agent support-bot",
                                          attributes=genai_attributes(prompt=prompt)) as agent:
            return agent

    def traces(spans: list[Any]) -> list[str]:
        return [f"{span.get_span_context().trace_id:032x}" for span in spans]

    with running_mlflow(port, work=work) as base:
        experiment = call(base, "POST", "/api/2.0/mlflow/experiments/create",
                          {"name": "restarted"})["experiment_id"]
        monkeypatch.setenv("OTEL_SCORERS_MLFLOW_TRACKING_URI", base)
        monkeypatch.setenv("OTEL_SCORERS_MLFLOW_EXPERIMENT", experiment)
        processor = ScoringSpanProcessor([RubricScorer(judge, "- greets the user")],
                                         tracer_provider=provider, events=False)
        provider.add_span_processor(processor)
        provider.add_span_processor(SimpleSpanProcessor(kept))
        before = [judged(f"up {i}") for i in range(2)]
        exporter(base, experiment).export(before)
        assert processor.force_flush(60_000)
        assert all(len(assessments(base, trace, count=1)) == 1 for trace in traces(before))
    during = [judged(f"down {i}") for i in range(3)]  # the server is stopped now
    assert not processor.force_flush(3_000)  # the results wait for it, retried
    names = [span.name for span in kept.get_finished_spans()]
    assert names.count("invoke_agent support-bot") == 5
    assert names.count("gen_ai.evaluation rubric") == 5  # evaluation spans went out as ever
    assert processor.health()["sinks"]["mlflow"]["retried"] >= 1
    with running_mlflow(port, work=work) as base:
        exporter(base, experiment).export(during)
        assert processor.force_flush(90_000)
        for trace in traces(before + during):
            found = assessments(base, trace, count=1)
            assert [a["assessment_name"] for a in found] == ["rubric"], found
            assert len(assessments(base, trace, count=2, timeout_s=1)) == 1
    totals = processor.health()["sinks"]["mlflow"]
    assert totals["written"] == 5 and "dropped" not in totals
    processor.shutdown()
    provider.shutdown()
