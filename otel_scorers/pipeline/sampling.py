"""Which selected runs a scorer judges: trace-id ratio, stratification, rate limit, budget.

The ratio decision is a pure function of the trace id and a salt: the same trace gets the same
decision in every process, and scorers sharing a salt agree (so one trace is judged by all of
them or by none). Error spans and chosen attribute values can get their own, higher, ratio.
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode
from pydantic import ValidationError

from otel_scorers.config.settings import SamplingSettings
from otel_scorers.errors import ConfigError

__all__ = ["Boost", "HourlyBudget", "RateLimiter", "Sampler", "Sampling", "trace_fraction"]

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
    judging for the rest of the hour once spent.
    """

    ratio: float = 1.0
    error_ratio: float | None = None
    boosts: Sequence[Boost] = ()
    rate_limit: float | None = None
    budget_tokens_per_hour: int | None = None
    budget_cost_per_hour: float | None = None
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
        self.budget = (HourlyBudget(policy.budget_tokens_per_hour, policy.budget_cost_per_hour)
                       if policy.budget_tokens_per_hour or policy.budget_cost_per_hour else None)

    def reset_after_fork(self) -> None:
        """In a forked child: fresh locks for the rate limiter and the budget."""
        for part in (self.limiter, self.budget):
            if part is not None:
                part.reset_after_fork()

    def sampled(self, span: ReadableSpan) -> bool:
        ratio = self.policy.ratio_for(span)
        if ratio >= 1.0:
            return True
        if ratio <= 0.0 or span.context is None:
            return False
        return trace_fraction(span.context.trace_id, self.salt) < ratio

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
    """Tokens and cost spent over the last hour, in one-minute buckets.

    A call with no cost (a model missing from litellm's price table) is counted at
    :data:`UNPRICED_USD_PER_1K_TOKENS`, so a cost budget still trips; ``unpriced`` counts them.
    """

    def __init__(self, tokens: int | None, cost: float | None, *,
                 clock: Any = time.monotonic) -> None:
        self.max_tokens = tokens
        self.max_cost = cost
        self.unpriced = 0
        self._clock = clock
        self._buckets: dict[int, list[float]] = {}
        self._lock = threading.Lock()

    def reset_after_fork(self) -> None:
        self._lock = threading.Lock()

    def _minute(self) -> int:
        return int(self._clock() // 60)

    def spend(self, tokens: int, cost: float | None) -> None:
        if cost is None and self.max_cost is not None and tokens:
            self.unpriced += 1
            cost = max(UNPRICED_MIN_USD_PER_CALL, tokens / 1000 * UNPRICED_USD_PER_1K_TOKENS)
        minute = self._minute()
        with self._lock:
            bucket = self._buckets.setdefault(minute, [0.0, 0.0])
            bucket[0] += tokens
            bucket[1] += cost or 0.0
            for old in [m for m in self._buckets if m <= minute - 60]:
                del self._buckets[old]

    def spent(self) -> tuple[float, float]:
        minute = self._minute()
        with self._lock:
            live = [b for m, b in self._buckets.items() if m > minute - 60]
        return sum(b[0] for b in live), sum(b[1] for b in live)

    def exhausted(self) -> bool:
        tokens, cost = self.spent()
        return bool((self.max_tokens is not None and tokens >= self.max_tokens)
                    or (self.max_cost is not None and cost >= self.max_cost))
