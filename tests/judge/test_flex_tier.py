"""The flex tier (issue 38.2): a judge asked at the provider's flex tier sends OpenAI's
``service_tier: "flex"`` on both transports and is priced at the price map's ``*_flex`` rates; a
capacity refusal (HTTP 429, "Resource Unavailable") falls back to the standard tier at once or
waits and retries at flex, as configured, counted; a plain rate limit is not a refusal. The tier
is a per-scorer setting: one scorer at flex, another at the standard tier, on a live processor
against the scripted judge server."""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from otel_scorers import RubricScorer
from otel_scorers.judge.client import JudgeClient
from otel_scorers.judge.retry import RetryPolicy
from otel_scorers.pipeline import ScoringSpanProcessor
from otel_scorers.testing import (
    Answer,
    RecordedRequest,
    ScriptedJudgeServer,
    judge_responder,
    rubric_answer,
)
from tests.support import Telemetry, end_agent_span

# gpt-5-mini in litellm's bundled price map: standard and flex rates per token
INPUT, OUTPUT = 2.5e-07, 2e-06
FLEX_INPUT, FLEX_OUTPUT = 1.25e-07, 1e-06
MODEL = "openai/gpt-5-mini"
REFUSAL = Answer(status=429, body=json.dumps({"error": {
    "message": "Resource Unavailable: flex capacity is exhausted, try again later",
    "type": "resource_unavailable", "code": "resource_unavailable"}}).encode(),
    headers={"Content-Type": "application/json"})
RATE_LIMIT = Answer(status=429, body=json.dumps({"error": {
    "message": "Rate limit reached for requests", "type": "requests",
    "code": "rate_limit_exceeded"}}).encode(), headers={"Content-Type": "application/json"})
GOOD = Answer(content=json.dumps(rubric_answer([True])), prompt_tokens=1_000,
              completion_tokens=100)


def judge_of(server: ScriptedJudgeServer, transport: str = "auto", **options: Any
             ) -> JudgeClient:
    return JudgeClient(MODEL, api_base=server.url, api_key="k", transport=transport,
                       structured_output="json_object", temperature=1.0,
                       retry=RetryPolicy(max_retries=2, initial_backoff_s=0.05, max_backoff_s=0.1),
                       **options)


def run_once(judge: JudgeClient) -> Any:
    from tests.judge.test_transport import RUN

    result = RubricScorer(judge, "- greets the user").run(RUN)
    assert result.error is None, result.error
    assert result.judge is not None
    return result.judge


@pytest.mark.parametrize("transport", ["auto", "litellm"])
def test_a_flex_judge_asks_for_flex_and_is_priced_at_flex_rates(
        judge_server: ScriptedJudgeServer, transport: str) -> None:
    judge_server.script(GOOD)
    usage = run_once(judge_of(judge_server, transport, service_tier="flex"))
    assert judge_server.requests[-1].body["service_tier"] == "flex"
    assert usage.service_tier == "flex" and usage.flex_refusals == 0
    assert usage.cost_usd == pytest.approx(1_000 * FLEX_INPUT + 100 * FLEX_OUTPUT, rel=1e-6)
    judge_server.script(GOOD)  # the standard tier: no field sent, standard rates
    usage = run_once(judge_of(judge_server, transport))
    assert "service_tier" not in judge_server.requests[-1].body
    assert usage.cost_usd == pytest.approx(1_000 * INPUT + 100 * OUTPUT, rel=1e-6)


@pytest.mark.parametrize("transport", ["auto", "litellm"])
def test_a_capacity_refusal_falls_back_to_the_standard_tier(
        judge_server: ScriptedJudgeServer, transport: str) -> None:
    judge_server.script(REFUSAL, GOOD)
    usage = run_once(judge_of(judge_server, transport, service_tier="flex"))
    tiers = [request.body.get("service_tier") for request in judge_server.requests]
    assert tiers == ["flex", None]  # at once, the same call at the standard tier
    assert usage.service_tier == "standard" and usage.flex_refusals == 1
    assert usage.retries == 0 and usage.calls == 2
    assert usage.cost_usd == pytest.approx(1_000 * INPUT + 100 * OUTPUT, rel=1e-6)
    assert usage.to_dict()["flexRefusals"] == 1


