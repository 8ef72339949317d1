"""Processes that share one batch spool, as a server's workers do: ``batch_workers.py MODE
JUDGE_URL STOP_FILE``.

- ``fork``: the parent builds the processor and waits until it leads the spool (its first
  round), then forks two children and prints ``{"parent": pid}``; each child ends two agent
  runs and prints ``{"runs": [trace ids]}``. Nothing is judged in the parent.
- ``own``: one process with a processor of its own that ends three runs and prints its runs.

Each process prints every evaluation span it exports (``{"trace_id", "pid", "label"}``) and,
once ``STOP_FILE`` exists (or after two minutes), ``{"pid", "leading": ...}`` from its
``health()``, then shuts down once ``STOP_FILE.exit`` exists too."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from otel_scorers.pipeline import ScoringSpanProcessor
from tests.pipeline.batch_app import batch_pipeline
from tests.support import genai_attributes


def say(what: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(what) + "\n")  # one short write: lines of processes never mix
    sys.stdout.flush()


class Printer(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        for span in spans:
            if span.name.startswith("gen_ai.evaluation"):
                say({"trace_id": f"{span.context.trace_id:032x}", "pid": os.getpid(),
                     "label": (span.attributes or {}).get("gen_ai.evaluation.score.label")})
        return SpanExportResult.SUCCESS


def work(processor: ScoringSpanProcessor, provider: TracerProvider, runs: int,
         stop: Path) -> None:
    tracer = provider.get_tracer("app")
    traces = []
    for index in range(runs):
        with tracer.start_as_current_span("invoke_agent", attributes=genai_attributes(
                prompt=f"question {os.getpid()} {index}")) as span:
            traces.append(f"{span.get_span_context().trace_id:032x}")
    processor.force_flush(30_000)
    say({"runs": traces, "pid": os.getpid()})
    deadline = time.monotonic() + 120
    while not stop.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    say({"pid": os.getpid(), "leading": processor.health()["batch"].get("leading")})
    leave = stop.with_name(stop.name + ".exit")  # (so no process ends, letting another lead,
    while not leave.exists() and time.monotonic() < deadline:  # before all have said it)
        time.sleep(0.1)
    processor.shutdown()


def main() -> None:
    mode, url, stop = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    provider, processor = batch_pipeline(url, Printer())
    if mode == "own":
        work(processor, provider, 3, stop)
        return
    while not processor.health()["batch"].get("leading"):  # the parent's first round
        time.sleep(0.05)
    for _ in range(2):
        if os.fork() == 0:
            try:
                work(processor, provider, 2, stop)
            finally:
                os._exit(0)
    say({"parent": os.getpid()})
    while True:  # the test ends it (kill -9)
        time.sleep(1)


if __name__ == "__main__":
    main()
