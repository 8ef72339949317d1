"""One evaluation result as the failure digest reads it back, from any source: the attributes of
a ``gen_ai.evaluation <scorer>`` span (OTLP files, Jaeger) or a backend's record of it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from otel_scorers import names as n

__all__ = ["FAILING_LABELS", "Evaluation", "from_span_attributes"]

#: Labels that say a run failed when its scorer has no pass verdict (prompt alignment bands).
FAILING_LABELS = frozenset({"fail", "poor", "very_poor"})
_CRITERION = re.compile(re.escape(n.PREFIX + n.ATTR_CRITERION + ".") + r"(.+)\.reasoning")
#: The longest reason kept per result (the digest shows the start of the most frequent ones).
MAX_REASON_CHARS = 500


@dataclass(frozen=True)
class Evaluation:
    """What the digest needs of one result."""

    time_ns: int
    trace_id: str
    scorer: str
    agent: str
    service: str = ""
    score: float | None = None
    label: str | None = None
    passed: bool | None = None
    reason: str = ""
    unmet: tuple[str, ...] = ()
    criterion_reasons: Mapping[str, str] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        """Failed: its pass verdict, else a failing label (alignment's poor bands)."""
        if self.passed is not None:
            return not self.passed
        return (self.label or "") in FAILING_LABELS


def _text(value: Any) -> str:
    return str(value)[:MAX_REASON_CHARS] if isinstance(value, str) else ""


def from_span_attributes(attrs: Mapping[str, Any], *, time_ns: int, trace_id: str,
                         service: str) -> Evaluation | None:
    """The evaluation an evaluation span's attributes hold (``None``: not one, or a skip or an
    error: no verdict to digest)."""
    scorer = attrs.get(n.GEN_AI_EVALUATION_NAME)
    if not isinstance(scorer, str) or not scorer:
        return None
    score = attrs.get(n.GEN_AI_EVALUATION_SCORE_VALUE)
    label = attrs.get(n.GEN_AI_EVALUATION_SCORE_LABEL)
    if not isinstance(score, int | float) or isinstance(score, bool) or label == "skipped":
        return None
    passed = attrs.get(n.PREFIX + n.ATTR_PASS)
    unmet = attrs.get(n.PREFIX + n.ATTR_CRITERIA_UNMET) or ()
    reasons = {}
    for key, value in attrs.items():
        found = _CRITERION.fullmatch(key)
        if found and isinstance(value, str):
            reasons[found.group(1)] = _text(value)
    agent = attrs.get(n.GEN_AI_AGENT_NAME) or attrs.get(n.PREFIX + n.ATTR_AGENT_NAME)
    return Evaluation(
        time_ns=time_ns, trace_id=trace_id, scorer=scorer,
        agent=agent if isinstance(agent, str) and agent else "unknown", service=service,
        score=float(score), label=label if isinstance(label, str) else None,
        passed=passed if isinstance(passed, bool) else None,
        reason=_text(attrs.get(n.GEN_AI_EVALUATION_EXPLANATION)),
        unmet=tuple(str(u) for u in unmet if isinstance(u, str))[:50]
        if isinstance(unmet, list | tuple) else (),
        criterion_reasons=reasons)
