"""Batch results land on the right trace in the real Jaeger (issue 38.1): an application whose
rubric scorer judges through the batch lane (the scripted judge's batches endpoints, completing
only after the application's spans went out) exports over OTLP to a real Jaeger; each run's
evaluation span arrives later, in the run's own trace, a child of its agent span, priced as a
batch result."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from otel_scorers import RubricScorer
from otel_scorers.judge.client import JudgeClient
from otel_scorers.pipeline import ScorerSpec, ScoringSpanProcessor
from otel_scorers.testing import ScriptedJudgeServer, judge_responder
from tests.binaries import eventually, get_json, jaeger, parent_of, tags
from tests.support import genai_attributes

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def test_batch_results_land_late_on_their_runs_traces_in_jaeger(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SCORERS_BATCH_DIR", str(tmp_path / "spool"))
    monkeypatch.setenv("OTEL_SCORERS_BATCH_INTERVAL_S", "0.5")
    monkeypatch.setenv("OTEL_SCORERS_CANARY", "false")
    with ScriptedJudgeServer(judge_responder()) as judge_server, jaeger(tmp_path) as store:
        judge_server.batches.polls = 10_000  # in progress until the runs are in Jaeger
        provider = TracerProvider(resource=Resource.create({"service.name": "batch-app"}))
        judge = JudgeClient("openai/gpt-4o-mini", api_base=judge_server.url, api_key="k",
                            structured_output="json_object")
        processor = ScoringSpanProcessor(
            [ScorerSpec(RubricScorer(judge, "- greets the user"), lane="batch")],
            tracer_provider=provider, events=False)
        provider.add_span_processor(processor)
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(
            endpoint=store.addresses["otlp_grpc"], insecure=True), schedule_delay_millis=200))
        tracer = provider.get_tracer("app")
        runs = {}
        for index in range(3):
            with tracer.start_as_current_span("invoke_agent support-bot", attributes=(
                    genai_attributes(prompt=f"question {index}"))) as span:
                context = span.get_span_context()
                runs[f"{context.trace_id:032x}"] = f"{context.span_id:016x}"
        query = store.addresses["query"]

        def traces() -> list[dict[str, Any]]:
            found: list[dict[str, Any]] = get_json(f"{query}/api/traces", service="batch-app",
                                                   limit=100, lookback="1h")["data"] or []
            return found

        eventually(lambda: len(traces()) == 3, timeout_s=60, what="the runs in Jaeger")
        assert all(len(t["spans"]) == 1 for t in traces())  # no evaluation yet: in the batch
        eventually(lambda: judge_server.batches.batches, timeout_s=60, what="the batch")
        judge_server.batches.polls = 1  # the provider finishes the batch

        def judged() -> list[dict[str, Any]] | None:
            found = traces()
            return found if sum(len(t["spans"]) for t in found) == 6 else None

        found = eventually(judged, timeout_s=90, what="the late evaluation spans in Jaeger")
        processor.shutdown()
        provider.shutdown()
    for trace in found:
        trace_id = trace["traceID"].rjust(32, "0")
        spans = {span["operationName"]: span for span in trace["spans"]}
        assert set(spans) == {"invoke_agent support-bot", "gen_ai.evaluation rubric"}
        evaluation = spans["gen_ai.evaluation rubric"]
        assert parent_of(evaluation) == runs[trace_id]  # on the run's own span
        values = tags(evaluation)
        assert values["otel_scorers.judge.service_tier"] == "batch"
        assert values["gen_ai.evaluation.score.label"] == "pass"
