"""The trajectory scorer's formulas against hand-computed values (Mastra's where its tests
and docs give them: packages/evals/src/scorers/code/trajectory and utils.ts)."""

from __future__ import annotations

from typing import Any

import pytest

from otel_scorers import ConfigError, TrajectoryScorer
from otel_scorers.scorers.run import ScorerRun


def tool(name: str, arguments: str | None = None, *, error: str | None = None,
         start: int = 0, end: int = 0) -> dict[str, Any]:
    return {"kind": "tool", "name": name, "arguments": arguments, "result": "ok",
            "error": error, "start_ns": start, "end_ns": end}


def run_of(*steps: dict[str, Any], **extra: Any) -> ScorerRun:
    llm = {"kind": "llm", "name": "model", "input_tokens": 100, "output_tokens": 20}
    return ScorerRun.coerce({"input": "q", "output": "a", "steps": [llm, *steps], **extra})


def parts(result: Any) -> dict[str, float]:
    return {c.id: c.score for c in result.analysis.criteria}


def test_relaxed_order_allows_steps_between_and_has_no_extra_penalty() -> None:
    # Mastra: "should return 1 when expected steps are present with extra steps in between"
    result = TrajectoryScorer(["search", "summarize"], no_redundant_calls=False).run(
        run_of(tool("search"), tool("log"), tool("summarize")))
    assert result.score == 1.0 and result.passed
    assert result.analysis.extra_steps == ("log",)


def test_relaxed_order_is_greedy_in_order() -> None:
    result = TrajectoryScorer(["summarize", "search"], no_redundant_calls=False).run(
        run_of(tool("search"), tool("summarize")))
    assert result.score == 0.5  # summarize matched; search only before it: out of order
    assert result.analysis.out_of_order_steps == ("search",)
    assert not result.passed and result.label == "fail"


def test_strict_order_costs_half_per_extra_step_over_expected() -> None:
    # Mastra's test: one extra step in strict mode gives 0.75
    result = TrajectoryScorer(["search", "summarize"], ordering="strict",
                              no_redundant_calls=False).run(
        run_of(tool("search"), tool("summarize"), tool("log")))
    assert result.score == 0.75
    shifted = TrajectoryScorer(["search", "summarize"], ordering="strict",
                               no_redundant_calls=False).run(
        run_of(tool("search"), tool("log"), tool("summarize")))
    assert shifted.score == 0.25  # 1 of 2 in place, minus 0.5 x 1/2


def test_unordered_matches_each_expected_step_once() -> None:
    scorer = TrajectoryScorer(["summarize", "search", "search"], ordering="unordered",
                              no_redundant_calls=False)
    assert scorer.run(run_of(tool("search"), tool("summarize"))).score == 0.67


def test_repeated_steps_cost_a_tenth_per_name_when_not_allowed() -> None:
    scorer = TrajectoryScorer(["search"], allow_repeated_steps=False, no_redundant_calls=False)
    result = scorer.run(run_of(tool("search", '{"q": 1}'), tool("search", '{"q": 2}'),
                               tool("log"), tool("log")))
    assert result.score == 0.8  # 1.0 - 0.1 x {search, log}


def test_expected_arguments_are_a_subset_with_key_order_ignored() -> None:
    scorer = TrajectoryScorer([{"name": "get_weather", "arguments": {"city": "Paris"}}],
                              no_redundant_calls=False)
    assert scorer.run(run_of(tool("get_weather", '{"units": "C", "city": "Paris"}'))).score == 1
    assert scorer.run(run_of(tool("get_weather", '{"city": "Lima"}'))).score == 0
    assert scorer.run(run_of(tool("get_weather", "not json"))).score == 0


