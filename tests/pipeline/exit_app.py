"""A short-lived app that ends an agent run and exits without flushing (test_exit.py).

    python exit_app.py JUDGE_URL SPANS_FILE [EXIT_TIMEOUT_S]
"""

from __future__ import annotations

import json
import sys

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

import otel_scorers
from otel_scorers import PromptAlignmentScorer, RubricScorer
from otel_scorers.judge.client import JudgeClient


def main(judge_url: str, spans_file: str, exit_timeout_s: float = 30.0) -> None:
    provider = TracerProvider()
    out = open(spans_file, "w", encoding="utf-8")  # noqa: SIM115 (closed by the exporter)
    provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter(
        out=out, formatter=lambda span: span.to_json(indent=None) + "\n")))
    judge = JudgeClient("openai/scripted-judge", api_base=judge_url, api_key="k")
    otel_scorers.install(tracer_provider=provider, logger_provider=object(),
                         scorers=[RubricScorer(judge, "- greets"), PromptAlignmentScorer(judge)],
                         exit_timeout_s=exit_timeout_s)
    attributes = {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "greeter",
        "gen_ai.input.messages": json.dumps([{"role": "user", "content": "Hi"}]),
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "content": "Hello!"}])}
    with provider.get_tracer("app").start_as_current_span("invoke_agent greeter",
                                                          attributes=attributes):
        pass
    print("ended the agent span; exiting without force_flush", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], *(float(a) for a in sys.argv[3:]))
