"""A scored result as OTel attributes, with the content switch applied to judge text.

``result_attributes(result, prefix)`` gives this library's attributes under ``prefix``:
``otel_scorers.`` on an evaluation span, ``otel_scorers.<scorer>.`` on an enriched span.
``semconv_attributes`` gives the GenAI evaluation attributes of one result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from otel_scorers import names as n
from otel_scorers.scorers.alignment import AlignmentAnalysis, AlignmentDimensions
from otel_scorers.scorers.criteria import RubricAnalysis
from otel_scorers.scorers.result import ScoreResult

__all__ = ["ContentPolicy", "emitted_ids", "fit_attributes", "result_attributes",
           "semconv_attributes"]

ContentMode = Literal["full", "truncate", "none"]
AttributeValue = str | bool | int | float | list[str]


@dataclass(frozen=True)
class ContentPolicy:
    """What judge-written text is kept: all of it, ``max_chars`` of each, or none.

    With ``none`` only numbers, labels, ids and verdicts leave the process (content-free
    telemetry); criterion descriptions are dropped too, since a dynamic rubric is app content.
    """

    mode: ContentMode = "full"
    max_chars: int = 1_000

    def text(self, value: str) -> str | None:
        if self.mode == "none" or not value:
            return None
        if self.mode == "truncate" and len(value) > self.max_chars:
            return value[: self.max_chars - 1] + "…"
        return value


def semconv_attributes(result: ScoreResult, policy: ContentPolicy) -> dict[str, AttributeValue]:
    attrs: dict[str, AttributeValue] = {n.GEN_AI_EVALUATION_NAME: result.scorer}
    if result.score is not None:
        attrs[n.GEN_AI_EVALUATION_SCORE_VALUE] = float(result.score)
    if result.label is not None:
        attrs[n.GEN_AI_EVALUATION_SCORE_LABEL] = result.label
    explanation = policy.text(result.reason)
    if explanation is not None:
        attrs[n.GEN_AI_EVALUATION_EXPLANATION] = explanation
    if result.error is not None:
        attrs[n.ERROR_TYPE] = result.error.type
    return attrs


def result_attributes(result: ScoreResult, prefix: str,
                      policy: ContentPolicy) -> dict[str, AttributeValue]:
    """This library's attributes of ``result`` under ``prefix`` (ending with a dot)."""
    out: dict[str, Any] = {}

    def put(key: str, value: Any) -> None:
        if value is not None:
            out[prefix + key] = value

    put(n.ATTR_SCALE, float(result.scale))
    if result.score is not None:
        put(n.ATTR_SCORE, float(result.score))
        put(n.ATTR_SCORE_NORMALIZED, float(result.score) / result.scale)
    put(n.ATTR_LABEL, result.label)
    put(n.ATTR_PASS, result.passed)
    put(n.ATTR_MODE, result.mode)
    put(n.ATTR_SKIPPED, result.skipped)
    put(n.ATTR_REASON, policy.text(result.reason))
    if result.cached:
        put(n.ATTR_CACHED, True)
    if result.error is not None:
        put(n.ATTR_ERROR_TYPE, result.error.type)
        put(n.ATTR_ERROR_MESSAGE, policy.text(result.error.message))
    if result.judge is not None:
        usage = result.judge
        put(n.ATTR_JUDGE_MODEL, usage.model)
        put(n.ATTR_JUDGE_CALLS, usage.calls)
        put(n.ATTR_JUDGE_RETRIES, usage.retries)
        put(n.ATTR_JUDGE_REASKS, usage.reasks)
        put(n.ATTR_JUDGE_INPUT_TOKENS, usage.prompt_tokens)
        put(n.ATTR_JUDGE_OUTPUT_TOKENS, usage.completion_tokens)
        put(n.ATTR_JUDGE_COST_USD, usage.cost_usd)
        put(n.ATTR_JUDGE_LATENCY_S, round(usage.latency_s, 6))
        if usage.estimated:
            put(n.ATTR_JUDGE_TOKENS_ESTIMATED, True)
    analysis = result.analysis
    if isinstance(analysis, RubricAnalysis):
        _rubric(analysis, put, policy)
    elif isinstance(analysis, AlignmentAnalysis):
        _alignment(analysis, result.mode, put, policy)
    return out


def emitted_ids(analysis: RubricAnalysis, content_free: bool) -> list[str]:
    """Criterion ids as telemetry carries them: the rubric's, except for a rubric that came
    with the run when no content may leave (``reasons="none"``): ``c1``, ``c2``, ... then,
    since an id made from a description is a piece of that description."""
    if content_free and analysis.dynamic:
        return [f"c{i}" for i in range(1, len(analysis.criteria) + 1)]
    return [c.id for c in analysis.criteria]


def _rubric(analysis: RubricAnalysis, put: Any, policy: ContentPolicy) -> None:
    ids = emitted_ids(analysis, policy.mode == "none")
    put(n.ATTR_CRITERIA_IDS, ids)
    gating_all = not any(c.required for c in analysis.criteria)
    put(n.ATTR_CRITERIA_UNMET, [i for i, c in zip(ids, analysis.criteria, strict=True)
                                if not c.satisfied and (c.required or gating_all)])
    put(n.ATTR_REQUIRED_UNMET, analysis.required_unmet)
    put(n.ATTR_OVERALL_ASSESSMENT, policy.text(analysis.overall_assessment))
    for ident, criterion in zip(ids, analysis.criteria, strict=True):
        base = f"{n.ATTR_CRITERION}.{ident}."
        put(base + "satisfied", criterion.satisfied)
        put(base + "required", criterion.required)
        put(base + "description", policy.text(criterion.description))
        put(base + "reasoning", policy.text(criterion.reasoning))
        put(base + "score", criterion.score)


