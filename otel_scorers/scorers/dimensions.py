"""The four dimensions of prompt alignment: what the judge fills in, the seed's weights and
bands, and the analysis that renders them (span attributes, the CLI table, the dimension metric,
calibration's band hits).

=========  ======  ============  ============  ===============
mode       intent  requirements  completeness  appropriateness
=========  ======  ============  ============  ===============
user       0.40    0.30          0.20          0.10
system     0.35    0.35          0.15          0.15
=========  ======  ============  ============  ===============

``both`` is ``0.7 × user-weighted user dimensions + 0.3 × system-weighted system dimensions``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, Literal

from pydantic import Field, StrictBool

from otel_scorers import names as n
from otel_scorers.policy import ContentPolicy
from otel_scorers.scorers.analysis import Analysis, Calibrated, CaseLike, Table
from otel_scorers.scorers.result import JudgeModel, ScoreResult, bounded_list, bounded_text

__all__ = [
    "BOTH_SPLIT",
    "DIMENSIONS",
    "MODE_WEIGHTS",
    "AlignmentAnalysis",
    "AlignmentDimensions",
    "EvaluationMode",
    "alignment_label",
    "band_of",
    "round_half_up",
    "weighted_score",
]

DIMENSIONS = ("intent", "requirements", "completeness", "appropriateness")


def band_of(normalized: float) -> str:
    """The calibration band of a score divided by its scale (``low`` < 0.4 <= ``mid`` < 0.8
    <= ``high``)."""
    return "low" if normalized < 0.4 else "mid" if normalized < 0.8 else "high"


EvaluationMode = Literal["user", "system", "both"]

MODE_WEIGHTS: Mapping[str, Mapping[str, Decimal]] = {
    "user": {"intent": Decimal("0.40"), "requirements": Decimal("0.30"),
             "completeness": Decimal("0.20"), "appropriateness": Decimal("0.10")},
    "system": {"intent": Decimal("0.35"), "requirements": Decimal("0.35"),
               "completeness": Decimal("0.15"), "appropriateness": Decimal("0.15")},
}
BOTH_SPLIT = {"user": Decimal("0.7"), "system": Decimal("0.3")}

#: Score bands of the seed, on the score divided by the scale; the label is the first match.
SCORE_BANDS: tuple[tuple[float, str], ...] = (
    (0.9, "excellent"), (0.8, "very_good"), (0.7, "good"), (0.6, "moderate"), (0.4, "poor"),
    (0.0, "very_poor"),
)

Score01 = Field(ge=0.0, le=1.0, allow_inf_nan=False)


class IntentAlignment(JudgeModel):
    primary_intent: bounded_text(300)  # type: ignore[valid-type]
    reasoning: bounded_text(500)  # type: ignore[valid-type]
    is_addressed: StrictBool
    score: float = Score01


class RequirementCheck(JudgeModel):
    requirement: bounded_text(200)  # type: ignore[valid-type]
    reasoning: bounded_text(300)  # type: ignore[valid-type]
    is_fulfilled: StrictBool


class RequirementsFulfillment(JudgeModel):
    requirements: bounded_list(RequirementCheck, 12)  # type: ignore[valid-type]
    overall_score: float = Score01


class Completeness(JudgeModel):
    missing_elements: bounded_list(bounded_text(200), 10)  # type: ignore[valid-type]
    reasoning: bounded_text(500)  # type: ignore[valid-type]
    score: float = Score01


class ResponseAppropriateness(JudgeModel):
    reasoning: bounded_text(500)  # type: ignore[valid-type]
    format_alignment: StrictBool
    tone_alignment: StrictBool
    score: float = Score01


class AlignmentDimensions(JudgeModel):
    """The four dimensions, as the judge fills them in and as the seed reports them."""

    intent_alignment: IntentAlignment
    requirements_fulfillment: RequirementsFulfillment
    completeness: Completeness
    response_appropriateness: ResponseAppropriateness

    def scores(self) -> dict[str, Decimal]:
        return {
            "intent": Decimal(str(self.intent_alignment.score)),
            "requirements": Decimal(str(self.requirements_fulfillment.overall_score)),
            "completeness": Decimal(str(self.completeness.score)),
            "appropriateness": Decimal(str(self.response_appropriateness.score)),
        }


class AlignmentAnalysis(AlignmentDimensions, Analysis):
    """``analyzeStepResult``: the seed's shape, plus ``systemCompliance`` in both mode."""

    overall_assessment: str = ""
    system_compliance: AlignmentDimensions | None = None

    def sides(self, mode: str | None) -> list[tuple[str, AlignmentDimensions]]:
        """``(side, dimensions)`` judged: the first is the system side in system mode."""
        out: list[tuple[str, AlignmentDimensions]] = [
            ("system" if mode == "system" else "user", self)]
        if self.system_compliance is not None:
            out.append(("system", self.system_compliance))
        return out

    def attributes(self, result: ScoreResult, policy: ContentPolicy) -> dict[str, Any]:
        out: dict[str, Any] = {n.ATTR_OVERALL_ASSESSMENT: policy.text(self.overall_assessment)}
        for side, dims in self.sides(result.mode):
            base = f"{n.ATTR_DIMENSION}.{side}."
            for name, score, reasoning in _dimension_rows(dims):
                out[f"{base}{name}.score"] = score
                out[f"{base}{name}.reasoning"] = policy.text(reasoning)
            out[f"{base}{n.ATTR_PRIMARY_INTENT}"] = policy.text(
                dims.intent_alignment.primary_intent)
            out[f"{base}intent.addressed"] = dims.intent_alignment.is_addressed
            out[f"{base}appropriateness.format"] = dims.response_appropriateness.format_alignment
            out[f"{base}appropriateness.tone"] = dims.response_appropriateness.tone_alignment
            if not policy.content_free:
                unmet = [r.requirement for r in dims.requirements_fulfillment.requirements
                         if not r.is_fulfilled]
                out[f"{base}{n.ATTR_REQUIREMENTS_UNFULFILLED}"] = [
                    policy.text(u) or "" for u in unmet] or None
                out[f"{base}{n.ATTR_MISSING_ELEMENTS}"] = [
                    policy.text(m) or "" for m in dims.completeness.missing_elements] or None
        return {key: value for key, value in out.items() if value is not None}

    def table(self, result: ScoreResult) -> Table | None:
        rows: list[tuple[str, ...]] = []
        for side, dims in self.sides(result.mode):
            rows.append((f"{side} intent", f"{dims.intent_alignment.score:.2f}",
                         dims.intent_alignment.reasoning))
            rows.append((f"{side} requirements",
                         f"{dims.requirements_fulfillment.overall_score:.2f}",
                         "; ".join(f"{'✓' if r.is_fulfilled else '✗'} {r.requirement}"
                                   for r in dims.requirements_fulfillment.requirements)))
            rows.append((f"{side} completeness", f"{dims.completeness.score:.2f}",
                         dims.completeness.reasoning))
            rows.append((f"{side} appropriateness",
                         f"{dims.response_appropriateness.score:.2f}",
                         dims.response_appropriateness.reasoning))
        return Table(f"{result.scorer}: dimensions ({result.mode} mode)",
                     ("dimension", "score", "reasoning"), tuple(rows))

    def dimension_rows(self, mode: str | None) -> Sequence[tuple[str, str, float]]:
        return [(side, name, score) for side, dims in self.sides(mode)
                for name, score, _ in _dimension_rows(dims)]

    def calibrated(self, case: CaseLike, result: ScoreResult) -> Calibrated:
        """The normalized score, and whether each dimension falls in its labelled band."""
        if result.score is None:
            return Calibrated()
        expected = case.expected.dimensions or {}
        judged: dict[str, AlignmentDimensions | None] = {
            "user": self if result.mode in ("user", "both") else None,
            "system": (self.system_compliance if result.mode == "both"
                       else self if result.mode == "system" else None)}
        hits: dict[str, bool] = {}
        for side, bands in expected.items():
            dims = judged.get(side)
            if dims is None:
                continue
            scores = dims.scores()
            for name in DIMENSIONS:
                hits[f"{side}.{name}"] = band_of(float(scores[name])) == getattr(bands, name)
        return Calibrated(normalized=result.score / result.scale, dimension_hits=hits)


