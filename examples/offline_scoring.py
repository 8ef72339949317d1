"""Offline scoring of a dataset of runs, no tracing involved.

    python examples/offline_scoring.py                 # the small built-in dataset
    python examples/offline_scoring.py runs.jsonl      # one run per line, in the seed's shapes
    python examples/offline_scoring.py runs.jsonl -o results.jsonl

Each line is a run such as ``{"input": "...", "system": "...", "output": "...",
"rubric": "- ..."}`` (also the seed's ``{"input": {"inputMessages": [...]}, "output": [...]}``
shapes). Both scorers judge every run concurrently (a few judge calls at a time); the results are
printed and, with ``-o``, written as JSON lines. For spans you already exported, use
``otel-scorers rescore`` instead.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

from otel_scorers import Message, PromptAlignmentScorer, RubricScorer, ScoreResult, ScorerRun

DATASET = [
    {"input": "Summarize our refund policy in one sentence.",
     "system": "You are Acme's support agent. Be concise.",
     "output": "Refunds are possible within 30 days of purchase from Billing > Invoices.",
     "rubric": "- Mentions the 30-day window\n- Is one sentence"},
    {"input": "Translate 'good morning' into French.",
     "system": "You are a translator. Answer with the translation only.",
     "output": "Bonjour.",
     "rubric": "- Gives a correct French translation"},
    {"input": "List three EU regions we host in.",
     "system": "You are Acme's sales assistant.",
     "output": "We host in many places, contact sales for details.",
     "rubric": "- Names three EU regions"},
]


def to_run(index: int, item: dict[str, Any]) -> tuple[ScorerRun, str | None]:
    """A dataset line as a run (plain strings or the seed's shapes) and its rubric."""
    rubric = item.get("rubric")
    if isinstance(item.get("input"), str):
        run = ScorerRun(
            run_id=str(item.get("id", index)),
            input_messages=(Message(role="user", content=item["input"]),),
            system_messages=((Message(role="system", content=item["system"]),)
                             if item.get("system") else ()),
            output=(Message(role="assistant", content=item["output"]),))
    else:
        run = ScorerRun.coerce(item)
    return run, rubric


async def score_all(items: list[dict[str, Any]], concurrency: int
                    ) -> list[tuple[ScorerRun, list[ScoreResult]]]:
    alignment = PromptAlignmentScorer()
    gate = asyncio.Semaphore(concurrency)

    async def one(index: int, item: dict[str, Any]) -> tuple[ScorerRun, list[ScoreResult]]:
        run, rubric = to_run(index, item)
        scorers = [RubricScorer(criteria=rubric), alignment] if rubric else [alignment]
        async with gate:
            results = await asyncio.gather(*(scorer.arun(run) for scorer in scorers))
        return run, list(results)

    return await asyncio.gather(*(one(i, item) for i, item in enumerate(items)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", nargs="?", help="JSON lines of runs (default: built-in)")
    parser.add_argument("-o", "--output", help="write results as JSON lines")
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    items = ([json.loads(line) for line in Path(args.dataset).read_text().splitlines()
              if line.strip()] if args.dataset else DATASET)
    scored = asyncio.run(score_all(items, args.concurrency))
    lines = []
    for run, results in scored:
        summary = "  ".join(
            f"{r.scorer}={'error:' + r.error.type if r.error else f'{r.score:g} {r.label}'}"
            for r in results)
        print(f"run {run.run_id}: {summary}")
        lines.extend(json.dumps({"run": run.run_id, **r.to_dict()}) for r in results)
    judged = [r for _, results in scored for r in results if r.error is None]
    for name in sorted({r.scorer for r in judged}):
        values = [r.score / r.scale for r in judged if r.scorer == name and r.score is not None]
        print(f"mean {name}: {sum(values) / len(values):.2f} over {len(values)} runs")
    if args.output:
        Path(args.output).write_text("\n".join(lines) + "\n")
        print(f"results written to {args.output}")


if __name__ == "__main__":
    main()
