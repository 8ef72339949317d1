"""An application for the Prometheus integration test, run in its own process:

    python metrics_app.py JUDGE_URL prometheus METRICS_PORT
    python metrics_app.py JUDGE_URL otlp COLLECTOR_HTTP_URL

It scores agent runs live (rubric, prompt alignment, trajectory and faithfulness; each run calls
a tool, every third call fails; then a conversation of three turns, judged whole by the
multi-turn scorer) against the scripted judge at
JUDGE_URL and either exposes its metrics with the OTel Prometheus exporter on
127.0.0.1:METRICS_PORT, or sends them over OTLP/HTTP to a Collector every half second (whose
Prometheus exporter is scraped instead), with service.name ``support-app``. It prints
``ready`` once every run has ended in a decision, and keeps serving until killed. Some runs are
built to fail (the judge answers garbage for them) and a burst overflows a tiny queue, so error
and drop series exist too.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

from otel_scorers import (
    FaithfulnessScorer,
    MultiTurnScorer,
    PromptAlignmentScorer,
    RubricScorer,
    TrajectoryScorer,
)
from otel_scorers.judge.client import JudgeClient
from otel_scorers.judge.retry import RetryPolicy
from otel_scorers.pipeline import Sampling, ScorerSpec, ScoringSpanProcessor, SessionPolicy


def attributes(agent: str, prompt: str, answer: str) -> dict[str, str]:
    return {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent,
        "gen_ai.system_instructions": json.dumps([{"type": "text", "content": "Be polite."}]),
        "gen_ai.input.messages": json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": prompt}]}]),
        "gen_ai.output.messages": json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": answer}]}]),
    }


def tool(i: int) -> dict[str, str]:
    """A ``lookup`` tool call; every third one fails."""
    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
             "gen_ai.tool.call.arguments": json.dumps({"q": f"question {i}"})}
    if i % 3 == 2:
        attrs["gen_ai.tool.status"] = "error"
    else:
        attrs["gen_ai.tool.call.result"] = f"The docs say: answer {i}."
    return attrs


def reader(mode: str, where: str) -> MetricReader:
    if mode == "prometheus":
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from prometheus_client import start_http_server

        start_http_server(int(where), addr="127.0.0.1")
        return PrometheusMetricReader()
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    return PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=f"{where}/v1/metrics"),
                                         export_interval_millis=500)


def main() -> None:
    judge_url, mode, where = sys.argv[1:4]
    meter_provider = MeterProvider(metric_readers=[reader(mode, where)],
                                   resource=Resource.create({"service.name": "support-app"}))
    judge = JudgeClient("openai/gpt-4o-mini", api_base=judge_url, api_key="k",
                        retry=RetryPolicy(max_retries=0), timeout_s=10)
    tracer_provider = TracerProvider()
    # the rubric judge's true rates, as calibrate --save writes them: exported as gauges, so
    # the corrected pass rate of the shipped recording rules has data
    rates = Path(tempfile.mkdtemp()) / "judge-rates.json"
    rates.write_text(json.dumps({
        "format": "otel-scorers-judge-rates/1", "model": judge.model,
        "scorers": {"rubric": {"tpr": 0.95, "tnr": 0.6, "passing_cases": 40,
                               "failing_cases": 20}}}))
    os.environ["OTEL_SCORERS_JUDGE_RATES"] = str(rates)
    # judge canaries every 2 seconds (an hour by default), two cases a round
    os.environ["OTEL_SCORERS_CANARY_INTERVAL_S"] = "2"
    os.environ["OTEL_SCORERS_CANARY_CASES"] = "2"
    processor = ScoringSpanProcessor(
        [RubricScorer(judge, "- greets the user\n- cites a source"), PromptAlignmentScorer(judge),
         # a scorer with a tiny hourly budget: one evaluation, then budget_exhausted
         ScorerSpec(RubricScorer(judge, "- is polite", name="budgeted"),
                    Sampling(budget_tokens_per_hour=200, pace_budget=False)),
         TrajectoryScorer(["lookup"]), FaithfulnessScorer(judge), MultiTurnScorer(judge)],
        tracer_provider=tracer_provider, meter_provider=meter_provider, cache_ttl_s=0,
        queue_size=2, concurrency=1, sessions=SessionPolicy(idle_s=3600))
    tracer_provider.add_span_processor(processor)
    tracer = tracer_provider.get_tracer("app")
    for i in range(12):
        agent = "support" if i % 2 else "billing"
        answer = "BROKEN" if i % 4 == 3 else f"Hello! See the docs, answer {i}."
        with tracer.start_as_current_span("invoke_agent", attributes=attributes(
                agent, f"question {i}", answer)), tracer.start_as_current_span(
                "execute_tool lookup", attributes=tool(i)):
            pass
        processor.force_flush(60_000)  # one at a time: none of these is dropped
    # a conversation: three turns of one session, judged whole (goal completion, retention)
    for turn in (1, 2, 4):
        with tracer.start_as_current_span("invoke_agent", attributes={
                **attributes("support", f"session question {turn}", "Hello! Here you are."),
                "session.id": "chat-1"}):
            pass
        processor.force_flush(60_000)
    processor.score_sessions(timeout_millis=60_000)
    # a burst into the two-slot queue while the judge is slow: most of it is dropped, counted
    for i in range(10):
        with tracer.start_as_current_span("invoke_agent", attributes=attributes(
                "support", f"burst {i}", "Hello!")):
            pass
    processor.force_flush(60_000)
    print("ready", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
