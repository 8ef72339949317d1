"""Spans from real instrumentation packages, produced by the real ``openai`` client.

The application's LLM is a second scripted server (``app_llm``); the judge is the usual one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlparse

import openai
import pytest

from otel_scorers import PromptAlignmentScorer, RubricScorer
from otel_scorers.background_loop import run_sync
from otel_scorers.judge.client import JudgeClient, load_litellm
from otel_scorers.pipeline import Selection
from otel_scorers.testing import ScriptedJudgeServer, judge_responder, reply
from tests.support import Telemetry


@pytest.fixture
def app_llm() -> Iterator[ScriptedJudgeServer]:
    with ScriptedJudgeServer() as server:
        yield server


def run_agent(telemetry: Telemetry, app_llm: ScriptedJudgeServer, attrs: dict[str, Any]) -> None:
    """An agent that calls its LLM twice (a tool round, then the final answer)."""
    app_llm.script(reply("Let me look that up."), reply("The capital of France is Paris."))
    client = openai.OpenAI(base_url=app_llm.url, api_key="app-key")
    with telemetry.tracer().start_as_current_span("agent run", attributes=attrs):
        messages = [{"role": "system", "content": "You are a geography assistant."},
                    {"role": "user", "content": "What is the capital of France?"}]
        first = client.chat.completions.create(model="gpt-4o-mini", messages=messages)
        messages += [{"role": "assistant", "content": first.choices[0].message.content or ""},
                     {"role": "user", "content": "Tool result: Paris"}]
        client.chat.completions.create(model="gpt-4o-mini", messages=messages)


@pytest.fixture
def openai_v2(telemetry: Telemetry, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=telemetry.tracer_provider,
                            meter_provider=telemetry.meter_provider)
    yield
    instrumentor.uninstrument()


@pytest.fixture
def openinference(telemetry: Telemetry) -> Iterator[None]:
    from openinference.instrumentation.openai import OpenAIInstrumentor

    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=telemetry.tracer_provider)
    yield
    instrumentor.uninstrument()


def scorers(judge: JudgeClient) -> list[Any]:
    return [RubricScorer(judge, "- names the capital"), PromptAlignmentScorer(judge)]


@pytest.mark.usefixtures("openai_v2")
def test_openai_v2_spans_assembled_under_an_agent(telemetry: Telemetry, make_processor: Any,
                                                  judge: JudgeClient, app_llm: ScriptedJudgeServer,
                                                  judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder()
    processor = make_processor(scorers(judge))
    run_agent(telemetry, app_llm, {"gen_ai.operation.name": "invoke_agent",
                                   "gen_ai.agent.name": "geo"})
    processor.force_flush(10_000)
    chats = [s for s in telemetry.app_spans() if s.name.startswith("chat")]
    assert len(chats) == 2 and "gen_ai.input.messages" in chats[0].attributes
    assert processor.stats()["rubric"] == {"selected": 1, "scored": 1}
    seen = judge_server.requests[0].text
    assert "What is the capital of France?" in seen
    assert "The capital of France is Paris." in seen and "Let me look that up." not in seen
    assert "You are a geography assistant." in seen
    evaluation = telemetry.evaluation_spans("rubric")[0].attributes
    assert evaluation["otel_scorers.capture.source"] == "trace:genai"
    assert evaluation["otel_scorers.agent.name"] == "geo"


@pytest.mark.usefixtures("openai_v2")
def test_openai_v2_chat_spans_scored_directly(telemetry: Telemetry, make_processor: Any,
                                              judge: JudgeClient, app_llm: ScriptedJudgeServer,
                                              judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder()
    processor = make_processor(scorers(judge), selection=Selection(
        agent_conventions=False, include_llm_spans=True))
    run_agent(telemetry, app_llm, {})
    processor.force_flush(10_000)
    assert processor.stats()["prompt_alignment"] == {"selected": 2, "scored": 2}
    assert len(telemetry.evaluation_spans()) == 4


@pytest.mark.usefixtures("openinference")
def test_openinference_spans_assembled_under_an_agent(telemetry: Telemetry,
                                                      make_processor: Any, judge: JudgeClient,
                                                      app_llm: ScriptedJudgeServer,
                                                      judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder()
    processor = make_processor(scorers(judge))
    run_agent(telemetry, app_llm, {"openinference.span.kind": "AGENT", "agent.name": "geo"})
    processor.force_flush(10_000)
    llm_spans = [s for s in telemetry.app_spans()
                 if s.attributes.get("openinference.span.kind") == "LLM"]
    assert len(llm_spans) == 2
    assert processor.stats()["prompt_alignment"] == {"selected": 1, "scored": 1}
    seen = judge_server.requests[0].text
    assert "What is the capital of France?" in seen
    assert "The capital of France is Paris." in seen
    evaluation = telemetry.evaluation_spans("rubric")[0].attributes
    assert evaluation["otel_scorers.capture.source"] == "trace:openinference"


def test_judge_calls_through_instrumented_clients_are_never_scored(
        telemetry: Telemetry, make_processor: Any, judge: JudgeClient,
        app_llm: ScriptedJudgeServer, judge_server: ScriptedJudgeServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from opentelemetry.instrumentation.aiohttp_client import AioHttpClientInstrumentor
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
    instrumentors = [HTTPXClientInstrumentor(), AioHttpClientInstrumentor(), OpenAIInstrumentor()]
    for instrumentor in instrumentors:
        instrumentor.instrument(tracer_provider=telemetry.tracer_provider)
    try:
        judge_server.responder = judge_responder()
        # select everything an instrumentation could produce, LLM calls included, each span
        # judged on its own
        processor = make_processor(scorers(judge), selection=Selection(
            include_llm_spans=True, span_names=["*"], per_agent=True))
        run_agent(telemetry, app_llm, {"gen_ai.operation.name": "invoke_agent"})
        # positive control: an ordinary litellm call from the app *is* traced by these
        # instrumentations (openai 3.x itself rides on httpx2, which they do not cover)
        app_llm.script(reply("control"))
        run_sync(load_litellm().acompletion(
            model="openai/gpt-4o-mini", api_base=app_llm.url, api_key="app-key",
            messages=[{"role": "user", "content": "control call"}], max_retries=0))
        processor.force_flush(10_000)
        processor.force_flush(10_000)
    finally:
        for instrumentor in instrumentors:
            instrumentor.uninstrument()
    judge_port = urlparse(judge_server.url).port
    app_port = urlparse(app_llm.url).port
    urls = [str(s.attributes.get("url.full") or s.attributes.get("http.url") or "")
            for s in telemetry.app_spans()]
    assert any(f":{app_port}/" in u for u in urls)  # the app's litellm call is traced...
    assert not any(f":{judge_port}/" in u for u in urls)  # ...the judge's never are
    # the selected spans are the app's own (agent, 2 chats, the control call); no judge call
    selected = processor.stats()["rubric"]["selected"]
    assert selected == len(telemetry.app_spans())
    assert len(judge_server.requests) == sum(
        processor.stats()[name].get("scored", 0) for name in ("rubric", "prompt_alignment"))
