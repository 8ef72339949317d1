"""Agreement between a judge and labelled cases: per-case outcomes and the report's figures.

- **Verdict agreement**: over every rubric criterion verdict of the judged cases, the share where
  the judge said what the label says. **Cohen's kappa** corrects it for chance:
  ``(p_o - p_e) / (1 - p_e)`` with ``p_e`` from how often each side says "satisfied" (``None``
  when ``p_e`` is 1: both sides always said the same thing, so chance explains everything).
- **Pass agreement**: the same for the run's pass/fail label.
- **Alignment MAE**: the mean absolute difference between the judge's normalized
  prompt-alignment score and the labelled one; **band hit rate**: the share of alignment cases
  whose score falls in the labelled band (``low`` < 0.4 <= ``mid`` < 0.8 <= ``high``), and the
  same per dimension.
- **True rates** (per scorer, on the run's pass/fail label): the true positive rate (TPR, the
  share of labelled-passing cases the judge passed) and the true negative rate (TNR, the share
  of labelled-failing cases it failed), each with its 95% Wilson score interval. A judge that
  passes most failures has a high raw pass rate and a low TNR; with both rates known, the
  corrected pass rate (:func:`otel_scorers.calibration.rates.corrected_pass_rate`) undoes it.
- Judge errors are never agreement: they are counted (by error type) and left out of the
  figures, and ``--fail-under`` fails when there are any.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from otel_scorers.scorers.analysis import rendering
from otel_scorers.scorers.cases import LabelledCase, band_of
from otel_scorers.scorers.result import ScoreResult

#: Case kinds labelled verdict by verdict (the others by a score and its band).
VERDICT_KINDS = ("rubric", "tool_use")

__all__ = ["Confusion", "Outcome", "cohen_kappa", "differences", "percentile", "summarize",
           "true_rates", "wilson"]

#: z of a two-sided 95% interval.
Z95 = 1.959964


@dataclass
class Confusion:
    """Counts of (labelled, judged) verdicts, "satisfied" being positive."""

    tp: int = 0
    fn: int = 0
    fp: int = 0
    tn: int = 0

    def add(self, expected: bool, judged: bool) -> None:
        if expected:
            self.tp += judged
            self.fn += not judged
        else:
            self.fp += judged
            self.tn += not judged

    @property
    def total(self) -> int:
        return self.tp + self.fn + self.fp + self.tn

    @property
    def agreement(self) -> float | None:
        return (self.tp + self.tn) / self.total if self.total else None

    @property
    def kappa(self) -> float | None:
        return cohen_kappa(self.tp, self.fn, self.fp, self.tn)

    def to_dict(self) -> dict[str, Any]:
        return {"tp": self.tp, "fn": self.fn, "fp": self.fp, "tn": self.tn,
                "agreement": _round(self.agreement)}


def cohen_kappa(tp: int, fn: int, fp: int, tn: int) -> float | None:
    """Cohen's kappa of two binary raters (labels vs judge)."""
    total = tp + fn + fp + tn
    if not total:
        return None
    observed = (tp + tn) / total
    labelled_yes, judged_yes = (tp + fn) / total, (tp + fp) / total
    chance = labelled_yes * judged_yes + (1 - labelled_yes) * (1 - judged_yes)
    if chance >= 1.0:
        return None
    return (observed - chance) / (1 - chance)


