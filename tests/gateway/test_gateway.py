"""``otel-scorers serve``: the real Python OTLP exporter sends to the gateway (a real
``otel-scorers serve`` process), which forwards every span unchanged to a real OTLP/HTTP
receiver (oteltap) and adds the evaluation spans; a hung judge never stops forwarding; bad
bodies get 400; two replicas behind a trace-id router each score their own traces."""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_scorers.testing import ScriptedJudgeServer, judge_responder
from tests.support import Upstream, free_port, genai_attributes, wait_until_up

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

EVALUATION = "gen_ai.evaluation"


def _config(tmp_path: Path, server: ScriptedJudgeServer, **extra: Any) -> Path:
    path = tmp_path / "gateway.yaml"
    path.write_text(json.dumps({
        "judge": {"model": server.model, "api_base": server.url, "api_key": "k",
                  "timeout_s": 30},
        "scorers": [{"type": "rubric", "criteria": ["greets the user"]},
                    {"type": "prompt_alignment"}],
        **extra}))
    return path


@contextmanager
def gateway(config: Path, upstream: str, *, grpc_port: int = 0, args: tuple[str, ...] = (),
            **env: str) -> Iterator[str]:
    """``otel-scorers serve`` in its own process; yields its base URL once healthy."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "otel_scorers", "serve", "--upstream", upstream,
         "--port", str(port), "--grpc-port", str(grpc_port), "--config", str(config),
         "--metric-interval", "1", *args],
        env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(f"{url}/health", process, timeout_s=60,
                      output=lambda: process.stdout.read() if process.stdout else "")
        yield url
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            raise


def health(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{url}/health", timeout=5) as response:
        data: dict[str, Any] = json.loads(response.read())
        return data


def post(url: str, body: bytes, content_type: str, encoding: str | None = None
         ) -> tuple[int, bytes, dict[str, str]]:
    headers = {"Content-Type": content_type}
    if encoding:
        headers["Content-Encoding"] = encoding
    request = urllib.request.Request(f"{url}/v1/traces", data=body, headers=headers,
                                     method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read(), dict(response.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), dict(exc.headers)


def run_app(endpoint: str, runs: int, *, grpc: bool = False) -> list[ReadableSpan]:
    """An application exporting with the real OTLP exporter (HTTP, or gRPC to ``endpoint``
    host:port); returns what it ended."""
    provider = TracerProvider()
    kept = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(kept))
    if grpc:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as GrpcSpanExporter,
        )

        exporter: Any = GrpcSpanExporter(endpoint=endpoint, insecure=True)
    else:
        exporter = OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces")
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=100))
    tracer = provider.get_tracer("app")
    for i in range(runs):
        if i % 2:
            with tracer.start_as_current_span("invoke_agent support", attributes=genai_attributes(
                    prompt=f"question {i}")), tracer.start_as_current_span("tool"):
                pass
        else:  # the conversation only on the LLM child: needs the whole trace in one place
            with tracer.start_as_current_span("invoke_agent nested", attributes={
                    "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "nested"}):
                chat = genai_attributes(prompt=f"question {i}")
                chat["gen_ai.operation.name"] = "chat"
                with tracer.start_as_current_span("chat", attributes=chat):
                    pass
    provider.force_flush()
    provider.shutdown()
    return list(kept.get_finished_spans())


def _by_id(spans: list[Any]) -> dict[bytes, Any]:
    return {s.span_id: s for s in spans}


async def test_forwards_every_span_unchanged_and_adds_evaluations(
        judge_server: ScriptedJudgeServer, tmp_path: Path) -> None:
    judge_server.responder = judge_responder(satisfied=True)
    async with Upstream() as upstream:
        with gateway(_config(tmp_path, judge_server), upstream.url) as url:
            app_spans = await asyncio.to_thread(run_app, url, 6)
            await upstream.wait_for(lambda spans: sum(
                s.name.startswith(EVALUATION) for s in spans) >= 12)
            state = health(url)
            with urllib.request.urlopen(f"{url}/metrics", timeout=5) as response:
                exposition = response.read().decode()
    sent = [span for rs in encode_spans(app_spans).resource_spans
            for ss in rs.scope_spans for span in ss.spans]
    received = _by_id(upstream.spans)
    for span in sent:  # byte for byte what the application's exporter sent
        assert received[span.span_id].SerializeToString() == span.SerializeToString()
    evaluations = [s for s in upstream.spans if s.name.startswith(EVALUATION)]
    assert len(evaluations) == 12, json.dumps(state)
    agents = {s.span_id: s for s in sent if s.name.startswith("invoke_agent")}
    assert {e.parent_span_id for e in evaluations} == set(agents)
    for evaluation in evaluations:
        assert evaluation.trace_id == agents[evaluation.parent_span_id].trace_id
    assert state["decisions"]["rubric"]["scored"] == 6
    assert state["requests"]["forwarded"] >= 1
    assert "otel_scorers_gateway_requests_total" in exposition
    assert "otel_scorers_evaluations_total" in exposition


async def test_otlp_grpc_receiver(judge_server: ScriptedJudgeServer, tmp_path: Path) -> None:
    """The Collector's load-balancing exporter sends OTLP/gRPC: the gateway takes it too."""
    judge_server.responder = judge_responder(satisfied=True)
    grpc_port = free_port()
    async with Upstream() as upstream:
        with gateway(_config(tmp_path, judge_server), upstream.url, grpc_port=grpc_port) as url:
            app_spans = await asyncio.to_thread(run_app, f"127.0.0.1:{grpc_port}", 4,
                                                grpc=True)
            await upstream.wait_for(lambda spans: sum(
                s.name.startswith(EVALUATION) for s in spans) >= 8)
            state = health(url)
    sent = {s.context.span_id.to_bytes(8, "big") for s in app_spans}
    assert sent <= {s.span_id for s in upstream.spans}
    assert sum(s.name.startswith(EVALUATION) for s in upstream.spans) == 8
    assert state["decisions"]["rubric"]["scored"] == 4


