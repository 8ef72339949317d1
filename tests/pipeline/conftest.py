"""Real OTel providers with in-memory exporters and readers, and helpers to trace agent runs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Status, StatusCode

from otel_scorers import PromptAlignmentScorer, RubricScorer
from otel_scorers.judge.client import JudgeClient
from otel_scorers.pipeline import ScoringSpanProcessor
from otel_scorers.testing import CapturedTelemetry, ScriptedJudgeServer

Telemetry = CapturedTelemetry


@pytest.fixture
def telemetry() -> Iterator[CapturedTelemetry]:
    captured = CapturedTelemetry.create()
    yield captured
    captured.shutdown()


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
