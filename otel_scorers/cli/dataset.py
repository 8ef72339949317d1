"""``otel-scorers score --dataset FILE.jsonl``: a dataset scored offline, as DeepEval and Mastra
users evaluate one.

Each line is a record ``{"input": ..., "output": ..., "system"?: ..., "rubric"?: ...}`` (strings
or the message shapes ``score --run`` takes; a record's ``rubric`` is its own, for a rubric
scorer built without criteria). Results are JSON lines, one per record, with its line number;
a summary table follows: the mean score, the pass rate, and for a rubric the failure rate of
each criterion. ``--fail-under`` checks the mean (exit 1 below it); a judge error on any record
also exits 1, since the mean would leave it out. The file is streamed: read once to check
every record (a bad one is a usage error before any judge call), then again record by record
as slots free up, so memory does not grow with it; a line may hold at most 16 MB.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from otel_scorers import background_loop
from otel_scorers.cli.errors import UsageProblem
from otel_scorers.errors import ConfigError
from otel_scorers.scorers.analysis import rendering
from otel_scorers.scorers.base import BaseScorer
from otel_scorers.scorers.cases import json_lines, read_lines
from otel_scorers.scorers.result import ScoreResult
from otel_scorers.scorers.run import ScorerRun

__all__ = ["Dataset", "OutputClosed", "Summary", "read_dataset", "score_dataset"]

_KEYS = {"input", "output", "system", "rubric", "id", "steps", "tools", "context",
         "expected_trajectory", "turns", "session_id"}
#: Record keys passed to the scorers in the run's request context.
_CONTEXT_KEYS = ("rubric", "context", "expected_trajectory")


class Dataset:
    """A dataset file, checked whole in one streaming pass (a bad record is a usage error
    before anything is judged), then read again record by record: memory does not grow with
    the file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.records = sum(1 for _ in self)
        if not self.records:
            raise UsageProblem(f"the dataset {path} has no records")

    def __len__(self) -> int:
        return self.records

    def __iter__(self) -> Iterator[tuple[int, ScorerRun]]:
        try:
            for number, record in json_lines(read_lines(self.path, "dataset"),
                                             origin=str(self.path)):
                yield number, _run_of(self.path, number, record)
        except ConfigError as exc:
            raise UsageProblem(str(exc)) from None


def read_dataset(path: Path) -> Dataset:
    """The dataset's (line number, run) records; a bad record is a one-line usage error."""
    return Dataset(path)


def _run_of(path: Path, number: int, record: Any) -> ScorerRun:
    if not isinstance(record, dict) or ("output" not in record and "turns" not in record):
        raise UsageProblem(f"{path}, line {number}: a record is an object with at least "
                           "'output' (and 'input', 'system', 'rubric', 'steps', 'tools', "
                           "'context', 'expected_trajectory'), or a conversation's 'turns' "
                           "([{user, assistant}], and 'session_id')")
    unknown = set(record) - _KEYS
    if unknown:
        raise UsageProblem(f"{path}, line {number}: unknown keys {sorted(unknown)} "
                           f"(expected {sorted(_KEYS)})")
    shape = {"input": record.get("input"), "output": record.get("output"),
             "system": record.get("system"), "steps": record.get("steps"),
             "tools": record.get("tools"), "turns": record.get("turns"),
             "session_id": record.get("session_id"),
             "requestContext": {key: record[key] for key in _CONTEXT_KEYS if key in record}}
    if "id" in record:
        shape["runId"] = str(record["id"])
    try:
        return ScorerRun.coerce(shape)
    except (TypeError, ValueError) as exc:
        raise UsageProblem(f"{path}, line {number}: {exc}") from None


@dataclass
class Summary:
    """Totals over the dataset's results."""

    records: int = 0
    scored: int = 0
    skipped: int = 0
    errors: int = 0
    scale: float = 1.0
    total: float = 0.0
    passes: int = 0
    verdicts: int = 0  # results with a pass verdict
    #: description -> [failed, judged]: counts, so that memory does not grow with the records
    criteria: dict[str, list[int]] = field(default_factory=dict)

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
        self.total += result.score
        if result.passed is not None:
            self.verdicts += 1
            self.passes += bool(result.passed)
        for key, satisfied in rendering(result.analysis).summary_rows():
            counts = self.criteria.setdefault(key, [0, 0])
            counts[0] += not satisfied
            counts[1] += 1

    @property
    def mean(self) -> float | None:
        return self.total / self.scored if self.scored else None

    @property
    def pass_rate(self) -> float | None:
        return self.passes / self.verdicts if self.verdicts else None


def score_dataset(scorer: BaseScorer, runs: Iterable[tuple[int, ScorerRun]], out: IO[str], *,
                  concurrency: int, advance: Callable[[], None] | None = None) -> Summary:
    """Score every run (``concurrency`` at a time, the next record read only when a slot is
    free), writing each result line as it comes."""
    summary = Summary()

    closed: list[OSError] = []

    async def everything() -> None:
        gate = asyncio.Semaphore(concurrency)
        tasks: set[asyncio.Task[None]] = set()

        async def one(number: int, run: ScorerRun) -> None:
            try:
                result = (await scorer.arun(run)).reported()
            finally:
                gate.release()
            if closed:
                return
            summary.add(result)
            try:
                out.write(json.dumps({"line": number, **result.to_dict()}, ensure_ascii=False,
                                     default=str, allow_nan=False) + "\n")
                out.flush()
            except OSError as exc:  # the reader went away (`| head`): stop judging
                closed.append(exc)
                for other in tasks:
                    other.cancel()
                return
            if advance is not None:
                advance()

        try:
            for number, run in runs:
                await gate.acquire()
                if closed:
                    break
                task = asyncio.get_running_loop().create_task(one(number, run))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        finally:
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)

    background_loop.run_sync(everything())
    if closed:
        raise OutputClosed(summary.records) from closed[0]
    return summary


class OutputClosed(Exception):
    """The results' reader went away (a closed pipe): scoring stopped after ``records``."""

    def __init__(self, records: int) -> None:
        super().__init__(f"the output was closed: stopped after {records} record(s)")
        self.records = records


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
    for description, (failed, judged) in summary.criteria.items():
        table.add_row(f"fails: {description}", f"{failed / judged:.1%}")
    return table
