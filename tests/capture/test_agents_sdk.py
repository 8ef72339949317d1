"""Spans of the real OpenAI Agents SDK, traced by the real
``openinference-instrumentation-openai-agents``, calling a scripted LLM on 127.0.0.1.

The instrumentation marks both the workflow root and each agent span ``AGENT``, and puts the
conversation only on the LLM spans. By default the workflow root is the interaction, judged
once on the user's question and the final answer (the framework matrix, tests/frameworks,
covers every instrumentation); with ``per_agent=True`` each agent's own turn is judged instead.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from otel_scorers import PromptAlignmentScorer, RubricScorer
from otel_scorers.judge.client import JudgeClient
from otel_scorers.pipeline import Selection
from otel_scorers.testing import Answer, ScriptedJudgeServer, judge_responder, reply
from tests.support import Telemetry

pytestmark = pytest.mark.slow


@pytest.fixture
def app_llm() -> Iterator[ScriptedJudgeServer]:
    with ScriptedJudgeServer() as server:
        yield server


@pytest.fixture
def agents_sdk(telemetry: Telemetry, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    monkeypatch.setenv("OPENAI_API_KEY", "app-key")
    instrumentor = OpenAIAgentsInstrumentor()
    instrumentor.instrument(tracer_provider=telemetry.tracer_provider)
    import agents

    yield agents
    instrumentor.uninstrument()


def model(agents: Any, app_llm: ScriptedJudgeServer) -> Any:
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=app_llm.url, api_key="app-key")
    return agents.OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client)


def handoff_call(target: str) -> Answer:
    body = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": None, "tool_calls": [{
                    "id": "call_1", "type": "function",
                    "function": {"name": f"transfer_to_{target}", "arguments": "{}"}}]}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}
    return Answer(body=json.dumps(body).encode())


def scorers(judge: JudgeClient) -> list[Any]:
    return [RubricScorer(judge, "- answers the question"), PromptAlignmentScorer(judge)]


def test_a_handoff_is_one_interaction_judged_on_its_question_and_final_answer(
        telemetry: Telemetry, make_processor: Any, judge: JudgeClient, agents_sdk: Any,
        app_llm: ScriptedJudgeServer, judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder()
    processor = make_processor(scorers(judge))
    app_llm.script(handoff_call("spanish"), reply("La capital de Francia es París."))
    llm = model(agents_sdk, app_llm)
    spanish = agents_sdk.Agent(name="spanish", instructions="Answer in Spanish.", model=llm)
    triage = agents_sdk.Agent(name="triage", instructions="Hand Spanish questions off.",
                              model=llm, handoffs=[spanish])
    asyncio.run(agents_sdk.Runner.run(triage, "¿Cuál es la capital de Francia?"))
    assert processor.force_flush(20_000)

    for name in ("rubric", "prompt_alignment"):
        assert processor.stats()[name] == {"selected": 1, "scored": 1}
    assert len(judge_server.requests) == 2
    (evaluation,) = telemetry.evaluation_spans("rubric")
    assert evaluation.attributes["otel_scorers.evaluated.span_name"] == "Agent workflow"
    assert evaluation.attributes["otel_scorers.agent.name"] == "triage"  # the agent asked
    fields = judge_server.requests[0].fields
    assert fields["user request"] == "¿Cuál es la capital de Francia?"
    assert fields["agent response"] == "La capital de Francia es París."
    assert fields["agent instructions"] == "Answer in Spanish."  # of the agent that answered


def test_per_agent_evaluation_judges_each_agent_turn_on_its_own(
        telemetry: Telemetry, make_processor: Any, judge: JudgeClient, agents_sdk: Any,
        app_llm: ScriptedJudgeServer, judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder()
    processor = make_processor(scorers(judge), selection=Selection(per_agent=True))
    app_llm.script(handoff_call("spanish"), reply("La capital de Francia es París."))
    llm = model(agents_sdk, app_llm)
    spanish = agents_sdk.Agent(name="spanish", instructions="Answer in Spanish.", model=llm)
    triage = agents_sdk.Agent(name="triage", instructions="Hand Spanish questions off.",
                              model=llm, handoffs=[spanish])
    asyncio.run(agents_sdk.Runner.run(triage, "¿Cuál es la capital de Francia?"))
    assert processor.force_flush(20_000)

    # root, triage and spanish are AGENT spans: the root's LLM calls belong to the agents, the
    # triage turn ends in its handoff (no answer of its own), the Spanish agent is judged
    for name in ("rubric", "prompt_alignment"):
        assert processor.stats()[name] == {"selected": 3, "scored": 1, "filtered": 2}
    assert processor.counts.count("filtered", "nested_agent") == 2
    assert processor.counts.count("filtered", "no_content") == 2
    assert len(judge_server.requests) == 2
    (evaluation,) = telemetry.evaluation_spans("rubric")
    assert evaluation.attributes["otel_scorers.evaluated.span_name"] == "spanish"
    fields = judge_server.requests[0].fields
    assert fields["agent response"] == "La capital de Francia es París."
    assert fields["agent instructions"] == "Answer in Spanish."
