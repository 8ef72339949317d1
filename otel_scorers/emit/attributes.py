"""A scored result as OTel attributes, with the content switch applied to judge text.

``result_attributes(result, prefix)`` gives this library's attributes under ``prefix``:
``otel_scorers.`` on an evaluation span, ``otel_scorers.<scorer>.`` on an enriched span.
``semconv_attributes`` gives the GenAI evaluation attributes of one result.
"""

from __future__ import annotations

from typing import Any

from otel_scorers import names as n
from otel_scorers.policy import ContentPolicy
from otel_scorers.scorers.analysis import rendering
from otel_scorers.scorers.result import ScoreResult

__all__ = ["ContentPolicy", "fit_attributes", "result_attributes", "semconv_attributes"]

AttributeValue = str | bool | int | float | list[str]


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
    if result.evaluator is not None:
        attrs[n.GEN_AI_EVALUATION_EVALUATOR_ID] = result.evaluator.id
        attrs[n.GEN_AI_EVALUATION_EVALUATOR_TYPE] = result.evaluator.type
    return attrs


def result_attributes(result: ScoreResult, prefix: str,
                      policy: ContentPolicy) -> dict[str, AttributeValue]:
    """This library's attributes of ``result`` under ``prefix`` (ending with a dot)."""
    out: dict[str, Any] = {}

    def put(key: str, value: Any) -> None:
        if value is not None:
            out[prefix + key] = value

    put(n.ATTR_SCALE, float(result.scale))
    if result.evaluator is not None:
        put(n.ATTR_SCORE_MIN, result.evaluator.score_min)
        put(n.ATTR_EVALUATOR_FINGERPRINT, result.evaluator.fingerprint)
        if result.judge is None:
            put(n.ATTR_JUDGE_MODEL, result.evaluator.judge_model)
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
        put(n.ATTR_ERROR_MESSAGE, policy.run_text(result.error.message))  # may quote the run
    if result.judge is not None:
        usage = result.judge
        put(n.ATTR_JUDGE_MODEL, usage.model)
        put(n.ATTR_JUDGE_CALLS, usage.calls)
        put(n.ATTR_JUDGE_RETRIES, usage.retries)
        put(n.ATTR_JUDGE_REASKS, usage.reasks)
        put(n.ATTR_JUDGE_INPUT_TOKENS, usage.prompt_tokens)
        put(n.ATTR_JUDGE_OUTPUT_TOKENS, usage.completion_tokens)
        if usage.cached_tokens:  # of the input tokens, read from the provider's prompt cache
            put(n.ATTR_JUDGE_CACHED_INPUT_TOKENS, usage.cached_tokens)
        put(n.ATTR_JUDGE_COST_USD, usage.cost_usd)
        if usage.service_tier != "standard":
            put(n.ATTR_JUDGE_SERVICE_TIER, usage.service_tier)
        if usage.flex_refusals:
            put(n.ATTR_JUDGE_FLEX_REFUSALS, usage.flex_refusals)
        put(n.ATTR_JUDGE_LATENCY_S, round(usage.latency_s, 6))
        if usage.estimated:
            put(n.ATTR_JUDGE_TOKENS_ESTIMATED, True)
        if usage.truncated:  # the verdict was made on part of these fields
            put(n.ATTR_INPUT_TRUNCATED, list(usage.truncated))
    out.update({prefix + key: value for key, value in
                rendering(result.analysis).attributes(result, policy).items()
                if value is not None})
    return out


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
    even a tiny limit (the SDK drops the oldest) keeps them. ``attrs`` is reordered in place
    (and returned, or a smaller copy when over the limit)."""
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
    for key in ESSENTIAL:  # moved to the end, in this order (the dict is the caller's own)
        if key in attrs:
            attrs[key] = attrs.pop(key)
    return attrs
