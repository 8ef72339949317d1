"""Exact, cheap counts of pipeline decisions, read by an observable counter at collection time.

The hot path only increments a dict entry under an uncontended lock (well under a microsecond);
the OTel counter reads the totals when metrics are collected. ``snapshot()`` gives users (and
tests) the same numbers directly: why each run was or was not scored.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from opentelemetry.metrics import CallbackOptions, Observation

from otel_scorers import names as n

__all__ = ["DecisionCounts", "DecisionKey"]


class DecisionKey(NamedTuple):
    scorer: str
    decision: str
    reason: str | None = None
    error_type: str | None = None


class DecisionCounts:
    """Thread-safe monotonic counters keyed by (scorer, decision, reason, error type).

    Keys are plain tuples on the hot path (a NamedTuple costs a microsecond to build and hash);
    :meth:`snapshot` returns them as :class:`DecisionKey`.
    """

    def __init__(self) -> None:
        self._counts: dict[tuple[str, str, str | None, str | None], int] = {}
        self._lock = threading.Lock()

    def reset_after_fork(self) -> None:
        """In a forked child: a fresh lock and no counts (they are the parent's)."""
        self._lock = threading.Lock()
        self._counts = {}

    def add(self, scorer: str, decision: str, reason: str | None = None,
            error_type: str | None = None, amount: int = 1) -> None:
        key = (scorer, decision, reason, error_type)
        with self._lock:
            self._counts[key] = self._counts.get(key, 0) + amount

    def select(self, scorers: tuple[str, ...], decisions: list[tuple[str, str]],
               dropped: Sequence[str] = ()) -> None:
        """Count one selected run for ``scorers`` plus its immediate decisions, and the scorers
        whose jobs a full queue ``dropped``, in one lock."""
        with self._lock:
            counts = self._counts
            for scorer in scorers:
                key = (scorer, "selected", None, None)
                counts[key] = counts.get(key, 0) + 1
            for scorer, decision in decisions:
                key = (scorer, decision, None, None)
                counts[key] = counts.get(key, 0) + 1
            for scorer in dropped:
                full = (scorer, n.Decision.DROPPED, n.Reason.QUEUE_FULL, None)
                counts[full] = counts.get(full, 0) + 1

    def snapshot(self) -> dict[DecisionKey, int]:
        with self._lock:
            return {DecisionKey(*key): value for key, value in self._counts.items()}

    def count(self, decision: str, reason: str | None = None) -> int:
        """How many (span, scorer) pairs ended in ``decision`` (with ``reason``, if given)."""
        return sum(value for key, value in self.snapshot().items()
                   if key.decision == decision and (reason is None or key.reason == reason))

    def totals(self, scorer: str | None = None) -> dict[str, int]:
        """Counts per decision (summed over reasons and error types), optionally per scorer."""
        out: dict[str, int] = {}
        for key, value in self.snapshot().items():
            if scorer is None or key.scorer == scorer:
                out[key.decision] = out.get(key.decision, 0) + value
        return out

    def by_reason(self, scorer: str) -> dict[str, int | dict[str, int]]:
        """One scorer's counts per decision: a total, or, for decisions with reasons or error
        types, a count per reason (``"other"``: the ones without)."""
        details: dict[str, dict[str, int]] = {}
        for key, value in self.snapshot().items():
            if key.scorer == scorer:
                detail = key.reason or key.error_type or "other"
                per = details.setdefault(key.decision, {})
                per[detail] = per.get(detail, 0) + value
        return {decision: per["other"] if set(per) == {"other"} else per
                for decision, per in details.items()}

    def observe(self, _options: CallbackOptions) -> Iterable[Observation]:
        for key, value in self.snapshot().items():
            attrs = {n.M_SCORER: key.scorer, n.M_DECISION: key.decision}
            if key.reason is not None:
                attrs[n.M_REASON] = key.reason
            if key.error_type is not None:
                attrs[n.M_ERROR_TYPE] = key.error_type
            yield Observation(value, attrs)
