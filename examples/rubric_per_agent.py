"""A rubric per agent: one rubric scorer, each agent judged against its own checklist.

    python examples/rubric_per_agent.py

The processor's ``rubrics`` map agent names (``gen_ai.agent.name``) to rubrics; ``"*"`` covers
any other agent, and an ``otel_scorers.rubric`` attribute on a span wins over both. The judge is
OTEL_SCORERS_JUDGE_MODEL (any litellm model string), or the embedded local model when unset.
"""

from __future__ import annotations

import json

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_scorers import RubricScorer
from otel_scorers.pipeline import ScoringSpanProcessor

RUBRICS = {
    "billing-bot": "- Quotes the invoice number\n- States the refund deadline",
    "support-bot": "- Gives concrete steps\n- Says where to click",
    "*": "- Answers the question asked",
}
RUNS = [
    ("billing-bot", "Can I get my money back for invoice INV-1042?",
     "Yes: invoice INV-1042 can be refunded until 30 June from Billing > Invoices."),
    ("support-bot", "How do I reset my password?",
     "Open Settings > Security and click 'Reset password'."),
    ("sales-bot", "Do you have an EU region?", "Yes, Frankfurt and Dublin."),
    # a span can carry its own rubric, which beats the map
    ("support-bot", "Is there a dark mode?", "Yes.",),
]


def messages(role: str, text: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}])


def main() -> None:
    provider = TracerProvider()
    evaluations = InMemorySpanExporter()
    scoring = ScoringSpanProcessor([RubricScorer()], rubrics=RUBRICS, tracer_provider=provider,
                                   events=False)
    provider.add_span_processor(scoring)
    provider.add_span_processor(SimpleSpanProcessor(evaluations))
    tracer = provider.get_tracer("acme.agents")
    for index, (agent, question, answer) in enumerate(RUNS):
        attributes = {
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent,
            "gen_ai.input.messages": messages("user", question),
            "gen_ai.output.messages": messages("assistant", answer),
        }
        if index == 3:
            attributes["otel_scorers.rubric"] = "- Says how to switch it on"
        with tracer.start_as_current_span(f"invoke_agent {agent}", attributes=attributes):
            pass
    scoring.force_flush(300_000)
    for span in sorted(evaluations.get_finished_spans(), key=lambda s: s.start_time or 0):
        if not span.name.startswith("gen_ai.evaluation"):
            continue
        attrs = span.attributes or {}
        criteria = attrs.get("otel_scorers.criteria.ids", ())
        verdicts = ", ".join(
            f"{c}={'yes' if attrs.get(f'otel_scorers.criterion.{c}.satisfied') else 'no'}"
            for c in criteria)
        print(f"{attrs.get('gen_ai.agent.name')}: {attrs.get('gen_ai.evaluation.score.label')}"
              f" ({verdicts})")
    print("decisions:", json.dumps(scoring.stats()))
    provider.shutdown()


if __name__ == "__main__":
    main()
