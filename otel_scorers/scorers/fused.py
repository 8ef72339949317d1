"""Scorers judging one run together: the scorers that share a judge get one fused judge call
(:mod:`otel_scorers.judge.fused` says how the call is built, split and failed).

Who asks is decided before anything is asked: :func:`fusion_groups` puts the LLM scorers that
share a judge (the same fusion key) in one group and every other scorer alone, and
:func:`judge_together` judges one group: each scorer renders its question
(``LLMScorer.ask``); the questions that can share a call (no few-shot examples: they belong to
their own prompt) go out as one call, any other alone; each answer becomes its scorer's result.
A scorer that needs no call (a rubric with no rubric for the run) or cannot judge the run (bad
input) has its result without one. Input and judge failures are results, as with ``arun``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any

from otel_scorers.errors import JudgeError, ScorerInputError
from otel_scorers.judge.fused import judge_fused
from otel_scorers.scorers.base import LLMScorer, Question, Scorer
from otel_scorers.scorers.result import ScoreResult
from otel_scorers.scorers.run import ScorerRun

__all__ = ["fusion_groups", "judge_together", "score_together"]


def fusion_groups(named: Iterable[tuple[str, object]]) -> list[list[str]]:
    """The names of ``(name, scorer)`` pairs in groups that are judged together: the LLM
    scorers sharing a judge in one group (in order of their first member), every other
    scorer in a group of its own."""
    groups: dict[str, list[str]] = {}
    for name, scorer in named:
        key = getattr(getattr(scorer, "judge", None), "fusion_key", None)
        if isinstance(scorer, LLMScorer) and isinstance(key, str):
            groups.setdefault(key, []).append(name)
        else:
            groups[f"alone:{name}"] = [name]
    return list(groups.values())


async def judge_together(scorers: Mapping[str, Scorer], run: ScorerRun
                         ) -> dict[str, ScoreResult]:
    """Every scorer's result for ``run``; the LLM scorers among them that share a judge
    (one group of :func:`fusion_groups`) share one call."""
    if len(scorers) == 1:
        ((name, scorer),) = scorers.items()
        return {name: await scorer.arun(run)}
    results: dict[str, ScoreResult] = {}
    fusable: dict[str, tuple[LLMScorer, Question]] = {}
    alone: dict[str, tuple[LLMScorer, Question]] = {}
    for name, scorer in scorers.items():
        if not isinstance(scorer, LLMScorer):
            results[name] = await scorer.arun(run)
            continue
        try:
            asked = scorer.question_for(run)
        except (ScorerInputError, JudgeError) as error:
            results[name] = scorer.error_result(run, error)
            continue
        if isinstance(asked, ScoreResult):
            results[name] = asked
        elif asked.request.examples:
            alone[name] = (scorer, asked)
        else:
            fusable[name] = (scorer, asked)
    if len(fusable) == 1:
        alone.update(fusable)
        fusable = {}
    calls = [_fused(fusable, run)] if fusable else []
    calls += [_alone(name, scorer, question, run) for name, (scorer, question) in alone.items()]
    for done in await asyncio.gather(*calls):
        results.update(done)
    return {name: results[name] for name in scorers}


async def _alone(name: str, scorer: LLMScorer, question: Question, run: ScorerRun
                 ) -> dict[str, ScoreResult]:
    try:
        return {name: question.answer(await scorer.judge.judge(question.request))}
    except (ScorerInputError, JudgeError) as error:
        return {name: scorer.error_result(run, error)}


async def _fused(asked: Mapping[str, tuple[LLMScorer, Question]], run: ScorerRun
                 ) -> dict[str, ScoreResult]:
    """One call for the questions of ``asked`` (they share one judge)."""
    client = next(iter(asked.values()))[0].judge
    try:
        outcomes: list[Any] = list(await judge_fused(
            client, [question.request for _, question in asked.values()]))
    except JudgeError as error:  # the call itself failed: every part with it
        outcomes = [error] * len(asked)
    out: dict[str, ScoreResult] = {}
    for (name, (scorer, question)), outcome in zip(asked.items(), outcomes, strict=True):
        try:
            if isinstance(outcome, BaseException):
                raise outcome
            out[name] = question.answer(outcome)
        except (ScorerInputError, JudgeError) as error:
            out[name] = scorer.error_result(run, error)
    return out


async def score_together(scorers: Mapping[str, Scorer], run: ScorerRun
                         ) -> dict[str, ScoreResult]:
    """Every scorer's result for ``run``, by name; scorers sharing a judge share one call."""
    groups = fusion_groups(scorers.items())
    done = await asyncio.gather(*(judge_together({name: scorers[name] for name in group}, run)
                                  for group in groups))
    merged = {name: result for part in done for name, result in part.items()}
    return {name: merged[name] for name in scorers}
