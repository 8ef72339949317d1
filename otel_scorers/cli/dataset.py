"""``otel-scorers score --dataset FILE.jsonl``: a dataset scored offline, as DeepEval and Mastra
users evaluate one.

Each line is a record ``{"input": ..., "output": ..., "system"?: ..., "rubric"?: ...}`` (strings
or the message shapes ``score --run`` takes; a record's ``rubric`` is its own, for a rubric
scorer built without criteria). Results are JSON lines, one per record, with its line number;
a summary table follows: the mean score, the pass rate, and for a rubric the failure rate of
each criterion. ``--fail-under`` checks the mean (exit 1 below it); a judge error on any record
also exits 1, since the mean would leave it out.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from otel_scorers import background_loop
from otel_scorers.cli.errors import UsageProblem
from otel_scorers.errors import ConfigError
from otel_scorers.scorers.base import BaseScorer
from otel_scorers.scorers.cases import json_lines
from otel_scorers.scorers.result import ScoreResult
from otel_scorers.scorers.rubric import RubricAnalysis
from otel_scorers.scorers.run import ScorerRun

__all__ = ["Summary", "read_dataset", "score_dataset"]

_KEYS = {"input", "output", "system", "rubric", "id"}


def read_dataset(path: Path) -> list[tuple[int, ScorerRun]]:
    """(line number, run) for every record; a bad record is a one-line usage error."""
    runs: list[tuple[int, ScorerRun]] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageProblem(f"cannot read the dataset {path}: {exc}") from None
    try:
        records = list(json_lines(lines, origin=str(path)))
    except ConfigError as exc:
        raise UsageProblem(str(exc)) from None
    for number, record in records:
        if not isinstance(record, dict) or "output" not in record:
            raise UsageProblem(f"{path}, line {number}: a record is an object with at least "
                               "'output' (and 'input', 'system', 'rubric')")
        unknown = set(record) - _KEYS
        if unknown:
            raise UsageProblem(f"{path}, line {number}: unknown keys {sorted(unknown)} "
                               f"(expected {sorted(_KEYS)})")
        shape = {"input": record.get("input"), "output": record["output"],
                 "system": record.get("system"),
                 "requestContext": {"rubric": record["rubric"]} if "rubric" in record else {}}
        if "id" in record:
            shape["runId"] = str(record["id"])
        try:
            runs.append((number, ScorerRun.coerce(shape)))
        except (TypeError, ValueError) as exc:
            raise UsageProblem(f"{path}, line {number}: {exc}") from None
    if not runs:
        raise UsageProblem(f"the dataset {path} has no records")
    return runs


@dataclass
class Summary:
    """Totals over the dataset's results."""

    records: int = 0
    scored: int = 0
    skipped: int = 0
    errors: int = 0
    scale: float = 1.0
    scores: list[float] = field(default_factory=list)
    passed: list[bool] = field(default_factory=list)
    criteria: dict[str, list[bool]] = field(default_factory=dict)  # description -> satisfied

    def add(self, result: ScoreResult) -> None:
        self.records += 1
        self.scale = result.scale
        if result.error is not None:
            self.errors += 1
            return
        if result.skipped is not None or result.score is None:
            self.skipped += 1
            return
        self.scored += 1
        self.scores.append(result.score)
        if result.passed is not None:
            self.passed.append(result.passed)
        if isinstance(result.analysis, RubricAnalysis):
            for criterion in result.analysis.criteria:
                self.criteria.setdefault(criterion.description, []).append(criterion.satisfied)

    @property
    def mean(self) -> float | None:
        return sum(self.scores) / len(self.scores) if self.scores else None

    @property
    def pass_rate(self) -> float | None:
        return sum(self.passed) / len(self.passed) if self.passed else None


def score_dataset(scorer: BaseScorer, runs: Sequence[tuple[int, ScorerRun]], out: IO[str], *,
                  concurrency: int, advance: Callable[[], None] | None = None) -> Summary:
    """Score every run (``concurrency`` at a time), writing each result line as it comes."""
    summary = Summary()

    async def everything() -> None:
        gate = asyncio.Semaphore(concurrency)

        async def one(number: int, run: ScorerRun) -> None:
            async with gate:
                result = (await scorer.arun(run)).reported()
            summary.add(result)
            out.write(json.dumps({"line": number, **result.to_dict()}, ensure_ascii=False,
                                 default=str) + "\n")
            out.flush()
            if advance is not None:
                advance()

        await asyncio.gather(*(one(number, run) for number, run in runs))

    background_loop.run_sync(everything())
    return summary


def summary_table(summary: Summary, name: str) -> Any:
    """The summary as a rich table (printed to stderr, beside the JSON lines)."""
    from rich.table import Table

    table = Table(title=f"{name}: {summary.records} records")
    table.add_column("measure")
    table.add_column("value", justify="right")
    mean = summary.mean
    table.add_row("mean score", "-" if mean is None else f"{mean:.3f} / {summary.scale:g}")
    rate = summary.pass_rate
    table.add_row("pass rate", "-" if rate is None else f"{rate:.1%}")
    table.add_row("scored / skipped / errors",
                  f"{summary.scored} / {summary.skipped} / {summary.errors}")
    for description, verdicts in summary.criteria.items():
        failed = verdicts.count(False) / len(verdicts)
        table.add_row(f"fails: {description}", f"{failed:.1%}")
    return table
