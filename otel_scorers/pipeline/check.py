"""Step one of an evaluation: what each scorer's judgement of a run needs, decided before
anything is asked.

For each scorer of a run, in order and without waiting: its hourly judge budget is spent (it
is skipped), an identical judgement is cached (it is reused), the same judgement is being asked
for another run right now (it joins that call: single flight), or it must be asked. A judgement
to be asked that has a cache key is registered as in flight at once, so that every identical
evaluation checked after it joins instead of asking again, and settled (cached, or its failure
passed on to whoever joined) when its answer is in. Nothing is counted here: the emit step
counts each scorer's one decision.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Literal

from otel_scorers.pipeline.cache import ResultCache
from otel_scorers.pipeline.slots import Slot
from otel_scorers.scorers.base import Scorer
from otel_scorers.scorers.result import ScoreResult
from otel_scorers.scorers.run import ScorerRun

__all__ = ["Checker", "Plan"]

Step = Literal["budget", "cached", "join", "ask", "batch"]


@dataclass
class Plan:
    """What one scorer's judgement of a run needs: ``budget`` (skipped: its budget is spent),
    ``cached`` (``result``), ``join`` (``shared``: the call in flight) or ``ask`` (``own``: the
    future others join, when the judgement has a cache ``key``)."""

    slot: Slot
    step: Step
    key: str | None = None
    result: ScoreResult | None = None
    shared: asyncio.Future[ScoreResult] | None = None
    own: asyncio.Future[ScoreResult] | None = None


class Checker:
    """The cache and the judgements in flight (on the library's event loop only)."""

    def __init__(self, cache: ResultCache) -> None:
        self.cache = cache
        self.inflight: dict[str, asyncio.Future[ScoreResult]] = {}

    def reset_after_fork(self) -> None:
        """In a forked child: no judgement in flight, an empty cache."""
        self.inflight = {}
        self.cache.reset_after_fork()

    def plan(self, slot: Slot, run: ScorerRun) -> Plan:
        budget = slot.sampler.budget
        if budget is not None and budget.exhausted():
            return Plan(slot, "budget")
        if slot.lane == "batch":  # spooled for the batch API: nothing asked or cached now
            return Plan(slot, "batch")
        key = cache_key(slot.scorer, run) if self.cache.enabled else None
        if key is None:
            return Plan(slot, "ask")
        cached = self.cache.get(key)
        if cached is not None:
            return Plan(slot, "cached", key, result=cached)
        shared = self.inflight.get(key)
        if shared is not None:
            return Plan(slot, "join", key, shared=shared)
        own: asyncio.Future[ScoreResult] = asyncio.get_running_loop().create_future()
        self.inflight[key] = own
        return Plan(slot, "ask", key, own=own)

    def answered(self, plan: Plan, result: ScoreResult) -> None:
        """The asked judgement is in: cached (a success), and handed to whoever joined."""
        if plan.own is None or plan.key is None:
            return
        self.cache.put(plan.key, result)
        if not plan.own.done():
            plan.own.set_result(result)
        self.inflight.pop(plan.key, None)

    def failed(self, plan: Plan, error: BaseException) -> None:
        """The asked judgement ended without a result: whoever joined gets the same end."""
        if plan.own is None or plan.key is None:
            return
        if not plan.own.done():
            if isinstance(error, asyncio.CancelledError):
                plan.own.cancel()
            else:
                plan.own.set_exception(error)
                plan.own.exception()  # retrieved here: joiners re-raise it, nobody else logs it
        self.inflight.pop(plan.key, None)


def cache_key(scorer: Scorer, run: ScorerRun) -> str | None:
    """The key of ``scorer``'s judgement of ``run`` (``None``: not cacheable)."""
    key_of = getattr(scorer, "cache_key", None)
    if key_of is None:
        return None
    key = key_of(run)
    return None if key is None else f"{getattr(scorer, 'name', '')}:{key}"