def test_efficiency_budgets_and_redundant_calls() -> None:
    # Mastra: maxSteps 5 with 7 steps -> 1 - 2/5 = 0.6, averaged with no redundancy (1) -> 0.8
    steps = [tool(f"t{i}") for i in range(7)]
    result = TrajectoryScorer(max_steps=5).run(run_of(*steps))
    assert parts(result) == {"efficiency": 0.8} and result.score == 0.8
    # two identical consecutive calls: 1 - 0.2; tokens over budget: 120 of 60 -> 0
    redundant = run_of(tool("search", '{"a": 1, "b": 2}'), tool("search", '{"b": 2, "a": 1}'))
    assert TrajectoryScorer().run(redundant).score == 0.8
    assert TrajectoryScorer(max_total_tokens=60, no_redundant_calls=False).run(
        redundant).score == 0.0
    timed = run_of(tool("a", start=1_000_000_000, end=2_000_000_000),
                   tool("b", start=2_000_000_000, end=5_000_000_000))
    assert TrajectoryScorer(max_duration_s=3, no_redundant_calls=False).run(timed).score == 0.67


def test_weights_are_renormalised_over_the_active_parts() -> None:
    # accuracy 0.5 and efficiency 1.0: (0.4 x 0.5 + 0.3 x 1) / 0.7 = 0.714 -> 0.71 (Mastra)
    result = TrajectoryScorer(["search", "answer"]).run(run_of(tool("search")))
    assert parts(result) == {"accuracy": 0.5, "efficiency": 1.0}
    assert result.score == 0.71


def test_a_blacklisted_tool_or_sequence_zeroes_the_whole_score() -> None:
    scorer = TrajectoryScorer(["search"], blacklist=["delete_all"])
    assert scorer.run(run_of(tool("search"))).score == 1.0
    result = scorer.run(run_of(tool("search"), tool("delete_all")))
    assert result.score == 0.0 and not result.passed
    assert "delete_all" in result.reason
    sequence = TrajectoryScorer(blacklisted_sequences=[["escalate", "admin_override"]])
    assert sequence.run(run_of(tool("escalate"), tool("admin_override"))).score == 0
    assert sequence.run(run_of(tool("escalate"), tool("log"), tool("admin_override"))).score == 1


def test_tool_failures_count_only_retries_past_the_allowance() -> None:
    failing = [tool("fetch", error="timeout") for _ in range(3)]
    result = TrajectoryScorer(no_redundant_calls=False).run(run_of(*failing, tool("fetch")))
    assert parts(result) == {"tool_failures": 0.8}  # 3 retries, 2 allowed: one costs 0.2
    assert result.analysis.tool_errors == 3 and result.analysis.tool_calls == 4
    # a single failure not retried is no pattern: the part is not active (Mastra)
    assert parts(TrajectoryScorer(no_redundant_calls=False).run(
        run_of(tool("fetch", error="x"), tool("other")))) == {}


def test_a_run_can_bring_its_own_expected_trajectory() -> None:
    scorer = TrajectoryScorer(["search"], blacklist=["rm"])
    own = run_of(tool("lookup"), request_context={"expected_trajectory": ["lookup"]})
    assert scorer.run(own).score == 1.0
    options = run_of(tool("lookup"), tool("rm"), request_context={
        "expected_trajectory": {"steps": ["lookup"], "maxSteps": 5}})
    assert scorer.run(options).score == 0.0  # the scorer's blacklist still holds
    bad = scorer.run(run_of(tool("x"), request_context={"expected_trajectory": {"maxSteps": -1}}))
    assert bad.error is not None and bad.error.type == "invalid_input"


def test_a_run_without_steps_is_skipped_not_scored() -> None:
    result = TrajectoryScorer(["search"]).run({"input": "q", "output": "a"})
    assert result.skipped == "no_steps" and result.reported().score is None


def test_llm_calls_are_not_trajectory_steps_but_count_tokens() -> None:
    result = TrajectoryScorer(["search"], ordering="strict", no_redundant_calls=False).run(
        run_of(tool("search")))
    assert result.score == 1.0 and result.analysis.total_tokens == 0  # efficiency off
    assert TrajectoryScorer(max_total_tokens=1000).run(run_of(tool("a"))).analysis \
        .total_tokens == 120


@pytest.mark.parametrize("bad", [dict(ordering="sideways"), dict(max_steps=0),
                                 dict(max_retries_per_tool=-1), dict(expected="search"),
                                 dict(pass_threshold=2)])
def test_bad_options_are_config_errors(bad: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        TrajectoryScorer(**bad)
