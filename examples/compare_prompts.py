"""Compare prompt variants and agents by their prompt-alignment scores.

    python examples/compare_prompts.py

The seed's prompt-engineering and multi-agent use cases: the same tasks answered under two
system prompts (or by two agents) are judged for alignment with the user's request and the
system prompt, and ranked by mean score. The answers here are recorded ones; in practice they
come from your agent (or from spans: score them live and compare in Grafana by agent).
"""

from __future__ import annotations

import asyncio
import statistics

from otel_scorers import Message, PromptAlignmentScorer, ScoreResult, ScorerRun

TASKS = ["Give me three tips to speed up a slow laptop.",
         "Explain what a VPN does in two sentences.",
         "Suggest a name for a bakery that sells sourdough."]
VARIANTS = {
    "concise-v2": ("Answer in as few words as the request allows. Follow its format exactly.", [
        "1. Remove startup apps. 2. Free disk space. 3. Add RAM.",
        "A VPN encrypts your traffic and routes it through another server. Sites then see "
        "that server's address instead of yours.",
        "Rise & Crumb.",
    ]),
    "friendly-v1": ("Be warm and thorough; explain your reasoning.", [
        "Great question! Laptops slow down for many reasons, and honestly there are lots of "
        "things you could try, such as restarting it now and then.",
        "A VPN, or virtual private network, is a technology with a long history that many "
        "companies use, and it can be helpful in various ways depending on your needs, "
        "for instance when travelling, and there is much more to say about it.",
        "How about 'The Friendly Loaf'? Or 'Sunrise Breads'? Or 'Crust & Co.'? Naming is "
        "personal, so take your time!",
    ]),
}


async def judge_variant(scorer: PromptAlignmentScorer, system: str, answers: list[str]
                        ) -> list[ScoreResult]:
    runs = [ScorerRun(run_id=f"task-{i}",
                      input_messages=(Message(role="user", content=task),),
                      system_messages=(Message(role="system", content=system),),
                      output=(Message(role="assistant", content=answer),))
            for i, (task, answer) in enumerate(zip(TASKS, answers, strict=True))]
    return list(await asyncio.gather(*(scorer.arun(run) for run in runs)))


async def main_async() -> None:
    scorer = PromptAlignmentScorer(evaluation_mode="both")
    ranking = []
    for name, (system, answers) in VARIANTS.items():
        results = await judge_variant(scorer, system, answers)
        scores = [r.score / r.scale for r in results if r.score is not None]
        errors = sum(r.error is not None for r in results)
        mean = statistics.fmean(scores) if scores else float("nan")
        ranking.append((mean, name, errors))
        for task, result in zip(TASKS, results, strict=True):
            shown = (f"error {result.error.type}" if result.error
                     else f"{result.score:g} {result.label}")
            print(f"{name:12} {shown:22} {task}")
    print()
    for place, (mean, name, errors) in enumerate(sorted(ranking, reverse=True), start=1):
        print(f"{place}. {name}: mean alignment {mean:.2f}"
              + (f" ({errors} not scored)" if errors else ""))


if __name__ == "__main__":
    asyncio.run(main_async())