def wilson(successes: int, trials: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval of a binomial proportion (``None`` for no trials): unlike
    the normal approximation it stays inside [0, 1] and is honest at 0 or n successes."""
    if trials <= 0:
        return None
    share = successes / trials
    denominator = 1 + z * z / trials
    centre = (share + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(share * (1 - share) / trials + z * z / (4 * trials * trials)) \
        / denominator
    # at 0 or n successes the interval touches 0 or 1 exactly (not by rounding)
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == trials else min(1.0, centre + half)
    return low, high


def _rate(successes: int, trials: int) -> dict[str, Any]:
    interval = wilson(successes, trials)
    return {"value": _round(successes / trials) if trials else None, "n": trials,
            "low": _round(interval[0]) if interval else None,
            "high": _round(interval[1]) if interval else None}


def true_rates(labels: Confusion) -> dict[str, Any]:
    """TPR and TNR of the pass/fail verdicts in ``labels`` with their Wilson intervals, and
    ``informedness`` (TPR + TNR - 1: above 0 the judge carries information and the pass rate
    can be corrected; at or below 0 the correction is undefined)."""
    tpr, tnr = _rate(labels.tp, labels.tp + labels.fn), _rate(labels.tn, labels.tn + labels.fp)
    informed = (None if tpr["value"] is None or tnr["value"] is None
                else _round(labels.tp / (labels.tp + labels.fn)
                            + labels.tn / (labels.tn + labels.fp) - 1))
    return {"tpr": tpr, "tnr": tnr, "informedness": informed,
            "correctable": informed is not None and informed > 0}


def percentile(values: Sequence[float], fraction: float) -> float | None:
    """The nearest-rank percentile (``None`` for no values)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(fraction * len(ordered) + 0.5) - 1))
    return ordered[rank]


@dataclass
class Outcome:
    """One case, judged: what the judge said against what the labels say."""

    case: LabelledCase
    result: ScoreResult
    verdicts: list[tuple[str, bool, bool]] = field(default_factory=list)  # id, expected, judged
    judged_pass: bool | None = None
    normalized: float | None = None
    dimension_hits: dict[str, bool] = field(default_factory=dict)  # "user.intent" -> hit

    @property
    def label_agrees(self) -> bool | None:
        if self.judged_pass is None:
            return None
        return self.judged_pass == (self.case.expected.label == "pass")

    @property
    def error(self) -> bool:
        return self.result.error is not None

    @property
    def abs_error(self) -> float | None:
        expected = self.case.expected.score
        if self.normalized is None or expected is None:
            return None
        return abs(self.normalized - expected)

    @property
    def band_hit(self) -> bool | None:
        if self.normalized is None:
            return None
        return band_of(self.normalized) == self.case.expected.band

    @property
    def badness(self) -> float:
        """How far off the judge was, for ranking the worst cases (errors rank first)."""
        if self.error:
            return 10.0
        if self.case.scorer in VERDICT_KINDS:
            wrong = sum(expected != judged for _, expected, judged in self.verdicts)
            return wrong / max(1, len(self.verdicts)) + (0 if self.label_agrees else 1)
        return (self.abs_error or 0.0) + (0 if self.band_hit else 0.5)

    @classmethod
    def of(cls, case: LabelledCase, result: ScoreResult) -> Outcome:
        outcome = cls(case, result)
        if result.error is not None:
            return outcome
        calibrated = rendering(result.analysis).calibrated(case, result)
        outcome.judged_pass = calibrated.judged_pass
        outcome.normalized = calibrated.normalized
        outcome.verdicts = list(calibrated.verdicts)
        outcome.dimension_hits = dict(calibrated.dimension_hits)
        return outcome


def differences(before: dict[str, Any], after: dict[str, Any],
                keys: Iterable[str]) -> dict[str, float | None]:
    """``after - before`` for each figure (``None`` where either side has none)."""
    return {key: None if before[key] is None or after[key] is None
            else round(after[key] - before[key], 4) for key in keys}


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def _mean(values: Iterable[float]) -> float | None:
    items = list(values)
    return sum(items) / len(items) if items else None


