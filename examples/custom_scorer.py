"""A custom scorer next to the built-in ones, in the same live pipeline.

    python examples/custom_scorer.py

A scorer is any object with ``name``, ``run(run)`` and ``async arun(run)``; subclassing
``BaseScorer`` and writing one coroutine, ``score``, gives the rest (input errors become error
results, never exceptions). This one needs no judge: it checks that an answer cites a source
(a URL or a "[n]" reference) and stays under a word limit, and reports both like the built-in
scorers do, so its results become evaluation spans, events and metrics too.
"""

from __future__ import annotations

import json
import re

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_scorers import BaseScorer, RubricScorer, ScoreResult, ScorerRun
from otel_scorers.pipeline import ScoringSpanProcessor


class CitationScorer(BaseScorer):
    """1.0 when the answer cites a source and stays under ``max_words``; 0.5 for one of the
    two; 0 for neither."""

    name = "citations"

    def __init__(self, max_words: int = 80) -> None:
        self.max_words = max_words

    async def score(self, run: ScorerRun) -> ScoreResult:
        answer = run.response
        cites = bool(re.search(r"https?://\S+|\[\d+\]", answer))
        short = len(answer.split()) <= self.max_words
        score = (cites + short) / 2
        label = "pass" if score == 1.0 else "fail"
        reason = (f"{'Cites' if cites else 'Does not cite'} a source; "
                  f"{len(answer.split())} words (limit {self.max_words}).")
        return ScoreResult(run_id=run.run_id, scorer=self.name, score=score, label=label,
                           passed=score == 1.0, reason=reason)


def messages(role: str, text: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}])


def main() -> None:
    provider = TracerProvider()
    exported = InMemorySpanExporter()
    scoring = ScoringSpanProcessor(
        [CitationScorer(max_words=40), RubricScorer(criteria="- Answers the question asked")],
        tracer_provider=provider, events=False)
    provider.add_span_processor(scoring)
    provider.add_span_processor(SimpleSpanProcessor(exported))
    tracer = provider.get_tracer("acme.research")
    for question, answer in [
        ("What is the boiling point of water at sea level?",
         "100 °C at 1 atm, see https://en.wikipedia.org/wiki/Boiling_point."),
        ("Who wrote Dubliners?", "James Joyce wrote it."),
    ]:
        with tracer.start_as_current_span("invoke_agent researcher", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "researcher",
                "gen_ai.input.messages": messages("user", question),
                "gen_ai.output.messages": messages("assistant", answer)}):
            pass
    scoring.force_flush(300_000)
    for span in exported.get_finished_spans():
        if span.name == "gen_ai.evaluation citations":
            attrs = span.attributes or {}
            print(f"citations: {attrs['gen_ai.evaluation.score.value']:g} "
                  f"{attrs['gen_ai.evaluation.score.label']} - "
                  f"{attrs['gen_ai.evaluation.explanation']}")
    print("decisions:", json.dumps(scoring.stats()))
    provider.shutdown()


if __name__ == "__main__":
    main()