def test_a_capacity_refusal_waits_at_flex_when_configured(
        judge_server: ScriptedJudgeServer) -> None:
    judge_server.script(REFUSAL, REFUSAL, GOOD)
    usage = run_once(judge_of(judge_server, service_tier="flex", flex_fallback="wait"))
    assert [r.body.get("service_tier") for r in judge_server.requests] == ["flex"] * 3
    assert usage.service_tier == "flex" and usage.flex_refusals == 2 and usage.retries == 2
    # refused past the retries: a rate_limited error, the refusals counted with it
    from tests.judge.test_transport import RUN

    judge_server.script(REFUSAL, REFUSAL, REFUSAL)
    result = RubricScorer(judge_of(judge_server, service_tier="flex", flex_fallback="wait"),
                          "- greets the user").run(RUN)
    assert result.error is not None and result.error.type == "rate_limited"
    assert result.judge is not None and result.judge.flex_refusals == 3


def test_a_rate_limit_is_not_a_capacity_refusal(judge_server: ScriptedJudgeServer) -> None:
    judge_server.script(RATE_LIMIT, GOOD)
    usage = run_once(judge_of(judge_server, service_tier="flex"))
    assert [r.body.get("service_tier") for r in judge_server.requests] == ["flex", "flex"]
    assert usage.flex_refusals == 0 and usage.retries == 1 and usage.service_tier == "flex"


def test_the_tier_is_a_per_scorer_setting_counted_live(
        judge_server: ScriptedJudgeServer, telemetry: Telemetry, tmp_path: Any) -> None:
    """From the settings: the rubric scorer at flex (refused once, answered at the standard
    tier), the alignment scorer at the standard tier; each result, metric and span says so."""
    good = judge_responder()
    refused: list[bool] = []

    def answer(request: RecordedRequest) -> Any:
        if request.body.get("service_tier") == "flex" and not refused:
            refused.append(True)
            return REFUSAL
        return good(request)

    judge_server.responder = answer
    config = tmp_path / "otel-scorers.yaml"
    config.write_text(json.dumps({
        "judge": {"model": MODEL, "api_base": judge_server.url, "api_key": "k",
                  "structured_output": "json_object", "temperature": 1.0},
        "scorers": [{"type": "rubric", "criteria": ["greets the user"],
                     "service_tier": "flex"},
                    {"type": "prompt_alignment"}]}))
    processor = ScoringSpanProcessor(config=str(config),
                                     tracer_provider=telemetry.tracer_provider,
                                     meter_provider=telemetry.meter_provider,
                                     logger_provider=telemetry.logger_provider)
    telemetry.tracer_provider.add_span_processor(processor)
    telemetry.tracer_provider.add_span_processor(SimpleSpanProcessor(telemetry.spans_out))
    try:
        end_agent_span(telemetry)
        assert processor.force_flush(60_000)
    finally:
        processor.shutdown()
    by_scorer = {span.attributes["gen_ai.evaluation.name"]: dict(span.attributes)
                 for span in telemetry.evaluation_spans()}
    assert by_scorer["rubric"]["otel_scorers.judge.flex_refusals"] == 1
    assert "otel_scorers.judge.service_tier" not in by_scorer["rubric"]  # answered standard
    assert "otel_scorers.judge.flex_refusals" not in by_scorer["prompt_alignment"]
    flex = [r for r in judge_server.requests if r.body.get("service_tier") == "flex"]
    assert len(flex) == 1 and "criteria" in flex[0].text.lower()  # only the rubric asked flex
    refusals = telemetry.metrics()["otel_scorers.judge.flex_refusals"]
    assert [(attrs["scorer"], attrs["answered"], value) for attrs, value in refusals] == [
        ("rubric", "standard", 1)]
    tiers = {attrs["service_tier"] for attrs, _ in telemetry.metrics()["otel_scorers.judge.tokens"]}
    assert tiers == {"standard"}
