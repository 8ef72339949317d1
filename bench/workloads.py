"""Shared workloads for the benchmarks: providers with and without the scoring processor, and a
traced agent run (one ``invoke_agent`` span with GenAI content and four child spans)."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_scorers import PromptAlignmentScorer, RubricScorer
from otel_scorers.judge.client import JudgeClient
from otel_scorers.pipeline import Sampling, ScoringSpanProcessor
from otel_scorers.scorers.base import BaseScorer
from otel_scorers.scorers.result import ScoreResult
from otel_scorers.scorers.run import ScorerRun

RESOURCE = Resource.create({"service.name": "otel-scorers-bench"})


class NoOpExporter(SpanExporter):
    """Accepts and discards spans: the export cost stays out of the measurement."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None


class NeverAnswers(BaseScorer):
    """A scorer whose judge never answers: what the application thread does is the same as with
    a real judge, and no judge work competes with the measurement."""

    scale = 1.0

    def __init__(self, name: str) -> None:
        self.name = name

    async def score(self, run: ScorerRun) -> ScoreResult:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


@dataclass
class Config:
    provider: TracerProvider
    tracer: Any
    processor: ScoringSpanProcessor | None = None
    collected: InMemorySpanExporter | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def evaluation_spans(self, scorer: str) -> list[ReadableSpan]:
        assert self.collected is not None
        return [s for s in self.collected.get_finished_spans()
                if s.name == f"gen_ai.evaluation {scorer}"]


def plain_provider() -> Config:
    provider = TracerProvider(resource=RESOURCE)
    provider.add_span_processor(BatchSpanProcessor(NoOpExporter()))
    return Config(provider, provider.get_tracer("bench"))


def scoring_provider(url: str, *, ratio: float, concurrency: int = 8, queue_size: int = 2048,
                     scorers: Sequence[str] = ("rubric", "prompt_alignment"),
                     cache_ttl_s: float = 600.0, collect: bool = True,
                     exporter: SpanExporter | None = None,
                     fuse_judge_calls: bool = False, isolation: str = "thread") -> Config:
    """The same pipeline with the scoring processor first (default settings unless given)."""
    provider = TracerProvider(resource=RESOURCE)
    # a priced model name (the scripted server answers to any): litellm prices it, as in
    # production, instead of failing price lookups on an unknown name
    judge = JudgeClient("openai/gpt-4o-mini", api_base=url, api_key="bench", timeout_s=30,
                        structured_output="json_object")
    built = {"rubric": lambda: RubricScorer(judge, "- answers the question\n- is polite"),
             "prompt_alignment": lambda: PromptAlignmentScorer(judge)}
    processor = ScoringSpanProcessor(
        [built[name]() for name in scorers], sampling=Sampling(ratio=ratio),
        tracer_provider=provider, meter_provider=MeterProvider(
            metric_readers=[InMemoryMetricReader()]),
        concurrency=concurrency, queue_size=queue_size, cache_ttl_s=cache_ttl_s,
        events=False, exporter=exporter, shutdown_timeout_s=0.2,  # no draining in benches
        fuse_judge_calls=fuse_judge_calls, isolation=isolation)
    provider.add_span_processor(processor)
    collected = None
    if exporter is None:
        provider.add_span_processor(BatchSpanProcessor(NoOpExporter()))
        if collect:
            collected = InMemorySpanExporter()
            provider.add_span_processor(SimpleSpanProcessor(
                _EvaluationsOnly(collected)))
    return Config(provider, provider.get_tracer("bench"), processor, collected)


class _EvaluationsOnly(SpanExporter):
    """Keeps only evaluation spans (so long runs do not accumulate application spans)."""

    def __init__(self, inner: InMemorySpanExporter) -> None:
        self.inner = inner

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        kept = [s for s in spans if s.name.startswith("gen_ai.evaluation")]
        return self.inner.export(kept) if kept else SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None


def _messages(role: str, text: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}])


SYSTEM = json.dumps([{"type": "text", "content": "You are a helpful support agent."}])


def agent_iteration(tracer: Any, *, distinct: bool = False,
                    repeat_every: int | None = None) -> Callable[[], None]:
    """A closure tracing one agent run: invoke_agent + retrieval + 2 chats + a tool call.

    ``distinct`` gives every run its own question (no cache hits); with ``repeat_every=k``
    every k-th run repeats the previous one exactly.
    """
    counter = itertools.count()
    state = {"question": "How do I reset my password?"}

    def run() -> None:
        index = next(counter)
        if distinct and not (repeat_every and index % repeat_every == repeat_every - 1):
            state["question"] = f"How do I reset my password? (ticket {index})"
        attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support",
                 "gen_ai.system_instructions": SYSTEM,
                 "gen_ai.input.messages": _messages("user", state["question"])}
        with tracer.start_as_current_span("invoke_agent support", attributes=attrs) as agent:
            with tracer.start_as_current_span("retrieve docs"):
                pass
            for step in range(2):
                with tracer.start_as_current_span("chat gpt-4o-mini", attributes={
                        "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
                        "gen_ai.usage.input_tokens": 120 + step}):
                    pass
            with tracer.start_as_current_span("execute_tool lookup", attributes={
                    "gen_ai.operation.name": "execute_tool"}):
                pass
            agent.set_attribute("gen_ai.output.messages", _messages(
                "assistant", "Open Settings > Security and click Reset password."))

    return run


def exported_request(index: int, *, agent: bool) -> Any:
    """One OTLP ``ExportTraceServiceRequest`` of ~3.5 kB: a trace of two LLM calls with their
    conversation (``gen_ai.*.messages``), under an ``invoke_agent`` span when ``agent``."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    provider = TracerProvider()
    kept = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(kept))
    tracer = provider.get_tracer("app")
    question = f"Ticket {index}: how do I reset my password? " + "Details. " * 100
    name = "invoke_agent support" if agent else "request"
    attrs = {"gen_ai.operation.name": "invoke_agent"} if agent else {}
    with tracer.start_as_current_span(name, attributes=attrs):
        for step in range(2):
            with tracer.start_as_current_span("chat gpt-4o-mini", attributes={
                    "gen_ai.operation.name": "chat",
                    "gen_ai.input.messages": _messages("user", question),
                    "gen_ai.output.messages": _messages("assistant", f"Step {step}: " +
                                                        "Open Settings > Security. " * 20)}):
                pass
    request = encode_spans(kept.get_finished_spans())
    provider.shutdown()
    return request
