"""The failure digest of a time window: pass rates by agent and scorer against the window
before, and the failures grouped by agent, scorer and criterion, their near-identical reasons
counted together, each group with example traces. Reasons that only repeat the judge's own
instructions (:mod:`otel_scorers.report.echoes`) are counted in ``echoed``, never shown as
reasons."""

from __future__ import annotations

import difflib
import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from otel_scorers.report.echoes import is_echo
from otel_scorers.report.records import Evaluation
from otel_scorers.report.text import utc

__all__ = ["build_digest", "group_reasons"]

#: Reasons this alike (difflib ratio of their normalized text) count as one.
ALIKE = 0.75
#: The most distinct reasons kept per group, shown per group, and examples per group.
MAX_CLUSTERS = 50
SHOWN_REASONS = 5
EXAMPLES = 3
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_SPACE = re.compile(r"\s+")


def _normalized(text: str) -> str:
    """Case, numbers, quotes and spacing ignored; the first 200 characters compared."""
    text = text.lower().replace('"', "").replace("'", "")
    return _SPACE.sub(" ", _NUMBER.sub("#", text)).strip()[:200]


def group_reasons(reasons: Sequence[str]) -> list[tuple[str, int]]:
    """Near-identical reasons counted together: (the first one seen, how many), most frequent
    first. Texts are compared with numbers and case ignored; past :data:`MAX_CLUSTERS`
    distinct ones the rest count as ``(other reasons)``."""
    clusters: list[tuple[str, str, int]] = []  # normalized, shown, count
    other = 0
    for reason in reasons:
        if not reason.strip():
            continue
        key = _normalized(reason)
        for index, (norm, shown, count) in enumerate(clusters):
            matcher = difflib.SequenceMatcher(None, norm, key, autojunk=False)
            if norm == key or (matcher.quick_ratio() >= ALIKE and matcher.ratio() >= ALIKE):
                clusters[index] = (norm, shown, count + 1)
                break
        else:
            if len(clusters) < MAX_CLUSTERS:
                clusters.append((key, reason.strip(), 1))
            else:
                other += 1
    out = sorted(((shown, count) for _, shown, count in clusters), key=lambda c: -c[1])
    return out + ([("(other reasons)", other)] if other else [])


def _rate(evaluations: Sequence[Evaluation]) -> float | None:
    judged = [e for e in evaluations if e.passed is not None or e.label is not None]
    return (sum(not e.failed for e in judged) / len(judged)) if judged else None


def build_digest(current: Sequence[Evaluation], previous: Sequence[Evaluation], *,
                 start_ns: int, end_ns: int, source: str,
                 link: Callable[[str], str | None] = lambda _trace: None,
                 notes: Sequence[str] = ()) -> dict[str, Any]:
    """The digest as plain data (what ``--json`` prints and the renderers show)."""
    by_pair: dict[tuple[str, str], list[Evaluation]] = defaultdict(list)
    before: dict[tuple[str, str], list[Evaluation]] = defaultdict(list)
    for evaluation in current:
        by_pair[(evaluation.agent, evaluation.scorer)].append(evaluation)
    for evaluation in previous:
        before[(evaluation.agent, evaluation.scorer)].append(evaluation)
    rates: list[dict[str, Any]] = []
    for (agent, scorer), items in by_pair.items():
        now, then = _rate(items), _rate(before.get((agent, scorer), []))
        rates.append({"agent": agent, "scorer": scorer, "runs": len(items),
                      "failures": sum(e.failed for e in items), "pass_rate": now,
                      "previous_pass_rate": then, "previous_runs": len(before.get(
                          (agent, scorer), [])),
                      "change": None if now is None or then is None else now - then})
    rates.sort(key=lambda r: (r["change"] if r["change"] is not None else 0.0,
                              -int(r["failures"])))
    return {"window": {"start": utc(start_ns), "end": utc(end_ns),
                       "seconds": (end_ns - start_ns) / 1e9},
            "source": source, "evaluations": len(current), "rates": rates,
            "groups": _groups(current, link), "notes": list(notes)}


def _groups(current: Sequence[Evaluation], link: Callable[[str], str | None]
            ) -> list[dict[str, Any]]:
    failing: dict[tuple[str, str, str], list[tuple[Evaluation, str]]] = defaultdict(list)
    for evaluation in (e for e in current if e.failed):
        if evaluation.unmet:
            for criterion in evaluation.unmet:
                failing[(evaluation.agent, evaluation.scorer, criterion)].append(
                    (evaluation, evaluation.criterion_reasons.get(criterion) or
                     evaluation.reason))
        else:
            failing[(evaluation.agent, evaluation.scorer, "")].append(
                (evaluation, evaluation.reason))
    groups: list[dict[str, Any]] = []
    for (agent, scorer, criterion), items in failing.items():
        newest = sorted(items, key=lambda item: -item[0].time_ns)
        traces = list(dict.fromkeys(e.trace_id for e, _ in newest))[:EXAMPLES]
        echoed = [reason for _, reason in items if is_echo(reason)]
        groups.append({
            "agent": agent, "scorer": scorer, "criterion": criterion or None,
            "failures": len(items),
            "reasons": [{"text": text, "count": count} for text, count in group_reasons(
                [reason for _, reason in items if not is_echo(reason)])[:SHOWN_REASONS]],
            "echoed": len(echoed),
            "examples": [{"trace_id": t, "link": link(t)} for t in traces]})
    groups.sort(key=lambda g: (-int(g["failures"]), str(g["agent"]), str(g["scorer"]),
                               str(g["criterion"] or "")))
    return groups
