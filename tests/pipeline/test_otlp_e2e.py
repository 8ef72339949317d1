"""End to end over the wire: the real OTLP/HTTP exporters send to a real OTLP receiver (oteltap)
on 127.0.0.1, and the decoded protobuf spans and metrics carry the evaluation results."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from oteltap import OtelTapHttpProtobufReceiver, OtelTapHttpProtobufReceiverSettings

from otel_scorers import PromptAlignmentScorer, RubricScorer
from otel_scorers.judge.client import JudgeClient
from otel_scorers.pipeline import ScoringSpanProcessor
from otel_scorers.testing import ScriptedJudgeServer, judge_responder
from tests.support import free_port, genai_attributes


def attrs_of(message: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in message.attributes:
        value = kv.value
        kind = value.WhichOneof("value")
        out[kv.key] = getattr(value, kind) if kind else None
    return out


def run_app(port: int, judge: JudgeClient) -> bytes:
    """The application side, in a thread: SDK providers exporting over OTLP/HTTP."""
    base = f"http://127.0.0.1:{port}"
    tracer_provider = TracerProvider()
    reader = PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=f"{base}/v1/metrics"),
                                           export_interval_millis=60_000)
    meter_provider = MeterProvider(metric_readers=[reader])
    processor = ScoringSpanProcessor(
        [RubricScorer(judge, "- greets the user"), PromptAlignmentScorer(judge)],
        tracer_provider=tracer_provider, meter_provider=meter_provider, events=False)
    tracer_provider.add_span_processor(processor)
    tracer_provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{base}/v1/traces")))
    with tracer_provider.get_tracer("app").start_as_current_span(
            "invoke_agent support", attributes=genai_attributes()) as span:
        agent_id = span.get_span_context().span_id
    assert processor.force_flush(20_000)
    tracer_provider.force_flush()
    meter_provider.force_flush()
    tracer_provider.shutdown()
    meter_provider.shutdown()
    return agent_id.to_bytes(8, "big")


async def _collect(stream: AsyncIterator[Any], into: list[Any]) -> None:
    async for message in stream:
        into.append(message)


@pytest.mark.slow
async def test_spans_and_metrics_over_otlp(judge_server: ScriptedJudgeServer,
                                           judge: JudgeClient) -> None:
    judge_server.responder = judge_responder(satisfied=False)
    port = free_port()
    tap = OtelTapHttpProtobufReceiver(OtelTapHttpProtobufReceiverSettings(http_port=port))
    await tap.start()
    spans: list[Any] = []
    metrics: list[Any] = []
    tasks = [asyncio.create_task(_collect(tap.stream_traces(), spans)),
             asyncio.create_task(_collect(tap.stream_metrics(), metrics))]
    try:
        await asyncio.sleep(0.2)  # the receiver's subscribers exist before anything is sent
        agent_id = await asyncio.to_thread(run_app, port, judge)
        deadline = time.monotonic() + 20
        names = {"invoke_agent support", "gen_ai.evaluation rubric",
                 "gen_ai.evaluation prompt_alignment"}
        wanted = {"otel_scorers.evaluations", "otel_scorers.decisions",
                  "otel_scorers.evaluation.score", "otel_scorers.queue.depth"}
        while time.monotonic() < deadline and not (
                names <= {s.name for s in spans} and wanted <= {m.name for m in metrics}):
            await asyncio.sleep(0.1)
    finally:
        for task in tasks:
            task.cancel()
        await tap.stop()
    by_name = {s.name: s for s in spans}
    assert names <= set(by_name), sorted(by_name)
    rubric = by_name["gen_ai.evaluation rubric"]
    assert rubric.parent_span_id == agent_id
    assert rubric.trace_id == by_name["invoke_agent support"].trace_id
    attributes = attrs_of(rubric)
    assert attributes["gen_ai.evaluation.name"] == "rubric"
    assert attributes["gen_ai.evaluation.score.value"] == 0.0
    assert attributes["gen_ai.evaluation.score.label"] == "fail"
    assert attributes["otel_scorers.criterion.greets_the_user.satisfied"] is False
    alignment = attrs_of(by_name["gen_ai.evaluation prompt_alignment"])
    assert alignment["gen_ai.evaluation.score.value"] == 1.0
    received = {m.name: m for m in metrics}
    assert wanted <= set(received), sorted(received)
    evaluations = received["otel_scorers.evaluations"].sum.data_points
    assert {attrs_of(p)["scorer"]: p.as_int for p in evaluations} == {
        "rubric": 1, "prompt_alignment": 1}
    decisions = received["otel_scorers.decisions"].sum.data_points
    scored = [p for p in decisions if attrs_of(p)["decision"] == "scored"]
    assert sum(p.as_int for p in scored) == 2
    assert received["otel_scorers.evaluation.score"].histogram.data_points