def figures(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """The agreement figures of a set of outcomes (the report's headline, or one domain's)."""
    confusion, labels = Confusion(), Confusion()
    for outcome in outcomes:
        for _, expected, judged in outcome.verdicts:
            confusion.add(expected, judged)
        if outcome.judged_pass is not None:
            labels.add(outcome.case.expected.label == "pass", outcome.judged_pass)
    errors = [o.abs_error for o in outcomes if o.abs_error is not None]
    hits = [o.band_hit for o in outcomes if o.band_hit is not None]
    dimension_hits = [hit for o in outcomes for hit in o.dimension_hits.values()]
    return {
        "cases": len(outcomes),
        "errors": sum(o.error for o in outcomes),
        "verdicts": confusion.total,
        "verdict_agreement": _round(confusion.agreement),
        "kappa": _round(confusion.kappa),
        "pass_agreement": _round(labels.agreement),
        "alignment_cases": len(hits),
        "alignment_mae": _round(_mean(errors)),
        "band_hit_rate": _round(_mean(float(h) for h in hits)),
        "dimension_band_hit_rate": _round(_mean(float(h) for h in dimension_hits)),
        "confusion": confusion.to_dict(),
        "pass_confusion": labels.to_dict(),
        "true_rates": true_rates(labels),
    }


def summarize(outcomes: Sequence[Outcome], *, worst: int = 5,
              companions: Sequence[ScoreResult] | None = None) -> dict[str, Any]:
    """The whole report: headline figures, judge usage, per-domain and per-criterion
    breakdowns, error types and the worst cases with the judge's reasons.

    ``companions``: results of unlabelled scorers judged beside the cases (see
    :mod:`.paired`); their usage counts in calls, tokens, cost and latency, and their
    failures in ``companion_errors``, never in the agreement figures."""
    report = figures(outcomes)
    results = [o.result for o in outcomes] + list(companions or ())
    usages = [r.judge for r in results if r.judge is not None]
    latencies = [u.latency_s for u in usages if u.calls]
    costs = [u.cost_usd for u in usages]
    report.update({
        "error_types": dict(Counter(o.result.error.type for o in outcomes
                                    if o.result.error is not None)),
        "calls": sum(u.calls for u in usages),
        "tokens": {"prompt": sum(u.prompt_tokens for u in usages),
                   "completion": sum(u.completion_tokens for u in usages)},
        "cost_usd": (None if not costs or any(c is None for c in costs)
                     else round(sum(c for c in costs if c is not None), 6)),
        "latency_s": {"p50": _round(percentile(latencies, 0.5), 3),
                      "p95": _round(percentile(latencies, 0.95), 3),
                      "max": _round(max(latencies) if latencies else None, 3)},
    })
    if companions is not None:
        report["companion_errors"] = sum(r.error is not None for r in companions)
    domains: dict[str, list[Outcome]] = {}
    for outcome in outcomes:
        domains.setdefault(outcome.case.domain, []).append(outcome)
    report["domains"] = {name: {k: v for k, v in figures(items).items()
                                if k not in ("confusion", "pass_confusion", "true_rates")}
                         for name, items in sorted(domains.items())}
    kinds: dict[str, list[Outcome]] = {}
    for outcome in outcomes:
        kinds.setdefault(outcome.case.scorer, []).append(outcome)
    report["scorers"] = {kind: {key: figures(items)[key] for key in
                                ("cases", "errors", "pass_agreement", "pass_confusion",
                                 "true_rates")}
                         for kind, items in sorted(kinds.items())}
    per_criterion: dict[str, Confusion] = {}
    for outcome in outcomes:
        for ident, expected, judged in outcome.verdicts:
            per_criterion.setdefault(ident, Confusion()).add(expected, judged)
    report["per_criterion"] = {ident: c.to_dict() for ident, c in sorted(per_criterion.items())}
    ranked = sorted((o for o in outcomes if o.badness > 0), key=lambda o: -o.badness)
    report["worst"] = [_worst(o) for o in ranked[:worst]]
    report["results"] = [_line(o) for o in outcomes]
    return report


def _line(outcome: Outcome) -> dict[str, Any]:
    case, result = outcome.case, outcome.result
    line: dict[str, Any] = {"id": case.id, "domain": case.domain, "scorer": case.scorer}
    if result.error is not None:
        line["error"] = {"type": result.error.type, "message": result.error.message}
    elif case.scorer in VERDICT_KINDS:
        line.update(expected=list(case.expected.verdicts or ()),
                    judged=[judged for _, _, judged in outcome.verdicts],
                    label=result.label, expected_label=case.expected.label)
    else:
        line.update(expected=case.expected.score, judged=_round(outcome.normalized),
                    band=None if outcome.normalized is None else band_of(outcome.normalized),
                    expected_band=case.expected.band)
    return line


def _worst(outcome: Outcome) -> dict[str, Any]:
    line = _line(outcome)
    line["reason"] = outcome.result.reason[:600]
    line["rationale"] = outcome.case.rationale
    return line
