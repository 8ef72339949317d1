"""``exported_content: strip``: the judge sees the conversation, the backend never does.

Checked on the wire: spans and log records go through the real OTLP/HTTP exporters to a real
OTLP receiver (oteltap), from an app traced by the real openai-v2 instrumentation in
``SPAN_AND_EVENT`` mode (content on spans *and* log records) plus spans of the other
conventions capture reads. Not one byte of the prompt, the answer or the system prompt may
reach the receiver, while the judge request had them all and the scores still go out. Once in
code (``otel_scorers.install``, with the exporting processors registered *before* it) and once
zero-code (``opentelemetry-instrument``).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from otel_scorers.testing import ScriptedJudgeServer, judge_responder, reply
from tests.support import Upstream

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

HERE = Path(__file__).resolve().parent
MARKERS = ("Zanzibaria", "Quuxtown", "geography desk", "hush-hush")


@pytest.fixture
def app_llm() -> Iterator[ScriptedJudgeServer]:
    with ScriptedJudgeServer() as server:
        yield server


def exported_bytes(upstream: Upstream) -> bytes:
    return b"".join(item.SerializeToString() for item in [*upstream.spans, *upstream.logs])


def check(upstream: Upstream, judge_server: ScriptedJudgeServer) -> None:
    wire = exported_bytes(upstream)
    names = {span.name for span in upstream.spans}
    assert {"chat gpt-4o-mini", "invoke_agent geo"} <= names, names
    assert any(record.event_name == "gen_ai.client.inference.operation.details"
               for record in upstream.logs), "the content events were not exported at all"
    for marker in MARKERS:
        assert marker.encode() not in wire, f"{marker!r} reached the backend"
    evaluations = [s for s in upstream.spans if s.name.startswith("gen_ai.evaluation")]
    assert len(evaluations) == 2
    keys = {kv.key for span in evaluations for kv in span.attributes}
    assert {"gen_ai.evaluation.score.value", "gen_ai.evaluation.explanation"} <= keys
    judged = "\n".join(request.text for request in judge_server.requests)
    for marker in ("What is the capital of Zanzibaria?", "Zanzibaria's capital is Quuxtown.",
                   "You are the Zanzibaria geography desk."):
        assert marker in judged, f"the judge did not see {marker!r}"


async def test_strip_in_code(judge_server: ScriptedJudgeServer, app_llm: ScriptedJudgeServer,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    judge_server.responder = judge_responder()
    app_llm.script(reply("Zanzibaria's capital is Quuxtown."))
    env = {"OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
           "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_AND_EVENT"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    async with Upstream() as upstream:
        await asyncio.to_thread(_app_in_code, upstream.url, judge_server, app_llm)
        await upstream.wait_for(lambda spans: sum(
            s.name.startswith("gen_ai.evaluation") for s in spans) >= 2)
        await asyncio.sleep(0.5)
    check(upstream, judge_server)


def _app_in_code(endpoint: str, judge_server: ScriptedJudgeServer,
                 app_llm: ScriptedJudgeServer) -> None:
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    import otel_scorers
    from otel_scorers import PromptAlignmentScorer, RubricScorer
    from otel_scorers.judge.client import JudgeClient
    from tests.strip_app import run_agent

    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(
        OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces")))  # before the scoring processor
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(BatchLogRecordProcessor(
        OTLPLogExporter(endpoint=f"{endpoint}/v1/logs")))
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=tracer_provider, logger_provider=logger_provider)
    try:
        judge = JudgeClient(judge_server.model, api_base=judge_server.url, api_key="k")
        processor = otel_scorers.install(
            tracer_provider=tracer_provider, logger_provider=logger_provider,
            scorers=[RubricScorer(judge, "- names the capital"), PromptAlignmentScorer(judge)],
            exported_content="strip")
        run_agent(tracer_provider.get_tracer("app"), app_llm.url)
        assert processor.force_flush(30_000)
        assert processor.stats()["rubric"] == {"selected": 1, "scored": 1}
    finally:
        instrumentor.uninstrument()
        tracer_provider.shutdown()
        logger_provider.shutdown()


async def test_strip_zero_code(judge_server: ScriptedJudgeServer,
                               app_llm: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder()
    app_llm.script(reply("Zanzibaria's capital is Quuxtown."))
    async with Upstream() as upstream:
        env = {**os.environ,
               "OTEL_SCORERS_ENABLED": "true", "OTEL_SCORERS_EXPORTED_CONTENT": "strip",
               "OTEL_SCORERS_JUDGE_MODEL": judge_server.model,
               "OTEL_SCORERS_JUDGE_API_BASE": judge_server.url,
               "OTEL_SCORERS_JUDGE_API_KEY": "k",
               "OTEL_SCORERS_RUBRIC": "- names the capital",
               "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
               "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_AND_EVENT",
               "OTEL_SERVICE_NAME": "strip-app", "OTEL_TRACES_EXPORTER": "otlp",
               "OTEL_LOGS_EXPORTER": "otlp", "OTEL_METRICS_EXPORTER": "none",
               "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
               "OTEL_EXPORTER_OTLP_ENDPOINT": upstream.url,
               "OTEL_PYTHON_LOGGING_AUTO_INSTRUMENTATION_ENABLED": "false",
               "PYTHONPATH": str(HERE.parents[1])}
        instrument = Path(sys.executable).with_name("opentelemetry-instrument")
        out = await asyncio.to_thread(subprocess.run, [
            str(instrument), sys.executable, "-m", "tests.strip_app", app_llm.url],
            env=env, capture_output=True, text=True, timeout=120, check=False)
        assert out.returncode == 0, out.stderr[-3000:]
        await upstream.wait_for(lambda spans: sum(
            s.name.startswith("gen_ai.evaluation") for s in spans) >= 2)
        await asyncio.sleep(0.5)
    check(upstream, judge_server)
    assert "scored" in out.stdout, out.stdout


def test_stripped_spans_keep_their_other_attributes() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import otel_scorers
    from otel_scorers import RubricScorer

    provider = TracerProvider()
    exported = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exported))  # exports synchronously
    processor = otel_scorers.install(tracer_provider=provider, logger_provider=object(),
                                     scorers=[RubricScorer("openai/x", "- y")],
                                     exported_content="strip", evaluation_spans=False)
    attrs: dict[str, Any] = {
        "input.value": "hush-hush input", "output.value": "hush-hush output",
        "traceloop.entity.input": "hush-hush", "gen_ai.prompt.0.content": "hush-hush",
        "gen_ai.prompt.0.role": "user", "llm.input_messages.0.message.content": "hush-hush",
        "gen_ai.request.model": "gpt-x", "http.method": "POST"}
    with provider.get_tracer("app").start_as_current_span("llm call", attributes=attrs) as span:
        span.add_event("gen_ai.content.prompt", {"gen_ai.prompt": "hush-hush", "index": 0})
    processor.shutdown()
    (out,) = exported.get_finished_spans()
    assert dict(out.attributes) == {"gen_ai.request.model": "gpt-x", "http.method": "POST"}
    assert [dict(e.attributes) for e in out.events] == [{"index": 0}]
    provider.shutdown()


def test_what_the_judge_never_saw_never_leaves_in_results(
        judge_server: ScriptedJudgeServer, make_processor: Any, judge: Any,
        telemetry: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tool use copies the calls into its result: with redaction on and ``exported_content:
    strip``, a card number and an e-mail in a tool's arguments (redacted before the judge saw
    them) leave neither in the evaluation span nor in what Phoenix and MLflow would be sent;
    the verdicts, tool names and judge text still do."""
    import json

    from otel_scorers import ToolUseScorer
    from otel_scorers.backends import Evaluated, MLflowSink, PhoenixSink
    from otel_scorers.judge.client import JudgeClient
    from tests.conftest import FAST_RETRY
    from tests.support import genai_attributes

    judge_server.responder = judge_responder()
    monkeypatch.setenv("OTEL_SCORERS_REDACT", "true")
    redacting = JudgeClient(judge_server.model, api_base=judge_server.url, api_key="k",
                            retry=FAST_RETRY, redactor=True)
    processor = make_processor([ToolUseScorer(redacting)], exported_content="strip")
    card, email = "4111 1111 1111 1111", "jane.doe@example.com"
    tracer = telemetry.tracer()
    with tracer.start_as_current_span("invoke_agent pay", attributes=genai_attributes(
            prompt="Pay my bill", answer="Paid.", agent="pay")), \
            tracer.start_as_current_span("execute_tool charge", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "charge",
                "gen_ai.tool.call.arguments": json.dumps({"card": card, "email": email}),
                "gen_ai.tool.call.result": f"charged {card}, receipt to {email}"}):
        pass
    assert processor.force_flush(20_000)
    judged = "\n".join(request.text for request in judge_server.requests)
    assert card not in judged and email not in judged  # redacted before the judge
    (span,) = telemetry.evaluation_spans("tool_use")
    attrs = dict(span.attributes or {})
    assert attrs["otel_scorers.pass"] is True and "gen_ai.evaluation.explanation" in attrs
    leaving = json.dumps(attrs, default=str)
    policy = processor._parts.evaluation.emission.policy  # every backend writes with it
    item = Evaluated("0" * 32, "1" * 16, ToolUseScorer(redacting).run({
        "input": "Pay my bill", "output": "Paid.",
        "steps": [{"kind": "tool", "name": "charge",
                   "arguments": json.dumps({"card": card, "email": email}),
                   "result": f"charged {card}"}]}))
    leaving += json.dumps(PhoenixSink("http://127.0.0.1:1", policy=policy).annotation(item))
    leaving += json.dumps(MLflowSink("http://127.0.0.1:1", policy=policy).assessment(item))
    for secret in (card, email, "4111", "jane.doe"):
        assert secret not in leaving, f"{secret!r} would leave the process"
    assert "charge" in leaving  # the tool's name, not its content
