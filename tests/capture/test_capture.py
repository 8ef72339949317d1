"""Capture from every convention, malformed and adversarial values, and trace assembly."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, TraceFlags

from otel_scorers.capture import CaptureMapping, Limits, capture_span
from otel_scorers.capture.trace import TraceBuffer
from otel_scorers.judge.client import JudgeClient
from otel_scorers.scorers.rubric import RubricScorer
from otel_scorers.testing import ScriptedJudgeServer, judge_responder
from tests.support import Telemetry

_ids = iter(range(1, 1_000_000))
RESOURCE = Resource.get_empty()


def span(attrs: dict[str, Any], *, name: str = "agent", trace_id: int = 0xABC,
         parent: int | None = None, start: int = 0, end: int = 1) -> ReadableSpan:
    span_id = next(_ids)
    context = SpanContext(trace_id, span_id, False, TraceFlags(1))
    parent_context = (SpanContext(trace_id, parent, False, TraceFlags(1))
                      if parent is not None else None)
    return ReadableSpan(name=name, context=context, parent=parent_context, attributes=attrs,
                        start_time=start, end_time=end, resource=RESOURCE)


def captured(attrs: dict[str, Any], **kwargs: Any) -> tuple[str | None, str | None, str]:
    result = capture_span(span(attrs), **kwargs)
    assert result.run is not None, (result.reason, result.detail)
    return result.run.user_prompt, result.run.system_prompt, result.run.response


def test_genai_structured_messages_as_json_strings() -> None:
    attrs = {
        "gen_ai.system_instructions": json.dumps([{"type": "text", "content": "Be brief."}]),
        "gen_ai.input.messages": json.dumps([
            {"role": "system", "parts": [{"type": "text", "content": "Inline system."}]},
            {"role": "user", "parts": [{"type": "text", "content": "First"}]},
            {"role": "assistant", "parts": [{"type": "tool_call", "name": "f", "id": "1"}]},
            {"role": "user", "parts": [{"type": "text", "content": "Second"},
                                       {"type": "blob", "content": "AAAA"}]}]),
        "gen_ai.output.messages": json.dumps([
            {"role": "assistant", "parts": [{"type": "text", "content": "Answer"}],
             "finish_reason": "stop"}]),
    }
    assert captured(attrs) == ("Second", "Be brief.\n\nInline system.", "Answer")


def test_genai_structured_values() -> None:
    attrs = {"gen_ai.input.messages": ({"role": "user", "content": "Q"},),
             "gen_ai.output.messages": [{"role": "assistant", "content": "A"}]}
    assert captured(attrs) == ("Q", None, "A")


def test_genai_flattened() -> None:
    attrs = {"gen_ai.prompt.0.role": "system", "gen_ai.prompt.0.content": "Rules",
             "gen_ai.prompt.1.role": "user", "gen_ai.prompt.1.content": "Question",
             "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": "Reply"}
    assert captured(attrs) == ("Question", "Rules", "Reply")


def test_openinference_messages() -> None:
    attrs = {"llm.input_messages.0.message.role": "system",
             "llm.input_messages.0.message.content": "Sys",
             "llm.input_messages.1.message.role": "user",
             "llm.input_messages.1.message.contents.0.message_content.type": "text",
             "llm.input_messages.1.message.contents.0.message_content.text": "Multi",
             "llm.input_messages.1.message.contents.1.message_content.text": "part",
             "llm.output_messages.0.message.role": "assistant",
             "llm.output_messages.0.message.content": "Out"}
    assert captured(attrs) == ("Multi\npart", "Sys", "Out")


def test_openinference_values() -> None:
    attrs = {"openinference.span.kind": "AGENT", "input.value": json.dumps(
        {"messages": [{"role": "user", "content": "From JSON"}]}), "output.value": "Plain"}
    assert captured(attrs) == ("From JSON", None, "Plain")


def test_traceloop_entities() -> None:
    attrs = {"traceloop.span.kind": "workflow",
             "traceloop.entity.input": json.dumps({"args": ["What is 2+2?"], "kwargs": {}}),
             "traceloop.entity.output": json.dumps({"answer": "4"})}
    assert captured(attrs) == ("What is 2+2?", None, "4")


def test_mastra_agent_run() -> None:
    attrs = {"mastra.span.type": "agent_run", "agent.id": "weather",
             "input": json.dumps([{"role": "user", "content": "Weather in Paris?"}]),
             "output": json.dumps({"text": "Sunny.", "usage": {"totalTokens": 3}})}
    result = capture_span(span(attrs))
    assert result.run is not None and result.agent == "weather"
    assert (result.run.user_prompt, result.run.response) == ("Weather in Paris?", "Sunny.")
    assert result.source == "mastra"


def test_user_mapping_and_extractor() -> None:
    attrs = {"app.question": "Mine?", "app.answer": "Yours.", "app.rules": "Rule",
             "app.bot": "mybot", "gen_ai.output.messages": '[{"role": "assistant", '
                                                           '"content": "semconv"}]'}
    mapping = CaptureMapping(input="app.question", output="app.answer", system="app.rules",
                             agent="app.bot")
    result = capture_span(span(attrs), mapping=mapping)
    assert result.run is not None and result.agent == "mybot" and result.source == "mapping"
    assert (result.run.user_prompt, result.run.system_prompt, result.run.response) == (
        "Mine?", "Rule", "Yours.")
    via = capture_span(span(attrs), extractor=lambda s: {"input": "x", "output": "y"})
    assert via.run is not None and via.run.response == "y" and via.source == "extractor"
    broken = capture_span(span(attrs), extractor=lambda s: 1 / 0)
    assert broken.run is None and broken.reason == "malformed"
    assert "ZeroDivisionError" in broken.detail


@pytest.mark.parametrize(("attrs", "reason"), [
    ({"gen_ai.input.messages": "[{broken", "gen_ai.output.messages": "[]"}, "malformed"),
    ({"gen_ai.input.messages": b"\x00\x01binary", "gen_ai.output.messages": "[]"}, "malformed"),
    ({"gen_ai.input.messages": "[" * 100_000 + "]" * 100_000,
      "gen_ai.output.messages": "[]"}, "malformed"),
    ({"gen_ai.input.messages": "x" * 10_000_001}, "too_large"),
    ({"gen_ai.input.messages": "nul\x00byte"}, "malformed"),
    ({"gen_ai.input.messages": 42, "gen_ai.output.messages": True}, "malformed"),
    ({"gen_ai.input.messages": "[]", "gen_ai.output.messages": "[]"}, "no_content"),
    ({"input.value": "question only"}, "no_content"),
    ({"output.value": "answer only"}, "no_content"),
    ({}, "no_content"),
])
def test_bad_values_are_skipped_with_a_reason(attrs: dict[str, Any], reason: str) -> None:
    result = capture_span(span(attrs))
    assert result.run is None and result.reason == reason


def test_wrong_types_inside_json_never_raise() -> None:
    for value in ('{"role": 5, "content": {"x": [1, 2]}}', "[null, 1, {}, []]",
                  '[{"role": "user", "parts": "not a list"}]', '"just a string"'):
        result = capture_span(span({"gen_ai.input.messages": value,
                                    "gen_ai.output.messages": value}))
        assert result.run is not None or result.reason in ("malformed", "no_content")


def test_limits_are_configurable() -> None:
    result = capture_span(span({"input.value": "q" * 200, "output.value": "a"}),
                          limits=Limits(max_value_chars=100))
    assert result.reason == "too_large"


# -- trace assembly -------------------------------------------------------------------------------
def llm(trace_id: int, parent: int, prompt: str, answer: str, start: int, end: int,
        system: str = "Agent rules") -> ReadableSpan:
    return span({"gen_ai.operation.name": "chat", "gen_ai.input.messages": json.dumps(
        [{"role": "system", "content": system}, {"role": "user", "content": prompt}]),
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "content": answer}])},
        name="chat", trace_id=trace_id, parent=parent, start=start, end=end)


def observe(buffer: TraceBuffer, item: ReadableSpan) -> None:
    buffer.observe(item, item.attributes)


def test_assembly_takes_first_input_and_last_output() -> None:
    buffer = TraceBuffer()
    agent_id = 10_000_001
    chain = span({}, name="chain", trace_id=7, parent=agent_id)
    first = llm(7, agent_id, "User question", "tool call", 1, 2)
    second = llm(7, chain.context.span_id, "User question + tool result", "Final answer", 3, 4)
    other = llm(7, 999, "unrelated", "unrelated", 5, 6)
    for item in (first, second, other, chain):
        observe(buffer, item)
    agent = ReadableSpan(name="agent", context=SpanContext(7, agent_id, False, TraceFlags(1)),
                         attributes={"openinference.span.kind": "AGENT"}, start_time=0,
                         end_time=10, resource=RESOURCE)
    pieces, nested = buffer.pieces_under(agent)
    assert {p.span_id for p in pieces} == {first.context.span_id, second.context.span_id}
    assert nested == 0
    result = capture_span(agent, descendants=pieces)
    assert result.run is not None and result.source == "trace:genai"
    assert (result.run.user_prompt, result.run.system_prompt, result.run.response) == (
        "User question", "Agent rules", "Final answer")


def test_buffer_bounds_are_counted() -> None:
    buffer = TraceBuffer(max_traces=2, max_spans_per_trace=2, max_bytes=20_000, max_age_s=60)
    for trace_id in (1, 2, 3):  # third trace evicts the first
        observe(buffer, llm(trace_id, 1, "q", "a", 0, 1))
    assert len(buffer) == 2 and buffer.dropped["trace_limit"] == 1
    for _ in range(3):  # trace 3 already has one span: one more fits, then the limit
        observe(buffer, llm(3, 1, "q", "a", 0, 1))
    assert buffer.dropped["span_limit"] == 2
    observe(buffer, llm(2, 1, "x" * 30_000, "a", 0, 1))
    assert buffer.dropped["byte_limit"] == 1
    assert buffer.bytes <= 20_000
    assert buffer.sweep(now=time.monotonic() + 61) == 3  # trace 2 (1 span) + trace 3 (2)
    assert len(buffer) == 0 and buffer.bytes == 0 and buffer.dropped["expired"] == 3


def test_trace_closed_by_its_root_is_cleaned_up_without_counting_a_drop() -> None:
    buffer = TraceBuffer(max_age_s=60)
    observe(buffer, llm(9, 1, "q", "a", 0, 1))
    observe(buffer, span({}, trace_id=9))  # the root (no parent) ends: the trace is complete
    assert len(buffer) == 1
    assert buffer.sweep(now=time.monotonic() + 31) == 0  # root grace (30 s) passed
    assert len(buffer) == 0 and buffer.dropped["expired"] == 0


def test_selected_spans_content_is_not_buffered() -> None:
    buffer = TraceBuffer()
    agent = llm(11, 1, "q", "a", 0, 1)
    buffer.observe(agent, agent.attributes, keep_content=False)
    assert len(buffer) == 0


def test_spans_without_content_are_not_buffered() -> None:
    buffer = TraceBuffer()
    observe(buffer, span({"http.method": "GET"}, trace_id=5))
    assert len(buffer) == 0


def test_processor_assembles_from_llm_children(telemetry: Telemetry, make_processor: Any,
                                               judge: JudgeClient,
                                               judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder()
    processor = make_processor([RubricScorer(judge, "- answers")])
    tracer = telemetry.tracer()
    with tracer.start_as_current_span("Agent", attributes={"openinference.span.kind": "AGENT",
                                                           "agent.name": "researcher"}):
        first_call = {"openinference.span.kind": "LLM",
                      "llm.input_messages.0.message.role": "user",
                      "llm.input_messages.0.message.content": "Find papers on X",
                      "llm.output_messages.0.message.role": "assistant",
                      "llm.output_messages.0.message.content": "Calling search"}
        with tracer.start_as_current_span("step", attributes={"openinference.span.kind": "CHAIN"}
                                          ), tracer.start_as_current_span("response",
                                                                          attributes=first_call):
            pass
        with tracer.start_as_current_span("response", attributes={
                "openinference.span.kind": "LLM",
                "llm.input_messages.0.message.role": "user",
                "llm.input_messages.0.message.content": "Find papers on X + results",
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": "Here are three papers."}):
            pass
    processor.force_flush(10_000)
    assert processor.stats()["rubric"] == {"selected": 1, "scored": 1}
    text = judge_server.requests[0].text
    assert "Find papers on X\n" in text and "Here are three papers." in text
    evaluation = telemetry.evaluation_spans()[0].attributes
    assert evaluation["otel_scorers.capture.source"] == "trace:openinference"
    assert evaluation["otel_scorers.agent.name"] == "researcher"


def test_readme_states_the_buffer_limits_of_the_code() -> None:
    from tests.support import doc

    row = next(line for line in doc("configuration.md").splitlines()
               if line.startswith("| trace buffer"))
    buffer = TraceBuffer()
    assert (f"{buffer.max_traces} traces, {buffer.max_spans_per_trace} content spans and "
            f"{buffer.max_spans_per_trace} records per trace, "
            f"{buffer.max_bytes // (1024 * 1024)} MiB, {buffer.max_age_s:g} s") in row


def test_array_and_structured_values_count_against_the_byte_bound() -> None:
    buffer = TraceBuffer(max_bytes=50_000)
    big_array = ["x" * 1_000] * 100  # 100 kB in an array-valued attribute
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.input.messages": big_array}
    buffer.observe(span(attrs, name="chat", trace_id=21, parent=1), attrs)
    assert buffer.dropped["byte_limit"] == 1 and buffer.bytes == 0
    small = {"gen_ai.operation.name": "chat", "gen_ai.input.messages": ["x" * 1_000] * 10}
    buffer.observe(span(small, name="chat", trace_id=22, parent=1), small)
    assert 10_000 < buffer.bytes < 20_000


def tool_span(trace_id: int, parent: int, name: str, result: str = "ok") -> ReadableSpan:
    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
             "gen_ai.tool.call.result": result}
    return span(attrs, name=f"execute_tool {name}", trace_id=trace_id, parent=parent)


def test_no_step_leaves_the_buffer_without_a_count() -> None:
    """Issue 53: a tool span refused for the byte budget was lost without a count (a check
    on every step then passed past it); a kept piece past the links bound keeps its own link,
    and that link goes with its piece (bounded by the pieces kept)."""
    buffer = TraceBuffer(max_spans_per_trace=4, max_bytes=8_000)
    agent = span({}, trace_id=31)
    for name, result in (("lookup", "ok"), ("delete_account", "x" * 10_000)):
        item = tool_span(31, agent.context.span_id, name, result)
        buffer.observe(item, item.attributes, piece=True)
    assert buffer.dropped["byte_limit"] == 1
    cut = buffer.cut_of(agent)
    assert cut is not None and cut.tools == {"delete_account": 1} and cut.tool_calls == 1

    buffer = TraceBuffer(max_spans_per_trace=2)  # 16 links, 2 pieces
    agent = span({}, trace_id=32)
    for index in range(10):
        item = tool_span(32, agent.context.span_id, f"tool{index}")
        buffer.observe(item, item.attributes, piece=True)
        if index == 0:  # links of spans that carry nothing fill the bound
            for _ in range(40):
                buffer.observe(span({}, trace_id=32, parent=agent.context.span_id), None)
    pieces, _ = buffer.pieces_under(agent)
    assert {p.name for p in pieces} == {"execute_tool tool0", "execute_tool tool9"}
    assert len(buffer.links(agent)) <= 16 + 2
    cut = buffer.cut_of(agent)  # the eight let go, counted; the two kept are placed
    assert cut is not None and cut.tool_calls == 8 and "tool9" not in cut.tools
