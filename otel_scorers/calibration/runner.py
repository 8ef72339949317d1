"""Labelled cases judged by the scorers, concurrently, and the report built from them.

Each case is judged by a scorer of its kind built for it: a rubric scorer with the case's
criteria, a prompt-alignment scorer in the case's mode, all sharing one judge client (its
options: model, base URL, key, timeouts, redaction). With few-shot ``examples`` the scorers
show them to the judge; :func:`compare` runs the cases without and with them, leaving out the
cases that are themselves examples (held apart), so the gain is measured on cases the judge
has not been shown.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

from otel_scorers import background_loop, registry
from otel_scorers.calibration.metrics import Outcome, differences, summarize
from otel_scorers.judge.client import JudgeClient
from otel_scorers.scorers.base import LLMScorer
from otel_scorers.scorers.cases import LabelledCase
from otel_scorers.scorers.examples import FewShot

__all__ = ["calibrate", "compare", "held_apart", "judge_cases", "judge_each", "scorer_for"]

R = TypeVar("R")


def scorer_for(case: LabelledCase, judge: JudgeClient, examples: FewShot | None) -> LLMScorer:
    """The scorer of the case's kind, built by its registry row for the case (the case's
    options that the type takes: its criteria, its mode, its context), with the examples."""
    row = registry.scorer_type(case.scorer)
    given = case.options.model_dump(exclude_none=True)
    options = row.options.model_validate(
        {key: value for key, value in given.items()
         if key in row.options.model_fields and value not in ((), [])})
    scorer: LLMScorer = row.build(row.name, 1.0, options, judge)
    if examples is not None:
        scorer.examples = examples
    return scorer


def judge_each(cases: Sequence[LabelledCase], one: Callable[[LabelledCase], Awaitable[R]], *,
               concurrency: int = 8, advance: Callable[[], None] | None = None) -> list[R]:
    """``one(case)`` for every case on the background loop, ``concurrency`` at a time,
    ``advance`` after each; the results in the order given."""

    async def everything() -> list[R]:
        gate = asyncio.Semaphore(concurrency)

        async def each(case: LabelledCase) -> R:
            async with gate:
                result = await one(case)
            if advance is not None:
                advance()
            return result

        return list(await asyncio.gather(*(each(case) for case in cases)))

    return background_loop.run_sync(everything())


def judge_cases(cases: Sequence[LabelledCase], judge: JudgeClient, *, concurrency: int = 8,
                examples: Mapping[str, FewShot] | None = None,
                advance: Callable[[], None] | None = None) -> list[Outcome]:
    """Every case judged (``concurrency`` calls at a time), in the order given."""
    examples = examples or {}

    async def one(case: LabelledCase) -> Outcome:
        scorer = scorer_for(case, judge, examples.get(case.scorer))
        return Outcome.of(case, await scorer.arun(case.scorer_run()))

    return judge_each(cases, one, concurrency=concurrency, advance=advance)


def calibrate(cases: Sequence[LabelledCase], judge: JudgeClient, *, concurrency: int = 8,
              examples: Mapping[str, FewShot] | None = None,
              advance: Callable[[], None] | None = None) -> dict[str, Any]:
    """The report for ``cases`` (see :func:`otel_scorers.calibration.metrics.summarize`)."""
    outcomes = judge_cases(cases, judge, concurrency=concurrency, examples=examples,
                           advance=advance)
    report = summarize(outcomes)
    report["model"] = judge.model
    if examples:
        report["examples"] = {kind: {"used": list(shot.ids), "dropped": shot.dropped}
                              for kind, shot in examples.items()}
    return report


def held_apart(cases: Sequence[LabelledCase],
               examples: Mapping[str, FewShot]) -> list[LabelledCase]:
    """The cases that are not themselves examples (by id)."""
    shown = {ident for shot in examples.values() for ident in shot.ids}
    return [case for case in cases if case.id not in shown]


def compare(cases: Sequence[LabelledCase], judge: JudgeClient,
            examples: Mapping[str, FewShot], *, concurrency: int = 8,
            advance: Callable[[], None] | None = None) -> dict[str, Any]:
    """The report with the examples (``after``), beside the one without (``before``), both on
    the held-apart cases; the top-level figures are ``after``'s."""
    test = held_apart(cases, examples)
    before = calibrate(test, judge, concurrency=concurrency, advance=advance)
    after = calibrate(test, judge, concurrency=concurrency, examples=examples, advance=advance)
    delta = differences(before, after,
                        ("verdict_agreement", "kappa", "alignment_mae", "band_hit_rate"))
    return {**after, "compare": {"held_apart": len(cases) - len(test), "before": before,
                                 "after": {k: v for k, v in after.items() if k != "results"},
                                 "delta": delta}}