def _dimension_rows(dims: AlignmentDimensions) -> list[tuple[str, float, str]]:
    return [
        ("intent", dims.intent_alignment.score, dims.intent_alignment.reasoning),
        ("requirements", dims.requirements_fulfillment.overall_score, ""),
        ("completeness", dims.completeness.score, dims.completeness.reasoning),
        ("appropriateness", dims.response_appropriateness.score,
         dims.response_appropriateness.reasoning),
    ]


def weighted_score(mode: str, user: Mapping[str, Decimal] | None,
                   system: Mapping[str, Decimal] | None) -> Decimal:
    """The unscaled weighted score (0..1) for ``mode`` from per-dimension scores."""
    def weigh(scores: Mapping[str, Decimal], weights: Mapping[str, Decimal]) -> Decimal:
        return sum((scores[k] * w for k, w in weights.items()), Decimal(0))

    if mode == "user" and user is not None:
        return weigh(user, MODE_WEIGHTS["user"])
    if mode == "system" and system is not None:
        return weigh(system, MODE_WEIGHTS["system"])
    if mode == "both" and user is not None and system is not None:
        return (BOTH_SPLIT["user"] * weigh(user, MODE_WEIGHTS["user"])
                + BOTH_SPLIT["system"] * weigh(system, MODE_WEIGHTS["system"]))
    raise ValueError(f"scores missing for mode {mode!r}")


def round_half_up(value: Decimal) -> float:
    return float(value.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


def alignment_label(normalized: float) -> str:
    """The seed's interpretation band for a score divided by its scale."""
    for floor, label in SCORE_BANDS:
        if normalized >= floor:
            return label
    return SCORE_BANDS[-1][1]


