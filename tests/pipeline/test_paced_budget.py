"""A budget that lasts its window (issue 38.3): with a token or cost budget the sampler judges
each run with the probability that spends the budget evenly over the hour, adapting to the
traffic, so a burst is thinned instead of spending the hour in its first minutes; the effective
ratio is a gauge and is stamped on each result; a spent budget still skips, counted."""

from __future__ import annotations

import random
from typing import Any

from otel_scorers import RubricScorer
from otel_scorers.judge.client import JudgeClient
from otel_scorers.pipeline import Sampling, ScorerSpec
from otel_scorers.pipeline.sampling import HourlyBudget, Pacer
from otel_scorers.testing import ScriptedJudgeServer, judge_responder
from tests.support import Telemetry, end_agent_span

BUDGET = 36_000  # tokens an hour: 360 evaluations of 100 tokens, one every 10 s on average
COST = 100


class Clock:
    def __init__(self) -> None:
        self.now = 60.0 * 16_667  # on a minute: the budget's buckets and the blocks align

    def __call__(self) -> float:
        return self.now


def simulate(paced: bool) -> tuple[list[float], list[float], list[tuple[float, float]]]:
    """An hour of traffic: 1 run a second, a burst of 20 a second in minutes 5-7. Returns the
    tokens spent per 10-minute block, per minute, and (time, effective ratio) samples."""
    clock = Clock()
    budget = HourlyBudget(BUDGET, None, clock=clock)
    pacer = Pacer(budget, clock=clock)
    rng = random.Random(7)
    start = clock.now
    blocks, minutes, ratios = [0.0] * 6, [0.0] * 60, []
    while clock.now < start + 3600:
        elapsed = clock.now - start
        per_second = 20 if 300 <= elapsed < 420 else 1
        for _ in range(per_second):
            keep, _ = pacer.admit(rng.getrandbits(128), 0) if paced else (True, 1.0)
            if keep and not budget.exhausted():
                budget.spend(COST, None)
                blocks[int(elapsed // 600)] += COST
                minutes[int(elapsed // 60)] += COST
        ratios.append((elapsed, pacer.ratio if paced else 1.0))
        clock.now += 1.0
    return blocks, minutes, ratios


def test_a_paced_budget_lasts_the_hour_and_thins_a_burst() -> None:
    blocks, minutes, ratios = simulate(paced=True)
    assert sum(blocks) <= BUDGET  # never over budget
    assert all(block > 0 for block in blocks), blocks  # every part of the hour is judged
    assert max(blocks) <= 2.5 * min(blocks), blocks  # spread, not first come
    assert max(minutes[5:7]) <= 12 * COST, minutes  # the burst: a few more, not the hour
    during = [r for t, r in ratios if 330 <= t < 420]
    before = [r for t, r in ratios if 200 <= t < 300]
    assert max(during) < min(before) / 5, (max(during), min(before))  # thinned evenly
    # first come, first served spends it all in the burst and leaves the rest unscored
    greedy, _, _ = simulate(paced=False)
    assert greedy[0] == BUDGET and sum(greedy[1:]) == 0, greedy


def test_the_effective_ratio_is_exported_and_stamped_on_each_result(
        judge_server: ScriptedJudgeServer, judge: JudgeClient, telemetry: Telemetry,
        make_processor: Any) -> None:
    judge_server.responder = judge_responder(prompt_tokens=100, completion_tokens=50)
    processor = make_processor([ScorerSpec(RubricScorer(judge, "- greets"), Sampling(
        budget_tokens_per_hour=3_600))])  # 1 token a second: far less than the traffic
    for index in range(40):
        end_agent_span(telemetry, prompt=f"question {index}")
        if index < 4:  # the first ones judged one by one: the pacer learns the cost
            assert processor.force_flush(60_000)
    assert processor.force_flush(60_000)
    stats = processor.stats()["rubric"]
    assert stats["scored"] >= 3 and stats.get("sampled_out", 0) > 0, stats
    rates = [span.attributes["otel_scorers.sample_rate"] for span in
             telemetry.evaluation_spans()]
    assert len(rates) == stats["scored"] and rates[0] == 1.0
    (gauge,) = telemetry.metrics()["otel_scorers.sampling.effective_ratio"]
    assert gauge[0] == {"scorer": "rubric"} and 0 < gauge[1] < 0.1, gauge


DAY_BUDGET = 864_000  # tokens a day: 8,640 evaluations of 100 tokens, one every 10 s on average


def test_a_per_day_ceiling_lasts_the_day_and_is_never_exceeded() -> None:
    """A day of traffic (1 run a second, 20 a second for two hours in the morning), a per-day
    ceiling alone: paced over the day, spread across it, never over it, the burst thinned."""
    clock = Clock()
    budget = HourlyBudget(None, None, day_tokens=DAY_BUDGET, clock=clock)
    pacer = Pacer(budget, clock=clock)
    rng = random.Random(11)
    start = clock.now
    blocks = [0.0] * 6  # tokens per four hours
    while clock.now < start + 86_400:
        elapsed = clock.now - start
        per_second = 20 if 3 * 3600 <= elapsed < 5 * 3600 else 1
        for _ in range(per_second):
            keep, _ = pacer.admit(rng.getrandbits(128), 0)
            if keep and not budget.exhausted():
                budget.spend(COST, None)
                blocks[int(elapsed // 14_400)] += COST
        clock.now += 1.0
    assert sum(blocks) <= DAY_BUDGET  # never over the ceiling
    assert all(block > 0 for block in blocks), blocks  # every part of the day is judged
    assert max(blocks) <= 2.5 * min(blocks), blocks  # spread over the day, burst included
    # the ceiling is a hard stop too: spent, nothing more until the oldest hour leaves
    budget.spend(DAY_BUDGET, None)
    assert budget.exhausted() and budget.day_exhausted()
    clock.now += 86_400
    assert not budget.exhausted()


def test_a_spent_day_ceiling_skips_runs_and_says_which_setting(
        judge_server: ScriptedJudgeServer, judge: JudgeClient, telemetry: Telemetry,
        make_processor: Any, caplog: Any) -> None:
    judge_server.responder = judge_responder()  # 150 tokens a call: the day holds two
    processor = make_processor([ScorerSpec(RubricScorer(judge, "- x"), Sampling(
        budget_tokens_per_hour=10_000, budget_tokens_per_day=300, pace_budget=False))],
        concurrency=1)
    for index in range(5):
        end_agent_span(telemetry, prompt=f"q{index}")
        assert processor.force_flush(30_000)
    assert processor.stats()["rubric"] == {"selected": 5, "scored": 2, "budget_exhausted": 3}
    lines = [r.getMessage() for r in caplog.records if "ceiling" in r.getMessage()]
    assert len(lines) == 1 and "OTEL_SCORERS_BUDGET_TOKENS_PER_DAY" in lines[0], lines


def test_the_day_ceiling_is_a_setting(monkeypatch: Any) -> None:
    from otel_scorers.config import load_settings
    from otel_scorers.pipeline.build import sampling_from
    from otel_scorers.pipeline.sampling import Sampler

    monkeypatch.setenv("OTEL_SCORERS_BUDGET_COST_PER_DAY", "12.5")
    sampling = sampling_from(load_settings({}).settings.sampling)
    assert sampling.budget_cost_per_day == 12.5
    budget = Sampler(sampling).budget
    assert budget is not None and budget.day_cost == 12.5 and budget.max_cost is None
