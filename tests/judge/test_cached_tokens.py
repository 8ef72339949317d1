"""Cached prefixes priced (issue 38.4): input tokens the provider read from its prompt cache
(``prompt_tokens_details.cached_tokens``) are priced at the price map's cached-input rate on
both transports, counted apart (attribute, ``token_type="cached_input"``), and never more than
the input itself."""

from __future__ import annotations

import json
from typing import Any

import pytest

from otel_scorers import RubricScorer
from otel_scorers.judge.client import JudgeClient
from otel_scorers.judge.transport import ChatResponse
from otel_scorers.testing import Answer, ScriptedJudgeServer, rubric_answer
from tests.support import Telemetry, end_agent_span

# gpt-4o-mini in litellm's bundled price map: input, cached input and output per token
INPUT, CACHED, OUTPUT = 1.5e-07, 7.5e-08, 6e-07


@pytest.mark.parametrize("transport", ["auto", "litellm"])
def test_cached_input_is_priced_at_the_cached_rate(judge_server: ScriptedJudgeServer,
                                                   transport: str) -> None:
    from tests.judge.test_transport import RUN

    judge_server.script(Answer(content=json.dumps(rubric_answer([True])), prompt_tokens=1_000,
                               completion_tokens=100, cached_tokens=800))
    judge = JudgeClient("openai/gpt-4o-mini", api_base=judge_server.url, api_key="k",
                        transport=transport, structured_output="json_object")
    usage = RubricScorer(judge, "- greets the user").run(RUN).judge
    assert usage is not None and usage.cached_tokens == 800 and usage.prompt_tokens == 1_000
    assert usage.cost_usd == pytest.approx(200 * INPUT + 800 * CACHED + 100 * OUTPUT, rel=1e-6)
    assert usage.to_dict()["cachedTokens"] == 800


def test_cached_tokens_are_counted_apart(judge_server: ScriptedJudgeServer,
                                         telemetry: Telemetry, make_processor: Any) -> None:
    judge_server.responder = lambda request: Answer(
        content=json.dumps(rubric_answer([True])), prompt_tokens=1_000, completion_tokens=100,
        cached_tokens=600)
    judge = JudgeClient("openai/gpt-4o-mini", api_base=judge_server.url, api_key="k",
                        structured_output="json_object")
    processor = make_processor([RubricScorer(judge, "- greets the user")])
    end_agent_span(telemetry)
    assert processor.force_flush(60_000)
    (span,) = telemetry.evaluation_spans()
    assert span.attributes["otel_scorers.judge.cached_input_tokens"] == 600
    assert span.attributes["otel_scorers.judge.input_tokens"] == 1_000
    tokens = {attrs["token_type"]: value for attrs, value in
              telemetry.metrics()["otel_scorers.judge.tokens"]}
    assert tokens == {"input": 400, "cached_input": 600, "output": 100}


def test_a_cached_count_is_never_more_than_the_input() -> None:
    odd = ChatResponse(content="x", prompt_tokens=10, cached_tokens=50)
    assert odd.cached_tokens == 10
    assert ChatResponse(content="x", prompt_tokens=10, cached_tokens=-3).cached_tokens == 0
