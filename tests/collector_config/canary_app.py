"""An application whose rubric scorer's judge is watched by canaries every 0.3 seconds, its
metrics served by the Python Prometheus exporter, its spans (each canary verdict's) sent over
OTLP/gRPC to ``OTLP``: ``canary_app.py JUDGE_URL PORT OTLP``. Prints ``ready`` once serving,
then runs until stopped."""

from __future__ import annotations

import os
import sys
import threading

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ["OTEL_SCORERS_CANARY_INTERVAL_S"] = "0.3"
os.environ["OTEL_SCORERS_CANARY_CASES"] = "4"

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from prometheus_client import start_http_server

from otel_scorers import RubricScorer, ScoringSpanProcessor
from otel_scorers.judge.client import JudgeClient
from otel_scorers.judge.retry import RetryPolicy


def main() -> None:
    judge_url, port, otlp = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    start_http_server(port, addr="127.0.0.1")
    resource = Resource.create({"service.name": "canary-app"})
    meter_provider = MeterProvider(metric_readers=[PrometheusMetricReader()], resource=resource)
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(BatchSpanProcessor(
        OTLPSpanExporter(endpoint=otlp, insecure=True), schedule_delay_millis=200))
    judge = JudgeClient("openai/gpt-4o-mini", api_base=judge_url, api_key="k",
                        retry=RetryPolicy(max_retries=0), timeout_s=10)
    processor = ScoringSpanProcessor([RubricScorer(judge)], tracer_provider=tracer_provider,
                                     meter_provider=meter_provider)
    print("ready", flush=True)
    threading.Event().wait()
    processor.shutdown()
    tracer_provider.shutdown()


if __name__ == "__main__":
    main()
