"""GenAI content in log records, from the real ``opentelemetry-instrumentation-openai-v2``.

The same agent run (an ``invoke_agent`` span over two ``chat`` calls of the real ``openai``
client to a scripted LLM) is traced with each content-capture mode of the OTel GenAI
instrumentations: ``SPAN_ONLY`` (content on the chat spans), ``EVENT_ONLY`` (content only on
``gen_ai.client.inference.operation.details`` log records), ``SPAN_AND_EVENT`` (both) and
``NO_CONTENT`` (the instrumentation's default: none). The first three must judge the same run
the same way, once; the last must be counted as ``no_content``. The older per-message events
(``gen_ai.user.message``, ``gen_ai.choice``...) are emitted by the same package without the
``gen_ai_latest_experimental`` opt-in, which is process-wide: that case runs in a subprocess.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import otel_scorers
from otel_scorers import PromptAlignmentScorer, RubricScorer
from otel_scorers.judge.client import JudgeClient
from otel_scorers.testing import CapturedTelemetry, ScriptedJudgeServer, judge_responder, reply
from tests.support import Telemetry

HERE = Path(__file__).resolve().parent
NONCE = re.compile(r"\b[0-9a-f]{16}\b")


@pytest.fixture
def app_llm() -> Iterator[ScriptedJudgeServer]:
    with ScriptedJudgeServer() as server:
        yield server


@pytest.fixture
def instrumented(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Fresh providers per content mode, the real openai-v2 instrumentation on them."""
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    instrumentor = OpenAIInstrumentor()  # a singleton: re-instrumented for each mode
    made: list[CapturedTelemetry] = []

    def make() -> CapturedTelemetry:
        if made:
            instrumentor.uninstrument()
        captured = CapturedTelemetry.create()
        instrumentor.instrument(tracer_provider=captured.tracer_provider,
                                meter_provider=captured.meter_provider,
                                logger_provider=captured.logger_provider)
        made.append(captured)
        return captured

    yield make
    if made:
        instrumentor.uninstrument()
    for captured in made:
        captured.shutdown()


def run_agent(telemetry: Telemetry, app_llm: ScriptedJudgeServer) -> None:
    """An agent that calls its LLM twice (a tool round, then the final answer)."""
    app_llm.script(reply("Let me look that up."), reply("The capital of France is Paris."))
    client = openai.OpenAI(base_url=app_llm.url, api_key="app-key")
    with telemetry.tracer().start_as_current_span("invoke_agent geo", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "geo"}):
        messages = [{"role": "system", "content": "You are a geography assistant."},
                    {"role": "user", "content": "What is the capital of France?"}]
        first = client.chat.completions.create(model="gpt-4o-mini", messages=messages)
        messages += [{"role": "assistant", "content": first.choices[0].message.content or ""},
                     {"role": "user", "content": "Tool result: Paris"}]
        client.chat.completions.create(model="gpt-4o-mini", messages=messages)


def score_in_mode(mode: str, instrumented: Any, judge: JudgeClient,
                  app_llm: ScriptedJudgeServer, judge_server: ScriptedJudgeServer,
                  monkeypatch: pytest.MonkeyPatch) -> tuple[Any, list[str], Telemetry]:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", mode)
    judge_server.reset()
    telemetry = instrumented()
    processor = otel_scorers.install(
        tracer_provider=telemetry.tracer_provider, logger_provider=telemetry.logger_provider,
        scorers=[RubricScorer(judge, "- names the capital"), PromptAlignmentScorer(judge)],
        meter_provider=telemetry.meter_provider)
    telemetry.tracer_provider.add_span_processor(SimpleSpanProcessor(telemetry.spans_out))
    try:
        run_agent(telemetry, app_llm)
        assert processor.force_flush(20_000)
        texts = [NONCE.sub("<nonce>", r.text) for r in judge_server.requests]
        return processor, texts, telemetry
    finally:
        processor.shutdown()


