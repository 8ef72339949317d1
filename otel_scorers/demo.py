"""``otel-scorers demo``: score a handful of example agent runs with both scorers.

Uses the judge configured by ``OTEL_SCORERS_JUDGE_MODEL`` (and ``_API_BASE``/``_API_KEY``), or the
embedded local model when none is set. The local model is tiny: its verdicts are illustrative
only; the demo shows the plumbing, the result shape and the timing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from otel_scorers.judge.client import DEFAULT_LOCAL_MODEL, JudgeClient
from otel_scorers.scorers.alignment import PromptAlignmentScorer
from otel_scorers.scorers.result import ScoreResult
from otel_scorers.scorers.rubric import RubricAnalysis, RubricScorer
from otel_scorers.scorers.run import ScorerRun

__all__ = ["DEMO_TASKS", "DemoTask", "run_demo"]


@dataclass(frozen=True)
class DemoTask:
    agent: str
    system: str
    prompt: str
    answer: str
    rubric: str
    quality: str  # what the example was written to be: "good" or "bad"


DEMO_TASKS: tuple[DemoTask, ...] = (
    DemoTask("support-bot", "You are a polite support agent. Answer in at most three sentences.",
             "How do I reset my password?",
             "Open Settings, choose Security, then click 'Reset password' and follow the e-mail "
             "link. The link expires after one hour.",
             "- Explains where the reset option is\n- Mentions the e-mail link", "good"),
    DemoTask("support-bot", "You are a polite support agent. Answer in at most three sentences.",
             "How do I reset my password?",
             "Passwords are important. Many people forget them.",
             "- Explains where the reset option is\n- Mentions the e-mail link", "bad"),
    DemoTask("code-helper", "Always provide a Python code example.",
             "How do I reverse a string?",
             "Use slicing:\n\n```python\ndef reverse(s: str) -> str:\n    return s[::-1]\n```",
             "- Includes a Python code block\n- Uses slicing", "good"),
)


def _row(task: DemoTask, results: list[ScoreResult]) -> list[str]:
    cells = [task.agent, f"{task.prompt} ({task.quality})"]
    for result in results:
        if result.error is not None:
            cells.append(f"[red]error: {result.error.type}[/]")
            continue
        text = f"{result.score:g} {result.label}"
        if isinstance(result.analysis, RubricAnalysis):
            unmet = [c.id for c in result.analysis.criteria if not c.satisfied]
            if unmet:
                text += f"\nunmet: {', '.join(unmet)}"
        cells.append(text)
    latency = sum(r.judge.latency_s for r in results if r.judge is not None)
    cells.append(f"{latency:.1f}s")
    return cells


def run_demo(console: Console | None = None) -> list[list[ScoreResult]]:
    """Score the demo tasks and print a table; returns the results per task."""
    console = console or Console()
    judge = JudgeClient(timeout_s=120)
    if judge.model == DEFAULT_LOCAL_MODEL:
        console.print("[yellow]Judge: the embedded SmolLM2-135M model (no API key needed). It is "
                      "tiny: its verdicts are illustrative only. Set OTEL_SCORERS_JUDGE_MODEL "
                      "(e.g. openai/gpt-5-mini) for real judgements.[/]")
    else:
        console.print(f"Judge: {judge.model}")
    scorers = [RubricScorer(judge), PromptAlignmentScorer(judge)]
    table = Table(title="otel-scorers demo")
    for column in ("agent", "task", "rubric", "prompt alignment", "judge time"):
        table.add_column(column, overflow="fold")
    all_results: list[list[ScoreResult]] = []
    started = time.monotonic()
    with console.status("judging...") as status:
        for index, task in enumerate(DEMO_TASKS, start=1):
            status.update(f"judging run {index}/{len(DEMO_TASKS)} ({task.agent})...")
            run = ScorerRun.coerce({"input": task.prompt, "system": task.system,
                                    "output": task.answer,
                                    "requestContext": {"rubric": task.rubric}})
            results = [scorer.run(run) for scorer in scorers]
            all_results.append(results)
            table.add_row(*_row(task, results))
    console.print(table)
    errors = sum(1 for results in all_results for r in results if r.error is not None)
    console.print(f"Scored {len(DEMO_TASKS)} runs with 2 scorers in "
                  f"{time.monotonic() - started:.1f}s; {errors} judge error(s).")
    return all_results
