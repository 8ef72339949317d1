"""Which selected runs a scorer judges: trace-id ratio, stratification, rate limit, budget.

The ratio decision is a pure function of the trace id and a salt: the same trace gets the same
decision in every process, and scorers sharing a salt agree (so one trace is judged by all of
them or by none). Error spans and chosen attribute values can get their own, higher, ratio.

A budget lasts its hour (``pace_budget``, on by default with a budget): a :class:`Pacer`
measures the traffic (sampled runs per second over the last minute) and what one evaluation
costs (tokens and USD over the last hour), and judges each run with the probability that
spends the budget at an even rate, ``(budget / 3600 s) / (runs per second x cost per run)``,
capped at 1. A burst of ten times the traffic is judged at a tenth of the rate, evenly (the
decision is a function of the trace id, as the ratio's), instead of spending the hour in its
first minutes and leaving the rest unscored. The effective ratio (the policy's ratio times the
pacer's) is a gauge (``otel_scorers.sampling.effective_ratio``) and is stamped on every result
(``otel_scorers.sample_rate``), so rates stay unbiased and counts can be weighted. The hard stop
stays: a spent budget skips runs, counted ``budget_exhausted``.

A per-day ceiling (``budget_tokens_per_day`` / ``budget_cost_per_day``) bounds the last 24 hours
as the hourly budget bounds the last hour, alone or beside it: paced too (its share of a second
is a 86,400th of it, so a day's ceiling alone spreads evenly over the day), and a hard stop when
spent. Both are rolling windows of this process (hour buckets for the day): a restart starts them
anew, so run one scoring process per budget (the gateway) where the ceiling must hold across
restarts.
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode
from pydantic import ValidationError

from otel_scorers.config.settings import SamplingSettings
from otel_scorers.errors import ConfigError

__all__ = ["Boost", "HourlyBudget", "Pacer", "RateLimiter", "Sampler", "Sampling",
           "trace_fraction"]

_MASK64 = (1 << 64) - 1
_TWO64 = float(1 << 64)


def _salt64(salt: str) -> int:
    return int.from_bytes(hashlib.blake2b(salt.encode(), digest_size=8).digest(), "big")


def trace_fraction(trace_id: int, salt: int = 0) -> float:
    """A uniform value in [0, 1) from the trace id: splitmix64 of its low 64 bits xor the salt."""
    z = (((trace_id & _MASK64) ^ salt) + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return (z ^ (z >> 31)) / _TWO64


@dataclass(frozen=True)
class Boost:
    """Sample spans whose ``attribute`` equals ``value`` at ``ratio`` instead."""

    attribute: str
    value: Any
    ratio: float


@dataclass(frozen=True)
class Sampling:
    """A scorer's sampling policy.

    ``ratio`` of traces are judged; spans with error status use ``error_ratio`` when set;
    ``boosts`` override both for chosen attribute values (first match wins). ``rate_limit``
    caps evaluations per second; ``budget_tokens_per_hour`` / ``budget_cost_per_hour`` stop
    judging for the rest of the hour once spent, ``budget_tokens_per_day`` /
    ``budget_cost_per_day`` for the rest of the (rolling) day.
    """

    ratio: float = 1.0
    error_ratio: float | None = None
    boosts: Sequence[Boost] = ()
    rate_limit: float | None = None
    budget_tokens_per_hour: int | None = None
    budget_cost_per_hour: float | None = None
    budget_tokens_per_day: int | None = None
    budget_cost_per_day: float | None = None
    pace_budget: bool = True
    salt: str = ""

    def __post_init__(self) -> None:
        """Checked by the settings model of the same fields (:class:`SamplingSettings`: one
        place for the bounds); a bad value is a :class:`ConfigError` naming it."""
        if not all(isinstance(boost, Boost) for boost in self.boosts):
            raise ConfigError(f"sampling boosts are Boost(attribute, value, ratio), got "
                              f"{list(self.boosts)!r}")
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        values["boosts"] = [dataclasses.asdict(boost) for boost in self.boosts]
        try:
            SamplingSettings.model_validate(values, strict=False)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            raise ConfigError(f"sampling {where}: {first['msg']}, got "
                              f"{first.get('input')!r}") from None

    def ratio_for(self, span: ReadableSpan) -> float:
        if self.boosts:
            attrs: Mapping[str, Any] = span.attributes or {}
            for boost in self.boosts:
                if attrs.get(boost.attribute) == boost.value:
                    return boost.ratio
        if self.error_ratio is not None and span.status.status_code is StatusCode.ERROR:
            return self.error_ratio
        return self.ratio


class Sampler:
    """A :class:`Sampling` policy bound to its salt, rate limiter and budget (one per scorer)."""

    def __init__(self, policy: Sampling) -> None:
        self.policy = policy
        self.salt = _salt64(policy.salt) if policy.salt else 0
        self.limiter = RateLimiter(policy.rate_limit) if policy.rate_limit else None
        self.budget = (HourlyBudget(policy.budget_tokens_per_hour, policy.budget_cost_per_hour,
                                    day_tokens=policy.budget_tokens_per_day,
                                    day_cost=policy.budget_cost_per_day)
                       if policy.budget_tokens_per_hour or policy.budget_cost_per_hour
                       or policy.budget_tokens_per_day or policy.budget_cost_per_day else None)
        self.pacer = Pacer(self.budget) if self.budget is not None and policy.pace_budget \
            else None
        #: trace id -> the effective ratio it was sampled at (bounded; read when emitting)
        self._rates: OrderedDict[int, float] = OrderedDict()
        self._rates_lock = threading.Lock()

    def reset_after_fork(self) -> None:
        """In a forked child: fresh locks for the rate limiter and the budget."""
        for part in (self.limiter, self.budget, self.pacer):
            if part is not None:
                part.reset_after_fork()
        self._rates_lock = threading.Lock()

    def sampled(self, span: ReadableSpan) -> bool:
        ratio = self.policy.ratio_for(span)
        if ratio >= 1.0:
            return True
        if ratio <= 0.0 or span.context is None:
            return False
        return trace_fraction(span.context.trace_id, self.salt) < ratio

    def paced(self, span: ReadableSpan) -> bool:
        """Whether the pacer keeps a sampled span (always without one), its effective ratio
        kept for :meth:`rate_of`."""
        if self.pacer is None:
            return True
        ratio = self.policy.ratio_for(span)
        if span.context is None:
            return True
        keep, paced = self.pacer.admit(span.context.trace_id, self.salt)
        if keep:
            with self._rates_lock:
                self._rates[span.context.trace_id] = ratio * paced
                if len(self._rates) > MAX_TRACKED:
                    self._rates.popitem(last=False)
        return keep

    def rate_of(self, trace_id: int) -> float | None:
        """The effective ratio the trace was sampled at, when the pacer decided it."""
        with self._rates_lock:
            return self._rates.get(trace_id)

    @property
    def effective_ratio(self) -> float:
        """The policy's ratio times the pacer's, now."""
        return self.policy.ratio * (self.pacer.ratio if self.pacer is not None else 1.0)

    def sampled_key(self, key: str) -> bool:
        """Whether the session ``key`` is judged: the plain ratio, as a pure function of the
        key and the salt (every process decides alike, and a session is judged whole)."""
        ratio = self.policy.ratio
        if ratio >= 1.0:
            return True
        if ratio <= 0.0:
            return False
        return trace_fraction(key_hash(key), self.salt) < ratio


def key_hash(key: str) -> int:
    """A 64-bit hash of a text key, the same in every process (unlike ``hash``)."""
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8", "surrogatepass"),
                                          digest_size=8).digest(), "big")


#: Traces whose effective ratio a sampler remembers until their results are emitted.
MAX_TRACKED = 10_000
#: The pacer's view of the traffic: sampled runs over the last minute, or over the last few
#: seconds when that is more (a burst is seen at once).
PACE_WINDOW_S = 60.0
PACE_BURST_S = 5.0
#: Evaluations whose cost the pacer waits for before it paces (until then, every run).
PACE_MIN_JUDGED = 3
_PACE_SALT = 0x5A17_C0DE_B0D6_E7A1


class Pacer:
    """Spreads a budget over its hour (see the module docstring)."""

    def __init__(self, budget: HourlyBudget, *, clock: Any = time.monotonic) -> None:
        self.budget = budget
        self.ratio = 1.0
        self._clock = clock
        self._started = clock()
        self._arrivals: deque[float] = deque(maxlen=1_000_000)
        self._lock = threading.Lock()

    def reset_after_fork(self) -> None:
        self._lock = threading.Lock()

    def admit(self, trace_id: int, salt: int) -> tuple[bool, float]:
        """Keep a sampled run or not, and the ratio it was decided at."""
        now = self._clock()
        with self._lock:
            arrivals = self._arrivals
            arrivals.append(now)
            while arrivals and arrivals[0] <= now - PACE_WINDOW_S:
                arrivals.popleft()
            seconds = max(1.0, min(PACE_WINDOW_S, now - self._started))
            # a burst shows in the last few seconds long before it moves the minute's mean
            recent = len(arrivals) - bisect.bisect_right(arrivals, now - PACE_BURST_S)
            per_second = max(len(arrivals) / seconds,
                             recent / max(1.0, min(PACE_BURST_S, now - self._started)))
        self.ratio = ratio = self._ratio(per_second)
        return ratio >= 1.0 or trace_fraction(trace_id, salt ^ _PACE_SALT) < ratio, ratio

    def _ratio(self, per_second: float) -> float:
        tokens, cost, judged = self.budget.spent_with_count()
        if judged < PACE_MIN_JUDGED or per_second <= 0:
            return 1.0
        ratio = 1.0
        budget = self.budget
        for limit, seconds, spent in ((budget.max_tokens, 3600.0, tokens),
                                      (budget.max_cost, 3600.0, cost),
                                      (budget.day_tokens, 86_400.0, tokens),
                                      (budget.day_cost, 86_400.0, cost)):
            if limit is not None and spent > 0:  # (what a run costs: the last hour's mean)
                ratio = min(ratio, (limit / seconds) / (per_second * spent / judged))
        return ratio


class RateLimiter:
    """A token bucket: ``rate`` evaluations per second, bursts up to ``max(1, rate)``."""

    def __init__(self, rate: float, *, clock: Any = time.monotonic) -> None:
        self.rate = rate
        self.capacity = max(1.0, rate)
        self._tokens = self.capacity
        self._clock = clock
        self._last = clock()
        self._lock = threading.Lock()

    def reset_after_fork(self) -> None:
        self._lock = threading.Lock()

    def allow(self) -> bool:
        with self._lock:
            now = self._clock()
            self._tokens = min(self.capacity, self._tokens + (now - self._last) * self.rate)
            self._last = now
            if self._tokens >= 1.0:
                self._tokens -= 1.0
                return True
            return False


#: What a judge call litellm cannot price counts against ``budget_cost_per_hour``: USD per
#: 1,000 tokens (a mid-range hosted model's rate), and at least this much per call (when the
#: provider reports no usage either). A budget is never silently unlimited.
UNPRICED_USD_PER_1K_TOKENS = 0.01
UNPRICED_MIN_USD_PER_CALL = 0.001


class HourlyBudget:
    """Tokens and cost spent over the last hour, in one-minute buckets, and with a per-day
    ceiling (``day_tokens``, ``day_cost``) over the last 24 hours, in one-hour buckets.

    A call with no cost (a model missing from litellm's price table) is counted at
    :data:`UNPRICED_USD_PER_1K_TOKENS`, so a cost budget still trips; ``unpriced`` counts them.
    """

    def __init__(self, tokens: int | None, cost: float | None, *,
                 day_tokens: int | None = None, day_cost: float | None = None,
                 clock: Any = time.monotonic) -> None:
        self.max_tokens = tokens
        self.max_cost = cost
        self.day_tokens, self.day_cost = day_tokens, day_cost
        self.unpriced = 0
        self._clock = clock
        self._buckets: dict[int, list[float]] = {}
        self._hours: dict[int, list[float]] = {}
        self._lock = threading.Lock()

    def reset_after_fork(self) -> None:
        self._lock = threading.Lock()

    def _minute(self) -> int:
        return int(self._clock() // 60)

    def spend(self, tokens: int, cost: float | None) -> None:
        if cost is None and (self.max_cost is not None or self.day_cost is not None) \
                and tokens:
            self.unpriced += 1
            cost = max(UNPRICED_MIN_USD_PER_CALL, tokens / 1000 * UNPRICED_USD_PER_1K_TOKENS)
        minute = self._minute()
        with self._lock:
            bucket = self._buckets.setdefault(minute, [0.0, 0.0, 0.0])
            bucket[0] += tokens
            bucket[1] += cost or 0.0
            bucket[2] += 1
            for old in [m for m in self._buckets if m <= minute - 60]:
                del self._buckets[old]
            if self.day_tokens is not None or self.day_cost is not None:
                hour = minute // 60
                day = self._hours.setdefault(hour, [0.0, 0.0])
                day[0] += tokens
                day[1] += cost or 0.0
                for old in [h for h in self._hours if h <= hour - 24]:
                    del self._hours[old]

    def spent(self) -> tuple[float, float]:
        tokens, cost, _ = self.spent_with_count()
        return tokens, cost

    def spent_with_count(self) -> tuple[float, float, int]:
        """Tokens, cost and evaluations of the last hour."""
        minute = self._minute()
        with self._lock:
            live = [b for m, b in self._buckets.items() if m > minute - 60]
        return (sum(b[0] for b in live), sum(b[1] for b in live), int(sum(b[2] for b in live)))

    def spent_today(self) -> tuple[float, float]:
        """Tokens and cost of the last 24 hours (counted only with a per-day ceiling)."""
        hour = self._minute() // 60
        with self._lock:
            live = [b for h, b in self._hours.items() if h > hour - 24]
        return sum(b[0] for b in live), sum(b[1] for b in live)

    def exhausted(self) -> bool:
        tokens, cost = self.spent()
        if (self.max_tokens is not None and tokens >= self.max_tokens) or \
                (self.max_cost is not None and cost >= self.max_cost):
            return True
        if self.day_tokens is None and self.day_cost is None:
            return False
        tokens, cost = self.spent_today()
        return bool((self.day_tokens is not None and tokens >= self.day_tokens)
                    or (self.day_cost is not None and cost >= self.day_cost))

    def day_exhausted(self) -> bool:
        """Whether it is the day's ceiling that is spent (what the skip's line names)."""
        if self.day_tokens is None and self.day_cost is None:
            return False
        tokens, cost = self.spent_today()
        return bool((self.day_tokens is not None and tokens >= self.day_tokens)
                    or (self.day_cost is not None and cost >= self.day_cost))
