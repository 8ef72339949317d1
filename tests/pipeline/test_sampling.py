"""Deterministic trace-id sampling, stratification, rate limit and hourly budget."""

from __future__ import annotations

import math
import random
import subprocess
import sys
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, Status, StatusCode, TraceFlags

from otel_scorers import ConfigError
from otel_scorers.pipeline.sampling import (
    Boost,
    HourlyBudget,
    RateLimiter,
    Sampler,
    Sampling,
    trace_fraction,
)

RESOURCE = Resource.get_empty()  # the default Resource.create() runs detectors: slow
_RNG = random.Random(7)
IDS = [_RNG.getrandbits(128) for _ in range(20_000)]


def span(trace_id: int, *, error: bool = False, attrs: dict[str, str] | None = None
         ) -> ReadableSpan:
    return ReadableSpan(name="agent", context=SpanContext(trace_id, 1, False, TraceFlags(1)),
                        attributes=attrs or {}, resource=RESOURCE,
                        status=Status(StatusCode.ERROR if error else StatusCode.UNSET))


def test_same_trace_same_decision_everywhere() -> None:
    a, b = Sampler(Sampling(ratio=0.3)), Sampler(Sampling(ratio=0.3))
    assert [a.sampled(span(t)) for t in IDS[:2000]] == [b.sampled(span(t)) for t in IDS[:2000]]


def test_decisions_match_across_processes() -> None:
    code = ("from otel_scorers.pipeline.sampling import trace_fraction, _salt64\n"
            f"ids = {IDS[:50]!r}\n"
            "print([trace_fraction(t, _salt64('s')) for t in ids])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    from otel_scorers.pipeline.sampling import _salt64
    assert eval(out) == [trace_fraction(t, _salt64("s")) for t in IDS[:50]]


def test_scorers_sharing_a_salt_agree_and_nest() -> None:
    low, high = Sampler(Sampling(ratio=0.2)), Sampler(Sampling(ratio=0.6))
    for trace_id in IDS[:5000]:
        if low.sampled(span(trace_id)):
            assert high.sampled(span(trace_id))  # a trace judged at 20% is judged at 60%
    other = Sampler(Sampling(ratio=0.2, salt="other"))
    same = sum(low.sampled(span(t)) == other.sampled(span(t)) for t in IDS[:5000])
    assert same < 4500  # a different salt is an independent draw


@pytest.mark.parametrize("ratio", [0.01, 0.1, 0.5, 0.9])
def test_realized_rate_within_bounds(ratio: float) -> None:
    sampler = Sampler(Sampling(ratio=ratio))
    hits = sum(sampler.sampled(span(t)) for t in IDS)
    expected = ratio * len(IDS)
    sigma = math.sqrt(len(IDS) * ratio * (1 - ratio))
    assert abs(hits - expected) < 4 * sigma, (hits, expected)


def test_ratio_edges() -> None:
    assert all(Sampler(Sampling(ratio=1.0)).sampled(span(t)) for t in IDS[:100])
    assert not any(Sampler(Sampling(ratio=0.0)).sampled(span(t)) for t in IDS[:100])


def test_error_spans_and_boosts() -> None:
    sampler = Sampler(Sampling(ratio=0.0, error_ratio=1.0,
                               boosts=(Boost("tier", "gold", 1.0), Boost("tier", "free", 0.0))))
    assert sampler.sampled(span(IDS[0], error=True))
    assert not sampler.sampled(span(IDS[0]))
    assert sampler.sampled(span(IDS[0], attrs={"tier": "gold"}))
    assert not sampler.sampled(span(IDS[0], error=True, attrs={"tier": "free"}))


@pytest.mark.parametrize("kwargs", [
    {"ratio": 1.5}, {"ratio": -0.1}, {"error_ratio": 2}, {"rate_limit": 0},
    {"budget_tokens_per_hour": -5}, {"budget_cost_per_hour": float("inf")},
    {"boosts": (Boost("a", "b", 3.0),)},
])
def test_bad_sampling_is_config_error(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        Sampling(**kwargs)  # type: ignore[arg-type]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_rate_limiter_token_bucket() -> None:
    clock = Clock()
    limiter = RateLimiter(2.0, clock=clock)
    assert [limiter.allow() for _ in range(3)] == [True, True, False]
    clock.now += 0.5
    assert limiter.allow() and not limiter.allow()


def test_hourly_budget_window() -> None:
    clock = Clock()
    budget = HourlyBudget(tokens=1000, cost=None, clock=clock)
    budget.spend(600, None)
    assert not budget.exhausted()
    clock.now += 30 * 60
    budget.spend(500, None)
    assert budget.exhausted()
    clock.now += 31 * 60  # the first spend left the window
    assert not budget.exhausted()
    cost = HourlyBudget(tokens=None, cost=0.01, clock=clock)
    cost.spend(10, 0.02)
    assert cost.exhausted()


def test_a_cost_budget_trips_for_a_model_litellm_cannot_price(
        telemetry: Any, make_processor: Any, judge: Any, judge_server: Any,
        caplog: pytest.LogCaptureFixture) -> None:
    # the scripted judge's model is in no price table: its cost is None. The budget must not
    # become unlimited: each call counts an estimate, and a warning says so, once.
    from otel_scorers import RubricScorer
    from otel_scorers.pipeline import Sampling
    from otel_scorers.pipeline.sampling import UNPRICED_USD_PER_1K_TOKENS
    from otel_scorers.testing import judge_responder
    from tests.support import end_agent_span

    judge_server.responder = judge_responder()  # 150 tokens per call
    per_call = 150 / 1000 * UNPRICED_USD_PER_1K_TOKENS
    with caplog.at_level("WARNING", logger="otel_scorers"):
        processor = make_processor([RubricScorer(judge, "- greets")],
                                   sampling=Sampling(budget_cost_per_hour=per_call * 3.5,
                                                         pace_budget=False))
        for i in range(8):
            end_agent_span(telemetry, prompt=f"hello {i}")
            processor.force_flush(10_000)
    assert processor.stats()["rubric"] == {"selected": 8, "scored": 4, "budget_exhausted": 4}
    warnings = [r.getMessage() for r in caplog.records if "has no price" in r.getMessage()]
    assert len(warnings) == 1 and "openai/scripted-judge" in warnings[0]