async def test_hung_judge_does_not_stop_forwarding(judge_server: ScriptedJudgeServer,
                                                   tmp_path: Path) -> None:
    judge_server.responder = judge_responder(delay_s=3600)
    async with Upstream() as upstream:
        with gateway(_config(tmp_path, judge_server, concurrency=2, queue_size=4),
                     upstream.url) as url:
            started = time.monotonic()
            app_spans = await asyncio.to_thread(run_app, url, 20)
            ids = {s.context.span_id.to_bytes(8, "big") for s in app_spans}
            await upstream.wait_for(lambda spans: ids <= {s.span_id for s in spans})
            elapsed = time.monotonic() - started
            # the worker decides ended runs from its intake within its period (0.25 s)
            deadline = time.monotonic() + 10
            state = health(url)
            while (state["decisions"]["rubric"]["selected"] < 20
                   and time.monotonic() < deadline):
                await asyncio.sleep(0.1)
                state = health(url)
    assert ids <= {s.span_id for s in upstream.spans}
    assert elapsed < 15, elapsed
    assert not any(s.name.startswith(EVALUATION) for s in upstream.spans)
    rubric = state["decisions"]["rubric"]
    assert rubric["selected"] == 20
    assert rubric.get("dropped", 0) >= 20 - 2 - 4  # in flight + queued; the rest dropped


