"""Framework values read as messages, or refused: what the big frameworks really write (the
shapes recorded in tests/frameworks/recorded), and what must never reach the judge as text."""

from __future__ import annotations

import json
from typing import Any

import pytest

from otel_scorers.capture import capture_span
from otel_scorers.capture.serialized import Quality, is_blank, looks_like_repr, read_value
from otel_scorers.names import Reason
from tests.support import Telemetry


def lc(kind: str, content: str, **kwargs: Any) -> dict[str, Any]:
    return {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", kind],
            "kwargs": {"content": content, **kwargs}}


def texts(value: Any, role: str) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in read_value(value, role).messages]


def test_langchain_dumps_of_every_shape_are_messages() -> None:
    state = {"messages": [
        lc("HumanMessage", "What is the weather in Paris?", type="human"),
        lc("AIMessage", "", tool_calls=[{"name": "get_weather", "args": {"city": "Paris"},
                                          "id": "call_1", "type": "tool_call"}]),
        {"type": "tool", "data": {"content": "sunny", "tool_call_id": "call_1"}},
        {"type": "ai", "data": {"content": "It is sunny in Paris."}}]}
    decoded = read_value(state, "assistant")
    assert decoded.quality is Quality.SERIALIZED and decoded.unreadable is None
    assert [(m.role, m.content) for m in decoded.messages] == [
        ("user", "What is the weather in Paris?"), ("assistant", ""), ("tool", "sunny"),
        ("assistant", "It is sunny in Paris.")]
    assert decoded.messages[1].tool_calls[0].name == "get_weather"
    assert json.loads(decoded.messages[1].tool_calls[0].arguments or "") == {"city": "Paris"}
    # a model dump ({"type": "human", "content": ...}) and a list of lists (an LLM's input)
    assert texts([[{"type": "human", "content": "hi"}]], "user") == [("user", "hi")]


def test_traceloop_wrappers_never_yield_their_kwargs() -> None:
    output = {"outputs": {"messages": [lc("AIMessage", "The answer.")]}, "kwargs": {"tags": []}}
    assert texts(output, "assistant") == [("assistant", "The answer.")]
    inputs = {"inputs": {"messages": [{"role": "user", "content": "The question?"}]},
              "tags": [], "metadata": {}, "kwargs": {"name": "LangGraph"}}
    assert texts(inputs, "user") == [("user", "The question?")]
    # a LangGraph Command: its update holds the messages
    command = [{"graph": None, "update": {"messages": [lc("AIMessage", "Done.")]},
                "resume": None, "goto": []}]
    assert texts(command, "assistant") == [("assistant", "Done.")]


def test_a_kwargs_dict_gives_its_task_and_nothing_else() -> None:
    value = {"task": "What is the weather in Paris?", "stream": False, "reset": True,
             "images": None, "max_steps": None}
    decoded = read_value(value, "user")
    assert decoded.quality is Quality.CLEAN
    assert [m.content for m in decoded.messages] == ["What is the weather in Paris?"]


@pytest.mark.parametrize("value", [
    {"init_state": {"is_running": False, "config": {"steps": {}}}, "start_event": "x"},
    "StopEvent(result=AgentOutput(response=ChatMessage(role=<MessageRole.ASSISTANT: 'a"
    "ssistant'>, blocks=[TextBlock(text='It is sunny",
    "AgentInput(input=[ChatMessage(role=<MessageRole.USER: 'user'>)])",
    "{'role': 'user', 'content': 'a Python dict repr'}",
    "<workflows.context.context.Context object at 0x7f3a2b1c0d90>",
    {"ctx": "<workflows.context.context.Context object at 0x7f3a2b1c0d90>"},
])
def test_state_dumps_and_reprs_are_unreadable_never_text(value: Any) -> None:
    decoded = read_value(value, "user")
    assert decoded.messages == [] and decoded.unreadable


@pytest.mark.parametrize("text", ["", "   ", "__REDACTED__", "<elided>", "[REDACTED]",
                                  "[Scrubbed due to 'password']"])
def test_blank_and_placeholders_are_no_content(text: str) -> None:
    assert is_blank(text)


def test_words_are_not_reprs() -> None:
    for text in ("Paris (France) is sunny.", "Sunny(ish) weather today", "Use f(x) = 2x.",
                 "OK", "[1] The first source says so."):
        assert not looks_like_repr(text), text


def test_an_unreadable_root_takes_the_clean_messages_of_its_llm_call(
        telemetry: Telemetry) -> None:
    tracer = telemetry.tracer()
    with tracer.start_as_current_span("FunctionAgent.run", attributes={
            "openinference.span.kind": "CHAIN",
            "input.value": json.dumps({"init_state": {"x": 1}, "start_event": "S()"}),
            "output.value": "StopEvent(result=AgentOutput(response=ChatMessage(role=..."
    }) as root, tracer.start_as_current_span("astream_chat", attributes={
            "openinference.span.kind": "LLM",
            "llm.input_messages.0.message.role": "system",
            "llm.input_messages.0.message.content": "Be brief.",
            "llm.input_messages.1.message.role": "user",
            "llm.input_messages.1.message.content": "Weather in Paris?",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": "Sunny.",
            "output.value": "assistant: Sunny."}) as llm:
        pass
    captured = capture_span(root, descendants=[llm])  # type: ignore[list-item]
    assert captured.run is not None
    assert captured.run.user_prompt == "Weather in Paris?"
    assert captured.run.response == "Sunny." and captured.run.system_prompt == "Be brief."


def test_only_serialized_state_is_unreadable_with_the_span_named(telemetry: Telemetry) -> None:
    with telemetry.tracer().start_as_current_span("FunctionAgent.run", attributes={
            "openinference.span.kind": "AGENT", "input.value": "What is up?",
            "output.value": "StopEvent(result=AgentOutput(response=...)"}) as span:
        pass
    captured = capture_span(span)  # type: ignore[arg-type]
    assert captured.run is None and captured.reason == Reason.UNREADABLE
    assert "FunctionAgent.run" in captured.detail and "output.value" in captured.detail


def test_a_turn_that_ends_in_a_tool_call_has_no_answer(telemetry: Telemetry) -> None:
    # pydantic-ai with include_content=False: the structure stays, the text goes
    messages_in = [{"role": "user", "parts": [{"type": "text"}]}]
    messages_out = [{"role": "assistant", "parts": [
        {"type": "tool_call", "id": "call_1", "name": "get_weather"}]}]
    with telemetry.tracer().start_as_current_span("invoke_agent agent", attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.input.messages": json.dumps(messages_in),
            "gen_ai.output.messages": json.dumps(messages_out)}) as span:
        pass
    captured = capture_span(span)  # type: ignore[arg-type]
    assert captured.run is None and captured.reason == Reason.NO_CONTENT
    assert "tool call" in captured.detail
