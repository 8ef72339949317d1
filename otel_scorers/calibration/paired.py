"""Fused judge calls measured: each labelled case judged together with a companion scorer on
the same run, once apart (a call per scorer) and once fused (one call for both), side by side.

Fused calls (``fuse_judge_calls``) happen when both scorers judge the same run with the same
judge. The golden set labels one scorer per run, so each case gets a *companion* of the other
kind, as a deployment running both scorers would judge that run:

- a rubric case's run is also judged for prompt alignment (``both`` mode, which falls back to
  ``user`` without a system prompt, as it does in production);
- a prompt-alignment case's run is also judged against :data:`COMPANION_CRITERIA`, a small
  generic rubric.

Only the labelled half is held against the labels: agreement, kappa, MAE and band hits are
the labelled scorer's in both passes. Calls, tokens, cost and latency count both scorers (a
fused call's usage is split between them; its call is counted once), and the companion's
failures are counted apart (``companion_errors``). ``changed`` lists the cases whose labelled
result differs between the passes: with a judge that answers the same question the same way
(temperature 0), those are what fusing changed; with one that varies from call to call, part
of them is that variation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from otel_scorers.calibration.metrics import Outcome, differences, summarize
from otel_scorers.calibration.runner import judge_each, scorer_for
from otel_scorers.judge.client import JudgeClient
from otel_scorers.scorers.alignment import PromptAlignmentScorer
from otel_scorers.scorers.base import LLMScorer
from otel_scorers.scorers.cases import LabelledCase
from otel_scorers.scorers.fused import score_together
from otel_scorers.scorers.result import ScoreResult
from otel_scorers.scorers.rubric import Criterion, RubricScorer

__all__ = ["COMPANION_CRITERIA", "companion_for", "compare_fused", "judge_pairs"]

#: The rubric judged beside each prompt-alignment case (its verdicts are not labelled).
COMPANION_CRITERIA = (
    Criterion("The response addresses what the user asked for", id="companion-addresses"),
    Criterion("The response states nothing that contradicts the conversation",
              id="companion-consistent"),
    Criterion("The response is clearly organized", id="companion-organized", required=False),
)

#: The figures compared between the passes: (key, True when higher is better).
COMPARED = (("verdict_agreement", True), ("kappa", True), ("pass_agreement", True),
            ("alignment_mae", False), ("band_hit_rate", True),
            ("dimension_band_hit_rate", True))


def companion_for(case: LabelledCase, judge: JudgeClient) -> LLMScorer:
    """The scorer of the other kind that judges the case's run beside the labelled one."""
    if case.scorer == "rubric":
        return PromptAlignmentScorer(judge, evaluation_mode="both")
    return RubricScorer(judge, COMPANION_CRITERIA)


def judge_pairs(cases: Sequence[LabelledCase], judge: JudgeClient, *, fused: bool,
                concurrency: int = 8, advance: Callable[[], None] | None = None
                ) -> tuple[list[Outcome], list[ScoreResult]]:
    """Every case judged with its companion (``concurrency`` runs at a time), in one fused
    call or in a call each; the labelled outcomes and the companion results, in case order."""

    async def pair(case: LabelledCase) -> tuple[Outcome, ScoreResult]:
        run = case.scorer_run()
        scorers = {"labelled": scorer_for(case, judge, None),
                   "companion": companion_for(case, judge)}
        if fused:
            results = await score_together(scorers, run)
            labelled, other = results["labelled"], results["companion"]
        else:
            labelled, other = await asyncio.gather(scorers["labelled"].arun(run),
                                                   scorers["companion"].arun(run))
        return Outcome.of(case, labelled), other

    pairs = judge_each(cases, pair, concurrency=concurrency, advance=advance)
    return [outcome for outcome, _ in pairs], [other for _, other in pairs]


def compare_fused(cases: Sequence[LabelledCase], judge: JudgeClient, *, concurrency: int = 8,
                  advance: Callable[[], None] | None = None) -> dict[str, Any]:
    """The report of the fused pass, with both passes' figures under ``fused``: ``apart``,
    ``fused``, their ``delta``, the ``changed`` case ids, the figures that are ``worse`` fused
    and ``no_loss`` (none: no agreement figure lower, no error higher, no more labelled or
    companion judgements failed)."""
    apart_outcomes, apart_companions = judge_pairs(cases, judge, fused=False,
                                                   concurrency=concurrency, advance=advance)
    fused_outcomes, fused_companions = judge_pairs(cases, judge, fused=True,
                                                   concurrency=concurrency, advance=advance)
    apart = summarize(apart_outcomes, companions=apart_companions)
    fused = summarize(fused_outcomes, companions=fused_companions)
    delta: dict[str, Any] = differences(apart, fused, (key for key, _ in COMPARED))
    delta.update(errors=fused["errors"] - apart["errors"],
                 companion_errors=fused["companion_errors"] - apart["companion_errors"],
                 calls=fused["calls"] - apart["calls"],
                 prompt_tokens=fused["tokens"]["prompt"] - apart["tokens"]["prompt"])
    worse = [key for key, higher in COMPARED
             if delta[key] is not None and (delta[key] < 0 if higher else delta[key] > 0)]
    worse += [key for key in ("errors", "companion_errors") if delta[key] > 0]
    changed = [a.case.id for a, f in zip(apart_outcomes, fused_outcomes, strict=True)
               if _judged(a) != _judged(f)]
    brief = {"apart": _brief(apart), "fused": _brief(fused), "delta": delta,
             "changed": changed, "worse": worse, "no_loss": not worse}
    return {**fused, "model": judge.model, "fused": brief}


def _judged(outcome: Outcome) -> tuple[Any, ...]:
    """What the judge said about the labelled half, to see whether a case changed."""
    error = outcome.result.error
    return (error.type if error is not None else None,
            tuple(judged for _, _, judged in outcome.verdicts), outcome.judged_pass,
            None if outcome.normalized is None else round(outcome.normalized, 3))


def _brief(report: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in report.items()
            if key not in ("results", "worst", "domains", "per_criterion")}
