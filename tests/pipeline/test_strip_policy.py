"""One strip policy, in process and at the gateway, on the wire (issue 25, item 3).

The same app, with content in every place capture reads (GenAI, OpenLLMetry and OpenInference
attributes, ``llm.invocation_parameters``, retrieval documents, embeddings, reranker
documents, a capture mapping's own keys, GenAI span events on a span with no content
attribute, log records named by ``event_name`` or by an ``event.name`` attribute), is exported
through the real OTLP/HTTP exporters either with ``otel_scorers.install(exported_content=
"strip")`` or to ``otel-scorers serve`` with ``exported_content: strip``. Not one marker may
reach the receiver, while the judge saw the run and the scores go out.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from otel_scorers.testing import ScriptedJudgeServer, judge_responder
from tests.gateway.test_gateway import gateway
from tests.support import Upstream

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

MARK = "hush"
QUESTION = f"{MARK}-question: what is the capital of Zanzibaria?"
ANSWER = f"{MARK}-answer: Quuxtown."
MAPPING = {"input": "my.prompt", "output": "my.answer"}

#: Content attributes per convention, on spans under the agent run.
SPANS: dict[str, dict[str, Any]] = {
    "chat (OpenInference)": {
        "openinference.span.kind": "LLM",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": f"{MARK}-oi-input",
        "llm.output_messages.0.message.content": f"{MARK}-oi-output",
        "llm.invocation_parameters": json.dumps({"instructions": f"{MARK}-instructions"}),
        "llm.prompt_template.template": f"{MARK}-template",
        "input.value": f"{MARK}-input-value", "output.value": f"{MARK}-output-value"},
    "retrieve": {"openinference.span.kind": "RETRIEVER", "input.value": f"{MARK}-query",
                 "retrieval.documents.0.document.content": f"{MARK}-document",
                 "retrieval.documents.0.document.id": "doc-1"},
    "embed": {"openinference.span.kind": "EMBEDDING",
              "embedding.embeddings.0.embedding.text": f"{MARK}-embedded"},
    "rerank": {"openinference.span.kind": "RERANKER", "reranker.query": f"{MARK}-rerank-query",
               "reranker.input_documents.0.document.content": f"{MARK}-rerank-in",
               "reranker.output_documents.0.document.content": f"{MARK}-rerank-out"},
    "tool": {"openinference.span.kind": "TOOL", "tool.name": "lookup",
             "tool.parameters": json.dumps({"city": f"{MARK}-tool-args"})},
    "openllmetry": {"traceloop.span.kind": "task", "traceloop.entity.input": f"{MARK}-tl-in",
                    "traceloop.entity.output": f"{MARK}-tl-out",
                    "gen_ai.prompt.0.content": f"{MARK}-legacy-prompt",
                    "gen_ai.completion.0.content": f"{MARK}-legacy-completion"},
    "execute_tool genai": {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "f",
                           "gen_ai.tool.call.arguments": f"{MARK}-genai-args",
                           "gen_ai.tool.call.result": f"{MARK}-genai-result"},
}


def _app(endpoint: str, *, install: dict[str, Any] | None) -> None:
    """Trace the run and emit its records; with ``install``, score in process (stripping)."""
    from opentelemetry import trace
    from opentelemetry._logs import LogRecord
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    import otel_scorers

    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(
        OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces")))  # before the scoring processor
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(
        OTLPLogExporter(endpoint=f"{endpoint}/v1/logs")))
    processor = None
    if install is not None:
        processor = otel_scorers.install(tracer_provider=tracer_provider,
                                         logger_provider=logger_provider, **install)
    tracer = tracer_provider.get_tracer("app")
    logger = logger_provider.get_logger("app")
    with tracer.start_as_current_span("invoke_agent geo", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "geo",
            "my.prompt": QUESTION, "my.answer": ANSWER}):
        for name, attributes in SPANS.items():
            with tracer.start_as_current_span(name, attributes=attributes):
                pass
        # content only in span events: the span's attributes hold none
        with tracer.start_as_current_span("chat events", attributes={
                "gen_ai.operation.name": "chat"}) as span:
            span.add_event("gen_ai.user.message", {"content": f"{MARK}-event-user"})
            span.add_event("gen_ai.choice", {"message": f"{MARK}-event-choice", "index": 0})
            span.add_event("gen_ai.content.prompt", {"gen_ai.prompt": f"{MARK}-event-prompt"})
        with tracer.start_as_current_span("chat records", attributes={
                "gen_ai.operation.name": "chat"}) as span:
            ids = {"context": trace.set_span_in_context(span)}
            logger.emit(LogRecord(event_name="gen_ai.user.message",
                                  body={"content": f"{MARK}-record-user"}, **ids))
            logger.emit(LogRecord(attributes={"event.name": "gen_ai.user.message"},
                                  body={"content": f"{MARK}-record-named-by-attribute"}, **ids))
            logger.emit(LogRecord(attributes={"event.name": "gen_ai.choice"},
                                  body={"index": 0, "message": {
                                      "role": "assistant",
                                      "content": f"{MARK}-record-choice"}}, **ids))
            logger.emit(LogRecord(event_name="gen_ai.client.inference.operation.details",
                                  attributes={"gen_ai.input.messages": json.dumps([{
                                      "role": "user", "parts": [{
                                          "type": "text",
                                          "content": f"{MARK}-record-details"}]}])}, **ids))
    try:
        if processor is not None:
            assert processor.force_flush(60_000)
            assert processor.stats()["rubric"].get("scored") == 1, processor.stats()
    finally:
        tracer_provider.shutdown()
        logger_provider.shutdown()


def _check(upstream: Upstream, judge_server: ScriptedJudgeServer) -> None:
    wire = b"".join(item.SerializeToString() for item in [*upstream.spans, *upstream.logs])
    names = {span.name for span in upstream.spans}
    assert {"invoke_agent geo", "retrieve", "chat events", *SPANS} <= names, names
    assert len(upstream.logs) >= 1, "the log records were not forwarded at all"
    leaked = sorted({wire[i:i + 40].split(b"\x12")[0].decode("utf-8", "replace")
                     for i in _all(wire, MARK.encode())})
    assert not leaked, f"content reached the backend: {leaked}"
    kept = {kv.key for span in upstream.spans for kv in span.attributes}
    assert {"retrieval.documents.0.document.id", "tool.name"} <= kept  # only content goes
    evaluations = [s for s in upstream.spans if s.name.startswith("gen_ai.evaluation")]
    assert len(evaluations) == 2, names
    judged = "\n".join(request.text for request in judge_server.requests)
    assert QUESTION in judged and ANSWER in judged


def _all(data: bytes, needle: bytes) -> list[int]:
    found, start = [], data.find(needle)
    while start != -1:
        found.append(start)
        start = data.find(needle, start + 1)
    return found


async def test_strip_in_process_removes_every_kind_of_content(
        judge_server: ScriptedJudgeServer) -> None:
    from otel_scorers import PromptAlignmentScorer, RubricScorer
    from otel_scorers.capture import CaptureMapping
    from otel_scorers.judge.client import JudgeClient

    judge_server.responder = judge_responder()
    judge = JudgeClient(judge_server.model, api_base=judge_server.url, api_key="k")
    install = {"scorers": [RubricScorer(judge, "- names the capital"),
                           PromptAlignmentScorer(judge)],
               "exported_content": "strip", "capture": CaptureMapping(**MAPPING)}
    async with Upstream() as upstream:
        await asyncio.to_thread(_app, upstream.url, install=install)
        await upstream.wait_for(lambda spans: sum(
            s.name.startswith("gen_ai.evaluation") for s in spans) >= 2)
        await asyncio.sleep(0.5)
    _check(upstream, judge_server)


async def test_strip_at_the_gateway_removes_every_kind_of_content(
        judge_server: ScriptedJudgeServer, tmp_path: Path) -> None:
    judge_server.responder = judge_responder()
    config = tmp_path / "gateway.yaml"
    config.write_text(json.dumps({
        "judge": {"model": judge_server.model, "api_base": judge_server.url, "api_key": "k"},
        "scorers": [{"type": "rubric", "criteria": ["names the capital"]},
                    {"type": "prompt_alignment"}],
        "exported_content": "strip", "capture": MAPPING}))
    async with Upstream() as upstream:
        with gateway(config, upstream.url) as url:
            await asyncio.to_thread(_app, url, install=None)
            await upstream.wait_for(lambda spans: sum(
                s.name.startswith("gen_ai.evaluation") for s in spans) >= 2, timeout=60)
            await asyncio.sleep(0.5)
    _check(upstream, judge_server)


def test_strip_keeps_span_event_content_for_the_judge(judge_server: ScriptedJudgeServer) -> None:
    """An agent whose conversation is only in span events (as strands records it): stripping
    the exported span's events must not take the conversation from the judge."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import otel_scorers
    from otel_scorers import RubricScorer
    from otel_scorers.judge.client import JudgeClient

    judge_server.responder = judge_responder()
    provider = TracerProvider()
    exported = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exported))
    judge = JudgeClient(judge_server.model, api_base=judge_server.url, api_key="k")
    processor = otel_scorers.install(tracer_provider=provider, logger_provider=object(),
                                     scorers=[RubricScorer(judge, "- names the capital")],
                                     exported_content="strip", evaluation_spans=False)
    with provider.get_tracer("app").start_as_current_span("invoke_agent geo", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "geo"}) as span:
        span.add_event("gen_ai.user.message", {"content": QUESTION})
        span.add_event("gen_ai.choice", {"message": ANSWER, "finish_reason": "stop"})
    assert processor.force_flush(30_000)
    assert processor.stats()["rubric"] == {"selected": 1, "scored": 1}, processor.stats()
    processor.shutdown()
    (agent,) = [s for s in exported.get_finished_spans() if s.name == "invoke_agent geo"]
    assert [dict(e.attributes or {}) for e in agent.events] == [{}, {"finish_reason": "stop"}]
    judged = "\n".join(request.text for request in judge_server.requests)
    assert QUESTION in judged and ANSWER in judged
    provider.shutdown()
