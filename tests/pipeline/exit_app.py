"""A short-lived app that ends an agent run and exits without flushing (test_exit.py).

    python exit_app.py JUDGE_URL SPANS_FILE [EXIT_TIMEOUT_S] [session]

With ``session``: two turns of one conversation, judged by the multi-turn scorer only at exit
(its idle time is an hour) (test_sessions.py).
"""

from __future__ import annotations

import json
import sys

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

import otel_scorers
from otel_scorers import MultiTurnScorer, PromptAlignmentScorer, RubricScorer
from otel_scorers.judge.client import JudgeClient
from otel_scorers.pipeline import SessionPolicy


def main(judge_url: str, spans_file: str, exit_timeout_s: str = "30", mode: str = "") -> None:
    provider = TracerProvider()
    out = open(spans_file, "w", encoding="utf-8")  # noqa: SIM115 (closed by the exporter)
    provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter(
        out=out, formatter=lambda span: span.to_json(indent=None) + "\n")))
    judge = JudgeClient("openai/scripted-judge", api_base=judge_url, api_key="k")
    session = mode == "session"
    scorers = ([MultiTurnScorer(judge)] if session
               else [RubricScorer(judge, "- greets"), PromptAlignmentScorer(judge)])
    otel_scorers.install(tracer_provider=provider, logger_provider=object(), scorers=scorers,
                         exit_timeout_s=float(exit_timeout_s),
                         sessions=SessionPolicy(idle_s=3600) if session else None)
    for turn in range(2 if session else 1):
        attributes = {
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "greeter",
            "gen_ai.input.messages": json.dumps([{"role": "user", "content": f"Hi {turn}"}]),
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "content": "Hello!"}])}
        if session:
            attributes["session.id"] = "exit-session"
        with provider.get_tracer("app").start_as_current_span("invoke_agent greeter",
                                                              attributes=attributes):
            pass
    print("ended the agent span; exiting without force_flush", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