async def test_bad_bodies_get_400_and_nothing_else_breaks(judge_server: ScriptedJudgeServer,
                                                          tmp_path: Path) -> None:
    judge_server.responder = judge_responder()
    async with Upstream() as upstream:
        with gateway(_config(tmp_path, judge_server), upstream.url) as url:
            cases = [
                (b"\xff\xfe\xfd not protobuf", "application/x-protobuf", None, "not an OTLP"),
                (b"{not json", "application/json", None, "not JSON"),
                (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "xyz"}]}]}]}',
                 "application/json", None, "not hex"),
                (b"\x1f\x8b broken gzip", "application/x-protobuf", "gzip", ""),
                (b"hello", "text/plain", None, "Content-Type"),
            ]
            for body, media, encoding, message in cases:
                status, reply, _ = await asyncio.to_thread(post, url, body, media, encoding)
                assert status == 400, (body, status, reply)
                assert message.encode() in reply
            # still serving: a valid gzip JSON request goes through
            from otel_scorers.otlp import request_to_json

            body = gzip.compress(request_to_json(encode_spans(_sample_spans())).encode())
            status, reply, _ = await asyncio.to_thread(post, url, body, "application/json", "gzip")
            state = health(url)
    assert status == 200, reply
    assert state["requests"]["invalid"] == len(cases)


async def test_oversized_body_gets_413(judge_server: ScriptedJudgeServer,
                                       tmp_path: Path) -> None:
    judge_server.responder = judge_responder()
    async with Upstream() as upstream:
        with gateway(_config(tmp_path, judge_server), upstream.url,
                     args=("--max-body-mb", "0.1")) as url:
            status, reply, _ = await asyncio.to_thread(
                post, url, b"\x00" * 200_000, "application/x-protobuf")
            body = encode_spans(_sample_spans()).SerializeToString()
            after, _, _ = await asyncio.to_thread(post, url, body, "application/x-protobuf")
            state = health(url)
    assert status == 413 and b"exceeds" in reply
    assert after == 200
    assert state["requests"] == {"too_large": 1, "forwarded": 1}


def _sample_spans() -> list[ReadableSpan]:
    provider = TracerProvider()
    kept = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(kept))
    with provider.get_tracer("app").start_as_current_span("plain work"):
        pass
    return list(kept.get_finished_spans())


async def test_unreachable_upstream_is_retryable_and_nothing_is_scored(
        judge_server: ScriptedJudgeServer, tmp_path: Path) -> None:
    judge_server.responder = judge_responder()
    with gateway(_config(tmp_path, judge_server), f"http://127.0.0.1:{free_port()}") as url:
        body = encode_spans(_sample_spans()).SerializeToString()
        status, _, headers = await asyncio.to_thread(post, url, body, "application/x-protobuf")
        state = health(url)
    assert status == 503 and headers.get("Retry-After")
    assert state["requests"] == {"upstream_unavailable": 1}


