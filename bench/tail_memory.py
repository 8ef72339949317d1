"""The Collector's memory under ``otelcol-tail-sampling.yaml`` at a stated trace rate, against
``otelcol.yaml`` at the same rate (docs/integration.md, "Tail sampling").

    python bench/tail_memory.py                       # 100 traces/s, 30 s wait, 60 s each
    python bench/tail_memory.py --rate 50 --wait 30s --seconds 60

Each trace is what a scored run sends: an agent span with its prompt and answer (about 1 kB of
attributes), a tool span and the evaluation span (passing; one in ten failing), sent over
OTLP/HTTP in batches of one second's traces. The Collector (``.stack/``, ``make stack``)
exports to a Jaeger of its own (``.stack/jaeger``). Printed: the Collector's resident memory
(VmRSS) at start and its peak over the run's last half, in MiB, for each config."""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def load(endpoint: str, rate: int, seconds: float, pid: int) -> list[float]:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from tests.support import genai_attributes

    provider = TracerProvider(resource=Resource.create({"service.name": "tail-bench"}))
    provider.add_span_processor(BatchSpanProcessor(
        OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces"), max_queue_size=100_000,
        schedule_delay_millis=1000, max_export_batch_size=4096))
    tracer = provider.get_tracer("bench")
    samples, started, sent = [], time.monotonic(), 0
    while (now := time.monotonic()) - started < seconds:
        due = int((now - started) * rate)
        for _ in range(due - sent):
            with tracer.start_as_current_span("invoke_agent support-bot", attributes=(
                    genai_attributes(prompt="How do I reset my password? " * 8,
                                     answer="Open Settings, then Security. " * 8))) as span, \
                    tracer.start_as_current_span("execute_tool lookup"):
                pass
            fails = random.random() < 0.1
            evaluation = tracer.start_span(
                "gen_ai.evaluation rubric", attributes={
                    "gen_ai.evaluation.name": "rubric", "otel_scorers.pass": not fails,
                    "gen_ai.evaluation.score.value": 0.0 if fails else 1.0,
                    "gen_ai.evaluation.explanation": "The answer does not greet the user."})
            evaluation.end()
            del span
        sent = due
        if now - started > seconds / 2:
            samples.append(rss_mib(pid))
        time.sleep(0.05)
    provider.shutdown()
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=int, default=100, help="traces per second")
    parser.add_argument("--wait", default="30s", help="the decision wait")
    parser.add_argument("--seconds", type=float, default=60)
    args = parser.parse_args()
    from tests.binaries import collector, jaeger, metric_samples

    out = {"rate_traces_per_s": args.rate, "decision_wait": args.wait}
    with tempfile.TemporaryDirectory() as work, jaeger(Path(work)) as store:
        for config in ("otelcol.yaml", "otelcol-tail-sampling.yaml"):
            with collector(config, Path(work), JAEGER_OTLP_ENDPOINT=store.addresses[
                    "otlp_grpc"], DECISION_WAIT=args.wait) as otelcol:
                pid = otelcol.process.pid
                at_start = rss_mib(pid)
                samples = load(otelcol.addresses["http"], args.rate, args.seconds, pid)
                accepted = metric_samples(otelcol.addresses["telemetry"],
                                          "otelcol_receiver_accepted_spans")
                out[config] = {"rss_start_mib": round(at_start, 1),
                               "rss_peak_mib": round(max(samples), 1),
                               "spans_accepted": sum(accepted.values())}
    print(json.dumps(out, indent=2))
    os._exit(0)


if __name__ == "__main__":
    main()
