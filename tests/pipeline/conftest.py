"""Real OTel providers with in-memory exporters and readers, and helpers to trace agent runs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from otel_scorers import PromptAlignmentScorer, RubricScorer
from otel_scorers.judge.client import JudgeClient
from otel_scorers.pipeline import ScoringSpanProcessor
from otel_scorers.testing import ScriptedJudgeServer


@dataclass
class Telemetry:
    tracer_provider: TracerProvider
    spans_out: InMemorySpanExporter
    meter_provider: MeterProvider
    reader: InMemoryMetricReader
    logger_provider: LoggerProvider
    logs_out: InMemoryLogRecordExporter

    def spans(self) -> list[ReadableSpan]:
        return list(self.spans_out.get_finished_spans())

    def app_spans(self) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.instrumentation_scope.name != "otel_scorers"]

    def evaluation_spans(self, scorer: str | None = None) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name.startswith("gen_ai.evaluation")
                and (scorer is None or s.attributes["gen_ai.evaluation.name"] == scorer)]

    def logs(self) -> list[Any]:
        return list(self.logs_out.get_finished_logs())

    def metrics(self) -> dict[str, list[tuple[dict[str, Any], Any]]]:
        out: dict[str, list[tuple[dict[str, Any], Any]]] = {}
        data = self.reader.get_metrics_data()
        for rm in data.resource_metrics if data else []:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    points = out.setdefault(metric.name, [])
                    for point in metric.data.data_points:
                        value = getattr(point, "value", None)
                        if value is None:
                            value = (point.count, point.sum)
                        points.append((dict(point.attributes), value))
        return out

    def metric_value(self, name: str, **attrs: Any) -> Any:
        total = 0
        found = False
        for point_attrs, value in self.metrics().get(name, []):
            if all(point_attrs.get(k) == v for k, v in attrs.items()):
                total += value if not isinstance(value, tuple) else value[0]
                found = True
        return total if found else None

    def tracer(self) -> Any:
        return self.tracer_provider.get_tracer("app")


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    spans_out = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    logs_out = InMemoryLogRecordExporter()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs_out))
    yield Telemetry(tracer_provider, spans_out, meter_provider, reader, logger_provider, logs_out)
    tracer_provider.shutdown()
    meter_provider.shutdown()
    logger_provider.shutdown()


@pytest.fixture
def make_processor(telemetry: Telemetry, judge: JudgeClient):  # type: ignore[no-untyped-def]
    """Build a processor wired to the telemetry fixture, installed before the exporter."""
    made: list[ScoringSpanProcessor] = []

    def make(scorers: list[Any] | None = None, *, install: bool = True,
             **kwargs: Any) -> ScoringSpanProcessor:
        if scorers is None:
            scorers = [RubricScorer(judge, "- greets the user\n- is polite"),
                       PromptAlignmentScorer(judge)]
        kwargs.setdefault("tracer_provider", telemetry.tracer_provider)
        kwargs.setdefault("meter_provider", telemetry.meter_provider)
        kwargs.setdefault("logger_provider", telemetry.logger_provider)
        processor = ScoringSpanProcessor(scorers, **kwargs)
        made.append(processor)
        if install:
            telemetry.tracer_provider.add_span_processor(processor)
            if "exporter" not in kwargs:
                telemetry.tracer_provider.add_span_processor(
                    SimpleSpanProcessor(telemetry.spans_out))
        return processor

    yield make
    for processor in made:
        processor.shutdown()


def genai_attributes(prompt: str = "Hello, who are you?", answer: str = "Hi! I am a bot.",
                     system: str | None = "Be polite.", agent: str = "support-bot",
                     **extra: Any) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": agent,
        "gen_ai.input.messages": json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": prompt}]}]),
        "gen_ai.output.messages": json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": answer}],
              "finish_reason": "stop"}]),
    }
    if system is not None:
        attrs["gen_ai.system_instructions"] = json.dumps([{"type": "text", "content": system}])
    attrs.update(extra)
    return attrs


def end_agent_span(telemetry: Telemetry, *, error: bool = False, name: str = "invoke_agent",
                   **attrs: Any) -> ReadableSpan:
    with telemetry.tracer().start_as_current_span(
            name, attributes=genai_attributes(**attrs)) as span:
        if error:
            span.set_status(Status(StatusCode.ERROR, "boom"))
    return span  # type: ignore[return-value]


__all__ = ["ScriptedJudgeServer", "Telemetry", "end_agent_span", "genai_attributes"]
