"""Observable instruments: values read when metrics are collected, not recorded as they happen.

Two kinds. A callback reads a number the pipeline keeps anyway (decisions, queue depth, held
spans, open sessions, a judge's true rates) and one instrument per meter and name adds up (or,
for levels, reports) every live source. A :class:`Tally` is a counter kept here: a monotonic
sum per attribute set, added to on the evaluation path and read by an observable counter.
A synchronous counter's ``add`` costs the SDK a measurement object, the attributes cleaned and
hashed again, and the exemplar filter, about a thousand interpreter steps, for each of the
judge counters of every evaluation (tokens by type and cost; flex refusals and tool calls
where there are some): a tally's ``add`` is one dictionary update under a lock. Only
counters that carry no exemplar are tallies (exemplars need the measurement's context: scores
and verdicts stay synchronous). The exported series are the same: a monotonic sum per
attribute set, cumulative or delta as the reader asks, and, as a synchronous counter's, kept
for the meter's life (a tally belongs to the meter, not to a processor).
"""

from __future__ import annotations

import math
import os
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from otel_scorers import names as n

__all__ = ["Callback", "Tally", "by_reason", "gauge", "observe", "tally", "true_rates"]

Callback = Callable[[CallbackOptions], Iterable[Observation]]

# Observable instruments are shared per meter: the SDK keeps the first instrument registered
# under a name and ignores later ones (with their callbacks), so two processors on one meter
# provider would otherwise lose the second's decisions and gauges. One instrument per meter and
# name reads every live ScorerMetrics registered on it (weakly: a processor that is gone stops
# reporting) and adds up equal attribute sets.
_OBSERVED: weakref.WeakKeyDictionary[Any, dict[str, weakref.WeakKeyDictionary[Any, Callback]]] = (
    weakref.WeakKeyDictionary())
_OBSERVED_LOCK = threading.Lock()
# the tallies of each meter, by name; one lock for all their sums
_TALLIES: weakref.WeakKeyDictionary[Any, dict[str, Tally]] = weakref.WeakKeyDictionary()
_TALLY_LOCK = threading.Lock()


def _reset_lock_after_fork() -> None:
    global _OBSERVED_LOCK, _TALLY_LOCK
    _OBSERVED_LOCK = threading.Lock()
    _TALLY_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_lock_after_fork)


def observe(meter: Meter, owner: Any, name: str, kind: str, unit: str,
            description: str, callback: Callback) -> None:
    """Register ``owner``'s ``callback`` on the meter's one ``kind`` instrument ``name``
    (``counter``: summed over owners; ``gauge``: summed; ``level``: one value reported)."""
    with _OBSERVED_LOCK:
        by_name = _OBSERVED.setdefault(meter, {})
        sources = by_name.get(name)
        if sources is None:
            sources = by_name[name] = weakref.WeakKeyDictionary()
            create = (meter.create_observable_counter if kind == "counter"
                      else meter.create_observable_gauge)
            create(name, callbacks=[combined(sources, add=kind != "level")], unit=unit,
                   description=description)
        sources[owner] = callback


def combined(sources: weakref.WeakKeyDictionary[Any, Callback], *, add: bool = True
             ) -> Callback:
    def callback(options: CallbackOptions) -> Iterable[Observation]:
        with _OBSERVED_LOCK:
            callbacks = list(sources.values())
        totals: dict[frozenset[tuple[str, Any]], tuple[float, Any]] = {}
        for source in callbacks:
            for observation in source(options):
                key = frozenset((observation.attributes or {}).items())
                value, attributes = totals.get(key, (0, observation.attributes))
                totals[key] = (value + observation.value if add else observation.value,
                               attributes)
        return [Observation(value, attributes) for value, attributes in totals.values()]
    return callback


def gauge(read: Callable[[], int]) -> Callable[[CallbackOptions], Iterable[Observation]]:
    def callback(_options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(read())]
    return callback


def true_rates(read: Callable[[], Iterable[tuple[str, str, str, float, float]]], index: int
           ) -> Callable[[CallbackOptions], Iterable[Observation]]:
    """The TPR (``index`` 3) or TNR (4) of each known (scorer, model, source, TPR, TNR)."""
    def callback(_options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(float(known[index]), {
            n.M_SCORER: known[0], n.M_JUDGE_MODEL: known[1], n.M_SOURCE: known[2]})
            for known in read()]
    return callback


def by_reason(read: Callable[[], Mapping[str, int]]
               ) -> Callable[[CallbackOptions], Iterable[Observation]]:
    def callback(_options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(count, {n.M_REASON: reason}) for reason, count in read().items()]
    return callback


class Tally:
    """Monotonic sums by attribute set, read by one observable counter (see the module)."""

    def __init__(self) -> None:
        self._sums: dict[frozenset[tuple[str, Any]], list[Any]] = {}

    def add(self, amount: float, attributes: dict[str, Any]) -> None:
        """Add ``amount`` to the series of ``attributes`` (as a counter does, nothing that
        is not a positive finite number is added: the sum stays monotonic)."""
        if not 0 < amount < math.inf:
            return
        key = frozenset(attributes.items())
        with _TALLY_LOCK:
            entry = self._sums.get(key)
            if entry is None:  # a new series: its attributes copied, never the caller's
                self._sums[key] = [amount, dict(attributes)]
            else:
                entry[0] += amount

    def observe(self, _options: CallbackOptions) -> Iterable[Observation]:
        with _TALLY_LOCK:
            return [Observation(value, attributes) for value, attributes in self._sums.values()]


def tally(meter: Meter, name: str, unit: str, description: str) -> Tally:
    """The meter's tally named ``name`` (its observable counter created with the first)."""
    with _OBSERVED_LOCK:
        by_name = _TALLIES.setdefault(meter, {})
        found = by_name.get(name)
        if found is None:
            found = by_name[name] = Tally()
            meter.create_observable_counter(name, callbacks=[found.observe], unit=unit,
                                            description=description)
        return found