def _alignment(analysis: AlignmentAnalysis, mode: str | None, put: Any,
               policy: ContentPolicy) -> None:
    sides: list[tuple[str, AlignmentDimensions]] = [
        ("system" if mode == "system" else "user", analysis)]
    if analysis.system_compliance is not None:
        sides.append(("system", analysis.system_compliance))
    put(n.ATTR_OVERALL_ASSESSMENT, policy.text(analysis.overall_assessment))
    for side, dims in sides:
        base = f"{n.ATTR_DIMENSION}.{side}."
        for name, score, reasoning in _dimension_rows(dims):
            put(f"{base}{name}.score", score)
            put(f"{base}{name}.reasoning", policy.text(reasoning))
        put(f"{base}{n.ATTR_PRIMARY_INTENT}", policy.text(dims.intent_alignment.primary_intent))
        put(f"{base}intent.addressed", dims.intent_alignment.is_addressed)
        put(f"{base}appropriateness.format", dims.response_appropriateness.format_alignment)
        put(f"{base}appropriateness.tone", dims.response_appropriateness.tone_alignment)
        if policy.mode != "none":
            unmet = [r.requirement for r in dims.requirements_fulfillment.requirements
                     if not r.is_fulfilled]
            put(f"{base}{n.ATTR_REQUIREMENTS_UNFULFILLED}",
                [policy.text(u) or "" for u in unmet] or None)
            put(f"{base}{n.ATTR_MISSING_ELEMENTS}",
                [policy.text(m) or "" for m in dims.completeness.missing_elements] or None)


def _dimension_rows(dims: AlignmentDimensions) -> list[tuple[str, float, str]]:
    return [
        ("intent", dims.intent_alignment.score, dims.intent_alignment.reasoning),
        ("requirements", dims.requirements_fulfillment.overall_score, ""),
        ("completeness", dims.completeness.score, dims.completeness.reasoning),
        ("appropriateness", dims.response_appropriateness.score,
         dims.response_appropriateness.reasoning),
    ]


def dimension_scores(result: ScoreResult) -> list[tuple[str, str, float]]:
    """``(side, dimension, score)`` rows of an alignment result (for metrics)."""
    analysis = result.analysis
    if not isinstance(analysis, AlignmentAnalysis):
        return []
    rows = [("system" if result.mode == "system" else "user", name, score)
            for name, score, _ in _dimension_rows(analysis)]
    if analysis.system_compliance is not None:
        rows += [("system", name, score)
                 for name, score, _ in _dimension_rows(analysis.system_compliance)]
    return rows


#: The attributes an evaluation span must never lose, the most important last: the SDK drops
#: the oldest attributes of a span over its limit, so these go in after everything else.
ESSENTIAL: tuple[str, ...] = (
    n.PREFIX + n.ATTR_EVALUATED_SPAN_ID, n.ERROR_TYPE, n.PREFIX + n.ATTR_CRITERIA_OMITTED,
    n.PREFIX + n.ATTR_CRITERIA_UNMET, n.PREFIX + n.ATTR_SCORE, n.PREFIX + n.ATTR_PASS,
    n.GEN_AI_EVALUATION_SCORE_LABEL, n.GEN_AI_EVALUATION_SCORE_VALUE, n.GEN_AI_EVALUATION_NAME,
)


def fit_attributes(attrs: dict[str, Any], limit: int | None) -> dict[str, Any]:
    """``attrs`` within a span's attribute ``limit`` (the SDK's, 128 by default), never losing
    the name, score, label or verdict: per-criterion details are what gives way, those of unmet
    criteria kept first, whole criteria at a time, and ``otel_scorers.criteria.omitted`` says
    how many criteria lost theirs. The essential attributes are put last either way, so that
    even a tiny limit (the SDK drops the oldest) keeps them."""
    criterion = n.PREFIX + n.ATTR_CRITERION + "."
    if limit is not None and len(attrs) > limit:
        groups: dict[str, list[str]] = {}
        for key in attrs:
            if key.startswith(criterion):
                groups.setdefault(key[len(criterion):].rsplit(".", 1)[0], []).append(key)
        others = len(attrs) - sum(len(keys) for keys in groups.values())
        room = limit - others - 1  # one for criteria.omitted
        unmet = set(attrs.get(n.PREFIX + n.ATTR_CRITERIA_UNMET) or ())
        kept: set[str] = set()
        for ident in sorted(groups, key=lambda i: i not in unmet):  # unmet first, stable
            if len(groups[ident]) <= room:
                room -= len(groups[ident])
                kept.update(groups[ident])
        omitted = sum(1 for ident in groups if groups[ident][0] not in kept)
        attrs = {key: value for key, value in attrs.items()
                 if not key.startswith(criterion) or key in kept}
        if omitted:
            attrs[n.PREFIX + n.ATTR_CRITERIA_OMITTED] = omitted
    essential = {key: attrs[key] for key in ESSENTIAL if key in attrs}
    return {**{k: v for k, v in attrs.items() if k not in essential}, **essential}