def test_upstream_headers_go_with_forwarded_traces_and_telemetry(
        judge_server: ScriptedJudgeServer, tmp_path: Path) -> None:
    """An upstream that needs a key gets it on every request (forwarded spans, evaluation
    spans, events and metrics)."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen: list[tuple[str, str | None]] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            return

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            seen.append((self.path, self.headers.get("x-api-key")))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

    upstream = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    judge_server.responder = judge_responder()
    try:
        with gateway(_config(tmp_path, judge_server),
                     f"http://127.0.0.1:{upstream.server_address[1]}",
                     args=("--upstream-header", "x-api-key=s3cret")) as url:
            run_app(url, 2)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and {p for p, _ in seen} != {
                    "/v1/traces", "/v1/logs", "/v1/metrics"}:
                time.sleep(0.2)
    finally:
        upstream.shutdown()
        upstream.server_close()
    assert {path for path, _ in seen} == {"/v1/traces", "/v1/logs", "/v1/metrics"}
    assert all(key == "s3cret" for _, key in seen), seen


def test_the_start_line_names_the_judge_never_its_key(tmp_path: Path,
                                                      judge_server: ScriptedJudgeServer) -> None:
    config = _config(tmp_path, judge_server)
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "otel_scorers", "serve", "--upstream", "http://127.0.0.1:9",
         "--port", str(port), "--grpc-port", "0", "--config", str(config)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until_up(f"http://127.0.0.1:{port}/health", process, timeout_s=60,
                      output=lambda: "")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as response:
            body = json.loads(response.read())
        assert set(body["health"]["scorers"]) == {"rubric", "prompt_alignment"}
    finally:
        process.terminate()
        _, err = process.communicate(timeout=30)
    line = next(line for line in err.splitlines() if "otel-scorers gateway on" in line)
    assert f"judge: {judge_server.model} at {judge_server.url}" in line
    assert "scorers: rubric, prompt_alignment" in line and "'k'" not in line


def run_tool_app(endpoint: str) -> None:
    """An agent run with a tool call, exported over OTLP/HTTP to ``endpoint``."""
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(
        OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces"), schedule_delay_millis=100))
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("invoke_agent weather", attributes=genai_attributes(
            prompt="What is the weather in Paris?", answer="It is sunny and 21 C in Paris.")), \
            tracer.start_as_current_span("execute_tool get_weather", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather",
                "gen_ai.tool.call.arguments": '{"city": "Paris"}',
                "gen_ai.tool.call.result": "Paris: sunny, 21 C"}):
        pass
    provider.force_flush()
    provider.shutdown()


async def test_agent_scorers_at_the_gateway(judge_server: ScriptedJudgeServer,
                                            tmp_path: Path) -> None:
    judge_server.responder = judge_responder()
    config = _config(tmp_path, judge_server, scorers=[
        {"type": "trajectory", "expected": [{"name": "get_weather",
                                             "arguments": {"city": "Paris"}}]},
        {"type": "checks", "checks": ["called_tool get_weather", "no_tool_errors"]},
        {"type": "faithfulness"}, {"type": "tool_use"}])
    async with Upstream() as upstream:
        with gateway(config, upstream.url) as url:
            await asyncio.to_thread(run_tool_app, url)
            await upstream.wait_for(lambda spans: sum(
                s.name.startswith(EVALUATION) for s in spans) >= 4)
            state = health(url)
    scores = {}
    for span in upstream.spans:
        if span.name.startswith(EVALUATION):
            attrs = {a.key: a.value for a in span.attributes}
            scores[attrs["gen_ai.evaluation.name"].string_value] = \
                attrs["gen_ai.evaluation.score.value"].double_value
    assert scores == {"trajectory": 1.0, "checks": 1.0, "faithfulness": 1.0, "tool_use": 1.0}, \
        json.dumps(state)
    assert sum("tool calls" in r.fields for r in judge_server.requests) == 1


async def test_the_gateway_judges_a_scorer_through_the_batch_lane(
        judge_server: ScriptedJudgeServer, tmp_path: Path) -> None:
    """A gateway scorer with ``lane: batch`` (issue 38.1): its requests go out as one batch,
    the alignment scorer judges live, and the batch's results reach the upstream later on the
    runs' own agent spans."""
    judge_server.responder = judge_responder(satisfied=True)
    config = _config(tmp_path, judge_server, batch={
        "directory": str(tmp_path / "spool"), "interval_s": 0.5})
    text = json.loads(config.read_text())
    text["scorers"][0]["lane"] = "batch"
    config.write_text(json.dumps(text))
    async with Upstream() as upstream:
        with gateway(config, upstream.url) as url:
            app_spans = await asyncio.to_thread(run_app, url, 4)
            await upstream.wait_for(lambda spans: sum(
                s.name == f"{EVALUATION} rubric" for s in spans) >= 4)
            state = health(url)
    agents = {s.context.span_id: s for s in app_spans if s.name.startswith("invoke_agent")}
    batched = [s for s in upstream.spans if s.name == f"{EVALUATION} rubric"]
    assert {int.from_bytes(s.parent_span_id, "big") for s in batched} == set(agents)
    assert all(any(a.key == "otel_scorers.judge.service_tier" and
                   a.value.string_value == "batch" for a in s.attributes) for s in batched)
    live = [r for r in judge_server.requests if "batch" not in r.headers]
    assert live and all("rubric criteria" not in r.fields for r in live)  # alignment only
    assert len(judge_server.batches.batches) >= 1
    assert state["health"]["batch"]["emitted"] == 4, state
