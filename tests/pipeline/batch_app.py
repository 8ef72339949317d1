"""An application whose rubric scorer judges through the batch lane: ``batch_app.py JUDGE_URL
N`` ends N agent runs and prints their trace ids (a JSON list), then prints each evaluation span
as it is exported (a JSON object a line); with N = 0 it only waits for what its spool holds, and
exits once that is emitted (or after a minute)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from otel_scorers import RubricScorer
from otel_scorers.judge.client import JudgeClient
from otel_scorers.pipeline import ScorerSpec, ScoringSpanProcessor
from tests.support import genai_attributes


class Printer(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        for span in spans:
            if span.name.startswith("gen_ai.evaluation"):
                attributes = span.attributes or {}
                print(json.dumps({"trace_id": f"{span.context.trace_id:032x}",
                                  "label": attributes.get("gen_ai.evaluation.score.label"),
                                  "tier": attributes.get("otel_scorers.judge.service_tier")}),
                      flush=True)
        return SpanExportResult.SUCCESS


def batch_pipeline(url: str, printer: SpanExporter
                   ) -> tuple[TracerProvider, ScoringSpanProcessor]:
    """A provider whose rubric scorer judges through the batch lane at ``url``, its
    evaluation spans exported to ``printer``."""
    provider = TracerProvider()
    judge = JudgeClient("openai/gpt-4o-mini", api_base=url, api_key="k",
                        structured_output="json_object")
    processor = ScoringSpanProcessor([ScorerSpec(RubricScorer(judge, "- greets the user"),
                                                 lane="batch")], tracer_provider=provider)
    provider.add_span_processor(processor)
    provider.add_span_processor(SimpleSpanProcessor(printer))
    return provider, processor


def main() -> None:
    url, count = sys.argv[1], int(sys.argv[2])
    provider, processor = batch_pipeline(url, Printer())
    tracer = provider.get_tracer("app")
    traces = []
    for index in range(count):
        with tracer.start_as_current_span("invoke_agent", attributes=genai_attributes(
                prompt=f"question {index}")) as span:
            traces.append(f"{span.get_span_context().trace_id:032x}")
    print(json.dumps(traces), flush=True)
    processor.force_flush(30_000)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        report = processor.health().get("batch", {})
        if count == 0 and report.get("pending_bytes") == 0 and report.get("emitted"):
            break
        time.sleep(0.2)
    processor.shutdown()


if __name__ == "__main__":
    main()
