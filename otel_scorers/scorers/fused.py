"""Scorers judging one run together: the scorers that share a judge get one fused judge call
(:mod:`otel_scorers.judge.fused` says how the call is built, split and failed).

:func:`call_batches` makes the batches for a run's scorers. Each scorer then runs in a task
of its own with a :class:`~otel_scorers.judge.fused.Member` of its batch, given explicitly:
:func:`judged` asks the scorer for its question (``LLMScorer.ask``), hands it to the batch,
and turns the answer into the scorer's result. A task that decides not to ask after all (a
cache hit, an identical evaluation in flight) calls ``member.batch.leave(member)``, so the
batch never waits for it. :func:`score_together` does all of it for a set of scorers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping

from otel_scorers.errors import JudgeError, ScorerInputError
from otel_scorers.judge.fused import CallBatch, Member
from otel_scorers.scorers.base import LLMScorer, Scorer
from otel_scorers.scorers.result import ScoreResult
from otel_scorers.scorers.run import ScorerRun

__all__ = ["CallBatch", "Member", "call_batches", "judged", "score_together"]


def call_batches(named: Iterable[tuple[str, object]]) -> dict[str, CallBatch]:
    """One batch per judge shared by two or more of the ``(name, scorer)`` pairs, by name."""
    groups: dict[str, list[str]] = {}
    for name, scorer in named:
        judge = getattr(scorer, "judge", None)
        key = getattr(judge, "fusion_key", None)
        if isinstance(scorer, LLMScorer) and isinstance(key, str):
            groups.setdefault(key, []).append(name)
    batches: dict[str, CallBatch] = {}
    for key, names in groups.items():
        if len(names) > 1:
            batch = CallBatch(len(names), key)
            batches.update(dict.fromkeys(names, batch))
    return batches


async def judged(scorer: Scorer, run: ScorerRun, member: Member | None = None) -> ScoreResult:
    """``scorer``'s result for ``run``: judged alone, or (``member``) as one part of its
    batch's call. Input and judge failures are results, as with ``arun``; the member has
    asked or left when this returns."""
    if member is None or not isinstance(scorer, LLMScorer):
        if member is not None:
            member.batch.leave(member)
        return await scorer.arun(run)
    try:
        asked = scorer.ask(run)
        if isinstance(asked, ScoreResult):
            return asked
        return asked.answer(await member.batch.ask(member, scorer.judge, asked.request))
    except (ScorerInputError, JudgeError) as error:
        return scorer.error_result(run, error)
    finally:
        member.batch.leave(member)


async def score_together(scorers: Mapping[str, Scorer], run: ScorerRun
                         ) -> dict[str, ScoreResult]:
    """Every scorer's result for ``run``, by name; scorers sharing a judge share one call."""
    batches = call_batches(scorers.items())
    names = list(scorers)
    results = await asyncio.gather(*(
        judged(scorers[name], run, batches[name].join() if name in batches else None)
        for name in names))
    return dict(zip(names, results, strict=True))
