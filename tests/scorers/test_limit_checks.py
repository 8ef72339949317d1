"""The length, latency and cost checks: ``max_length`` / ``min_length`` (characters, words,
tokens estimated), ``max_duration``, ``max_tokens``, ``max_cost`` (litellm's price map) and
``max_llm_calls``; what the run does not record is an ``invalid_input`` error result, never a
pass, and a sum under the limit past the steps kept is not decided."""

from __future__ import annotations

from typing import Any

import pytest

from otel_scorers import ChecksScorer, ConfigError, checks
from otel_scorers.scorers import limits
from otel_scorers.scorers.run import ScorerRun


def llm(model: str = "gpt-4o-mini", inp: int | None = 1000, out: int | None = 500
        ) -> dict[str, Any]:
    return {"kind": "llm", "name": model, "input_tokens": inp, "output_tokens": out}


def run_of(output: str = "It is sunny in Paris today.", steps: list[dict[str, Any]] | None
           = None, **extra: Any) -> ScorerRun:
    return ScorerRun.coerce({"input": "Weather?", "output": output,
                             "steps": steps if steps is not None else [llm(), llm()], **extra})


def decide(spec: str, run: ScorerRun) -> tuple[bool | None, str]:
    return checks.parse_check(spec)(run)


def test_length_in_characters_words_and_estimated_tokens() -> None:
    run = run_of("one two three four five")  # 23 characters, 5 words, 6 tokens estimated
    assert decide("max_length 23", run)[0] is True
    assert decide("max_length 22 chars", run)[0] is False
    assert decide("max_length 5 words", run)[0] is True
    assert decide("min_length 6 words", run)[0] is False
    held, why = decide("max_length 5 tokens", run)
    assert held is False and "6 tokens (estimated" in why
    assert checks.parse_check("max_length 200 words").id == "max_length_200_words"
    with pytest.raises(ConfigError, match="counts chars, words, tokens"):
        checks.parse_check("max_length 10 lines")
    with pytest.raises(ConfigError, match="whole number"):
        checks.parse_check("min_length many")


def test_max_duration_reads_the_interactions_span() -> None:
    run = run_of(duration_ns=2_500_000_000)
    assert decide("max_duration 3s", run)[0] is True
    held, why = decide("max_duration 2500ms", run)
    assert held is True
    held, why = decide("max_duration 2.4", run)
    assert held is False and "2.5 s" in why
    assert checks.parse_check("max_duration 1m").id == "max_duration_60s"
    result = ChecksScorer(["max_duration 5s"]).run(run_of())
    assert result.error is not None and "duration is unknown" in result.reason
    with pytest.raises(ConfigError, match="needs a duration"):
        checks.parse_check("max_duration soon")


def test_max_tokens_and_max_llm_calls_sum_the_runs_usage() -> None:
    run = run_of()
    assert decide("max_tokens 3000", run)[0] is True
    held, why = decide("max_tokens 2999", run)
    assert held is False and "3000 tokens in 2 LLM call(s)" in why
    assert decide("max_llm_calls 2", run)[0] is True
    assert decide("max_llm_calls 1", run)[0] is False
    silent = run_of(steps=[llm(inp=None, out=None)])
    result = ChecksScorer(["max_tokens 10"]).run(silent)
    assert result.error is not None and result.error.type == "invalid_input"


def test_max_cost_prices_by_litellms_map_and_says_when_it_is_an_estimate() -> None:
    price = limits._price("gpt-4o-mini")
    assert price is not None and price[0] > 0  # litellm's own map, read without litellm
    expected = 2 * (1000 * price[0] + 500 * price[1])
    run = run_of()
    assert decide(f"max_cost {expected * 1.01}", run)[0] is True
    held, why = decide(f"max_cost {expected * 0.99}", run)
    assert held is False and f"${expected:.6f}" in why
    mixed = run_of(steps=[llm(), llm(model="my-private-model")])
    held, why = decide(f"max_cost {expected}", mixed)
    assert held is True and "an estimate" in why and "'my-private-model'" in why
    result = ChecksScorer(["max_cost 1"]).run(run_of(steps=[llm(model="my-private-model")]))
    assert result.error is not None and "has both its usage and a price" in result.reason
    assert checks.parse_check("max_cost $0.02").id == "max_cost_0_02"


def test_sums_past_the_step_bound_fail_when_over_and_are_not_decided_under() -> None:
    many = [llm(inp=10, out=10)] * 260  # 200 kept
    assert decide("max_llm_calls 150", run_of(steps=many))[0] is False
    held, _ = decide("max_llm_calls 500", run_of(steps=many))
    assert held is None
    result = ChecksScorer(["max_tokens 100000"]).run(run_of(steps=many))
    assert result.passed is None and result.skipped == "steps_truncated"


def test_the_checks_run_live_from_the_environment(
        monkeypatch: pytest.MonkeyPatch, judge_server: Any, telemetry: Any) -> None:
    """``OTEL_SCORERS_SCORERS=checks`` with ``OTEL_SCORERS_CHECKS``, a ``;`` list (a check
    may hold commas): each check's id in the evaluation and in its criterion series."""
    from tests.support import end_agent_span, processor_from_env

    processor = processor_from_env(monkeypatch, judge_server, telemetry, {
        "OTEL_SCORERS_SCORERS": "checks",
        "OTEL_SCORERS_CHECKS": "json; no_pii email, card; max_duration 5s; max_length 2 words"})
    try:
        assert not processor.disabled_because, processor.disabled_because
        end_agent_span(telemetry, answer='{"reply": "mail bob@example.com"}')
        assert processor.force_flush(20_000)
        (span,) = telemetry.evaluation_spans("checks")
        reason = str(span.attributes["gen_ai.evaluation.explanation"])
        assert "2 of 4 checks fail" in reason and "email x1" in reason, reason
        for criterion, held in (("json", "true"), ("no_pii_email_card", "false"),
                                ("max_duration_5s", "true"), ("max_length_2_words", "false")):
            assert telemetry.metric_value("otel_scorers.criterion.verdicts", scorer="checks",
                                          criterion=criterion, satisfied=held) == 1, criterion
    finally:
        processor.shutdown()
