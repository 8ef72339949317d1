"""A small support agent, traced with OpenTelemetry GenAI conventions and scored live.

    python examples/live_agent.py

Telemetry goes over OTLP/HTTP when OTEL_EXPORTER_OTLP_ENDPOINT is set (for example
http://127.0.0.1:4318, a Collector or Jaeger), to the console otherwise. The judge is
OTEL_SCORERS_JUDGE_MODEL (any litellm model string), or the embedded local model when unset
(install with `pip install 'otel-scorers[local]'`; its verdicts are illustrative only).
"""

from __future__ import annotations

import json
import os

from opentelemetry import trace
from opentelemetry._logs import set_logger_provider
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, ConsoleLogRecordExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

from otel_scorers import PromptAlignmentScorer, RubricScorer
from otel_scorers.pipeline import ScoringSpanProcessor

SYSTEM = "You are the support agent of Acme Cloud. Answer in at most three sentences."
ANSWERS = {
    "How do I reset my password?":
        "Open Settings > Security and click 'Reset password'; we e-mail you a link that is "
        "valid for one hour.",
    "Can I get a refund for last month?":
        "Refunds are possible within 30 days: open Billing > Invoices, choose the invoice and "
        "click 'Request refund'.",
    "Which regions do you support?": "We are a great company with many happy customers.",
}


def setup() -> tuple[TracerProvider, MeterProvider, LoggerProvider, ScoringSpanProcessor]:
    resource = Resource.create({"service.name": "acme-support-agent"})
    if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        spans, metrics, logs = OTLPSpanExporter(), OTLPMetricExporter(), OTLPLogExporter()
    else:
        spans, metrics, logs = (ConsoleSpanExporter(), ConsoleMetricExporter(),
                                ConsoleLogRecordExporter())
    meter_provider = MeterProvider(resource=resource, metric_readers=[
        PeriodicExportingMetricReader(metrics, export_interval_millis=60_000)])
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(BatchLogRecordProcessor(logs))
    set_logger_provider(logger_provider)
    tracer_provider = TracerProvider(resource=resource)
    # The scoring processor only looks at ended spans and never blocks the application.
    scoring = ScoringSpanProcessor(
        [RubricScorer(), PromptAlignmentScorer()],
        rubrics={"support-bot": "- Answers the question asked\n- Tells the user where to click"},
        meter_provider=meter_provider, logger_provider=logger_provider)
    tracer_provider.add_span_processor(scoring)
    tracer_provider.add_span_processor(BatchSpanProcessor(spans))
    trace.set_tracer_provider(tracer_provider)
    return tracer_provider, meter_provider, logger_provider, scoring


def messages(role: str, text: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}])


def run_agent(question: str) -> str:
    """One agent run: an invoke_agent span around a chat call, with GenAI content attributes."""
    tracer = trace.get_tracer("acme.support")
    with tracer.start_as_current_span("invoke_agent support-bot", attributes={
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "support-bot",
        "gen_ai.system_instructions": json.dumps([{"type": "text", "content": SYSTEM}]),
        "gen_ai.input.messages": messages("user", question),
    }) as agent:
        with tracer.start_as_current_span("chat acme-llm", attributes={
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "acme-llm"}):
            answer = ANSWERS.get(question, "I don't know.")
        agent.set_attribute("gen_ai.output.messages", messages("assistant", answer))
    return answer


def main() -> None:
    tracer_provider, meter_provider, logger_provider, scoring = setup()
    for question in ANSWERS:
        print(f"Q: {question}\nA: {run_agent(question)}\n")
    scoring.force_flush(300_000)  # wait for the judge before the process ends
    # let the console exporters finish writing before printing on the same stdout
    tracer_provider.force_flush()
    logger_provider.force_flush()
    print(f"decisions per scorer: {json.dumps(scoring.stats())}", flush=True)
    tracer_provider.shutdown()
    meter_provider.shutdown()
    logger_provider.shutdown()


if __name__ == "__main__":
    main()