def test_every_content_mode_judges_the_same_run_once(
        instrumented: Any, judge: JudgeClient, app_llm: ScriptedJudgeServer,
        judge_server: ScriptedJudgeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    judge_server.responder = judge_responder()
    seen: dict[str, list[str]] = {}
    telemetry: dict[str, Telemetry] = {}
    for mode in ("SPAN_ONLY", "EVENT_ONLY", "SPAN_AND_EVENT"):
        processor, texts, telemetry[mode] = score_in_mode(mode, instrumented, judge, app_llm,
                                                          judge_server, monkeypatch)
        for name in ("rubric", "prompt_alignment"):
            assert processor.stats()[name] == {"selected": 1, "scored": 1}, mode
        assert len(texts) == 2, mode  # one judge call per scorer: SPAN_AND_EVENT not twice
        seen[mode] = sorted(texts)
    assert seen["SPAN_ONLY"] == seen["EVENT_ONLY"] == seen["SPAN_AND_EVENT"]
    judged = seen["EVENT_ONLY"][0] + seen["EVENT_ONLY"][1]
    assert "What is the capital of France?" in judged
    assert "The capital of France is Paris." in judged
    assert "You are a geography assistant." in judged
    # EVENT_ONLY: the chat spans carried no content, the log records did
    events_only = telemetry["EVENT_ONLY"]
    chats = [s for s in events_only.app_spans() if s.name.startswith("chat")]
    assert len(chats) == 2 and not any("gen_ai.input.messages" in s.attributes for s in chats)
    records = [r for r in events_only.logs()
               if r.log_record.event_name == "gen_ai.client.inference.operation.details"]
    assert len(records) == 2 and "gen_ai.input.messages" in records[0].log_record.attributes
    assert not [r for r in telemetry["SPAN_ONLY"].logs()
                if r.log_record.event_name == "gen_ai.client.inference.operation.details"]


def test_content_capture_off_is_counted_as_no_content(
        instrumented: Any, judge: JudgeClient, app_llm: ScriptedJudgeServer,
        judge_server: ScriptedJudgeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    processor, texts, _ = score_in_mode("NO_CONTENT", instrumented, judge, app_llm,
                                        judge_server, monkeypatch)
    assert texts == []
    assert processor.stats()["rubric"] == {"selected": 1, "filtered": 1}
    assert processor.counts.count("filtered", "no_content") == 2


def test_older_per_message_events_are_read(judge_server: ScriptedJudgeServer,
                                           app_llm: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder()
    app_llm.script(reply("Let me look that up."), reply("The capital of France is Paris."))
    out = subprocess.run(
        [sys.executable, str(HERE / "per_message_events_app.py"), judge_server.url, app_llm.url],
        capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["events"] >= 4  # system, user, ..., choice: the per-message shape
    assert report["stats"]["rubric"] == {"selected": 1, "scored": 1}
    judged = "\n".join(r.text for r in judge_server.requests)
    assert "What is the capital of France?" in judged
    assert "The capital of France is Paris." in judged
    assert "You are a geography assistant." in judged


def test_log_processor_keeps_the_pipeline_unharmed_by_odd_records(
        telemetry: Telemetry, judge: JudgeClient) -> None:
    from opentelemetry._logs import LogRecord

    processor = otel_scorers.install(tracer_provider=telemetry.tracer_provider,
                                     logger_provider=telemetry.logger_provider,
                                     scorers=[RubricScorer(judge, "- x")])
    telemetry.tracer_provider.add_span_processor(SimpleSpanProcessor(telemetry.spans_out))
    try:
        logger = telemetry.logger_provider.get_logger("app")
        odd: list[dict[str, Any]] = [
            {"body": {"content": b"\x00binary"}, "event_name": "gen_ai.user.message"},
            {"body": {"message": {"content": ["a", 1, None]}}, "event_name": "gen_ai.choice"},
            {"attributes": {"gen_ai.input.messages": "{not json"},
             "event_name": "gen_ai.client.inference.operation.details"},
            {"body": "plain text log"},
        ]
        for fields in odd:
            logger.emit(LogRecord(**fields))
        assert len(telemetry.logs()) == len(odd)  # every record still reached the exporter
    finally:
        processor.shutdown()


def _emit_details(telemetry: Telemetry, span: Any, prompt: str, answer: str) -> None:
    from opentelemetry import trace
    from opentelemetry._logs import LogRecord

    # stamped when the call ended, as the instrumentation does, but delivered late
    telemetry.logger_provider.get_logger("app").emit(LogRecord(
        event_name="gen_ai.client.inference.operation.details",
        context=trace.set_span_in_context(span), timestamp=span.end_time,
        attributes={"gen_ai.input.messages": [
            {"role": "user", "parts": [{"type": "text", "content": prompt}]}],
            "gen_ai.output.messages": [
            {"role": "assistant", "parts": [{"type": "text", "content": answer}]}]}))


def test_records_arriving_after_their_span_are_waited_for(
        telemetry: Telemetry, judge: JudgeClient, judge_server: ScriptedJudgeServer) -> None:
    # As at a gateway, where /v1/logs and /v1/traces arrive in either order: the agent span
    # (and its chat span) end first, the chat call's content record comes 0.5 s later.
    import time

    judge_server.responder = judge_responder()
    processor = otel_scorers.install(
        tracer_provider=telemetry.tracer_provider, logger_provider=telemetry.logger_provider,
        scorers=[RubricScorer(judge, "- answers")], log_wait_s=10)
    tracer = telemetry.tracer()
    try:
        with tracer.start_as_current_span("invoke_agent", attributes={
                "gen_ai.operation.name": "invoke_agent"}), \
                tracer.start_as_current_span("chat", attributes={
                    "gen_ai.operation.name": "chat"}) as chat:
            pass
        time.sleep(0.5)
        assert processor.stats()["rubric"] == {"selected": 1}  # waiting, not decided
        _emit_details(telemetry, chat, "What is 2 + 2?", "4")
        deadline = time.monotonic() + 30
        while "scored" not in processor.stats()["rubric"] and time.monotonic() < deadline:
            time.sleep(0.05)  # no force_flush: the record itself brings the run back
        assert processor.stats()["rubric"] == {"selected": 1, "scored": 1}
        assert "What is 2 + 2?" in judge_server.requests[0].text
    finally:
        processor.shutdown()


def test_a_run_whose_records_never_come_is_decided_after_the_wait(
        telemetry: Telemetry, judge: JudgeClient, judge_server: ScriptedJudgeServer) -> None:
    import time

    processor = otel_scorers.install(
        tracer_provider=telemetry.tracer_provider, logger_provider=telemetry.logger_provider,
        scorers=[RubricScorer(judge, "- answers")], log_wait_s=0.5)
    try:
        with telemetry.tracer().start_as_current_span("invoke_agent", attributes={
                "gen_ai.operation.name": "invoke_agent"}):
            pass
        deadline = time.monotonic() + 30
        while "filtered" not in processor.stats()["rubric"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert processor.stats()["rubric"] == {"selected": 1, "filtered": 1}
        assert processor.counts.count("filtered", "no_content") == 1
    finally:
        processor.shutdown()
