"""One interaction, one evaluation: spans of the real OpenAI Agents SDK, traced by the real
``openinference-instrumentation-openai-agents``, calling a scripted LLM on 127.0.0.1.

The instrumentation marks both the workflow root and each agent span ``AGENT``, and puts the
conversation only on the LLM (``generation``) spans. Each agent's turn is judged once, on its
own agent span; the workflow root is counted as filtered (``nested_agent``), not judged again.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from otel_scorers import PromptAlignmentScorer, RubricScorer
from otel_scorers.judge.client import JudgeClient
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


def test_single_agent_is_judged_once_on_its_agent_span(
        telemetry: Telemetry, make_processor: Any, judge: JudgeClient, agents_sdk: Any,
        app_llm: ScriptedJudgeServer, judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder()
    processor = make_processor(scorers(judge))
    app_llm.script(reply("The capital of France is Paris."))
    agent = agents_sdk.Agent(name="geo", instructions="You are a geography assistant.",
                             model=model(agents_sdk, app_llm))
    asyncio.run(agents_sdk.Runner.run(agent, "What is the capital of France?"))
    processor.force_flush(20_000)

    agent_spans = [s for s in telemetry.app_spans()
                   if s.attributes.get("openinference.span.kind") == "AGENT"]
    assert sorted(s.name for s in agent_spans) == ["Agent workflow", "geo"]  # both are AGENT
    for name in ("rubric", "prompt_alignment"):
        assert processor.stats()[name] == {"selected": 2, "scored": 1, "filtered": 1}
    assert processor.counts.count("filtered", "nested_agent") == 2  # the root, per scorer
    assert len(judge_server.requests) == 2  # one call per scorer, not two
    evaluated = {s.attributes["otel_scorers.evaluated.span_name"]
                 for s in telemetry.evaluation_spans()}
    assert evaluated == {"geo"}
    seen = judge_server.requests[0].text
    assert "What is the capital of France?" in seen and "Paris" in seen
    assert "You are a geography assistant." in seen


def test_handoff_judges_each_agent_turn_once(
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
    processor.force_flush(20_000)

    for name in ("rubric", "prompt_alignment"):
        assert processor.stats()[name] == {"selected": 3, "scored": 2, "filtered": 1}
    assert len(judge_server.requests) == 4  # two agents x two scorers
    by_agent = {s.attributes["otel_scorers.evaluated.span_name"]: s
                for s in telemetry.evaluation_spans("rubric")}
    assert set(by_agent) == {"triage", "spanish"}
    texts = [r.text for r in judge_server.requests if "c1: answers the question" in r.text]
    triage_text = next(t for t in texts if "Hand Spanish questions off." in t)
    spanish_text = next(t for t in texts if "Answer in Spanish." in t)
    # the triage turn ends in the handoff (a tool call), the Spanish agent's in its answer
    assert "[tool call: transfer_to_spanish(" in triage_text
    assert "París" not in triage_text
    assert "La capital de Francia es París." in spanish_text
