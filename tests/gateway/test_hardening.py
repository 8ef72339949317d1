"""The gateway under hostile input and misconfigured neighbours (each a regression test of a
probe that broke the earlier gateway): nested encodings, many large uploads at once, stalled
uploads, large JSON, upstream redirects, credentials in URLs and echoed headers, missing
authentication and TLS, and the logs and metrics signals."""

from __future__ import annotations

import asyncio
import datetime
import gzip
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_scorers.otlp import request_to_json
from otel_scorers.testing import ScriptedJudgeServer, judge_responder
from tests.gateway.test_gateway import _config, gateway, health, post, run_app
from tests.support import Upstream, free_port, genai_attributes, wait_until_up

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

PROTOBUF = "application/x-protobuf"
TOKEN = "t0ken-for-the-gateway-tests"


class Recorder:
    """A plain upstream on 127.0.0.1 recording every request; ``reply`` picks the answer."""

    def __init__(self, reply: Any = None) -> None:
        self.requests: list[tuple[str, dict[str, str], int]] = []
        recorder = self
        self.reply = reply or (lambda path: (200, {}, b""))

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                return

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length", 0) or 0)
                self.rfile.read(length)
                recorder.requests.append((self.path, dict(self.headers), length))
                status, headers, body = recorder.reply(self.path)
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_POST = do_GET = _answer

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def recorder(reply: Any = None) -> Iterator[Recorder]:
    server = Recorder(reply)
    try:
        yield server
    finally:
        server.close()


def spans_body(count: int, attr_kb: int = 1) -> bytes:
    provider = TracerProvider()
    kept = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(kept))
    filler = "y" * (attr_kb * 1024)
    for _ in range(count):
        with provider.get_tracer("app").start_as_current_span(
                "chat", attributes={"gen_ai.operation.name": "chat", "filler": filler}):
            pass
    return encode_spans(kept.get_finished_spans()).SerializeToString()


def vm_hwm_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


# -- decompression ----------------------------------------------------------------------------
def test_nested_gzip_is_not_a_bypass(judge_server: ScriptedJudgeServer, tmp_path: Path) -> None:
    bomb = gzip.compress(gzip.compress(b"\0" * (63 * 1024 * 1024)))
    assert len(bomb) < 2_000
    with recorder() as upstream, gateway(_config(tmp_path, judge_server), upstream.url) as url:
        status, body, _ = post(url, bomb, PROTOBUF, encoding="gzip")
        assert status == 400, body  # one layer undone: what is left is not OTLP
        status, body, _ = post(url, bomb, PROTOBUF, encoding="gzip, gzip")
        assert status == 415 and b"one content encoding" in body
        big = gzip.compress(b"\0" * (17 * 1024 * 1024))  # over 16 MB once decompressed
        status, body, _ = post(url, big, PROTOBUF, encoding="gzip")
        assert status == 413 and b"decompressed" in body
        status, _, _ = post(url, gzip.compress(spans_body(5)), PROTOBUF, encoding="gzip")
        assert status == 200
    assert [path for path, _, _ in upstream.requests if path == "/v1/traces"] == ["/v1/traces"]


# -- memory and time ----------------------------------------------------------------------------
#: The documented bound on the gateway's peak RSS (docs/reference.md, "The scoring gateway"):
#: 100 MB + 5 x max_inflight x max_body_mb.
def rss_bound_mb(max_inflight: int, max_body_mb: float) -> float:
    return 100 + 5 * max_inflight * max_body_mb


def test_admission_comes_before_reading_and_memory_stays_bounded(
        judge_server: ScriptedJudgeServer, tmp_path: Path) -> None:
    body = spans_body(7_500, attr_kb=2)  # ~15 MB
    assert 14e6 < len(body) < 16.5e6
    config = _config(tmp_path, judge_server)
    port = free_port()
    with recorder() as upstream:
        process = subprocess.Popen(
            [sys.executable, "-m", "otel_scorers", "serve", "--upstream", upstream.url,
             "--port", str(port), "--grpc-port", "0", "--config", str(config),
             "--max-inflight", "4", "--max-body-mb", "16"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_until_up(f"{url}/health", process, timeout_s=60, output=lambda: "")

            async def upload_40() -> list[int]:
                async with aiohttp.ClientSession() as session:
                    async def one() -> int:
                        async with session.post(f"{url}/v1/traces", data=body,
                                                headers={"Content-Type": PROTOBUF}) as reply:
                            return reply.status
                    return await asyncio.gather(*(one() for _ in range(40)))

            statuses = asyncio.run(upload_40())
            peak = vm_hwm_mb(process.pid)
        finally:
            process.terminate()
            process.wait(30)
    assert set(statuses) <= {200, 503} and statuses.count(200) >= 4, statuses
    assert statuses.count(503) >= 20  # turned away before their bodies were read
    assert peak <= rss_bound_mb(4, 16), f"peak RSS {peak:.0f} MB"


def test_a_stalled_upload_times_out_and_health_still_answers(
        judge_server: ScriptedJudgeServer, tmp_path: Path) -> None:
    with recorder() as upstream, gateway(_config(tmp_path, judge_server), upstream.url,
                                         args=("--read-timeout", "2")) as url:
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            sock.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: "
                         b"application/x-protobuf\r\nContent-Length: 100000\r\n\r\n" + b"\0" * 10)
            assert health(url)["status"] == "ok"  # the stalled upload blocks nothing else
            started = time.monotonic()
            reply = sock.recv(4096)
            waited = time.monotonic() - started
        assert reply.startswith(b"HTTP/1.1 408"), reply[:100]
        assert waited < 30
    assert [path for path, _, _ in upstream.requests if path == "/v1/traces"] == []


def test_a_large_json_body_does_not_stall_health(judge_server: ScriptedJudgeServer,
                                                 tmp_path: Path) -> None:
    body = request_to_json(encode_spans(_many_spans(20_000))).encode()

    async def probe(url: str) -> tuple[int, float, list[float]]:
        latencies: list[float] = []
        done = asyncio.Event()
        async with aiohttp.ClientSession() as session:
            async def poll() -> None:
                while not done.is_set():
                    started = time.monotonic()
                    async with session.get(f"{url}/health") as reply:
                        await reply.read()
                    latencies.append(time.monotonic() - started)
                    await asyncio.sleep(0.02)
            poller = asyncio.create_task(poll())
            started = time.monotonic()
            async with session.post(f"{url}/v1/traces", data=body,
                                    headers={"Content-Type": "application/json"}) as reply:
                status = reply.status
            took = time.monotonic() - started
            done.set()
            await poller
        return status, took, latencies

    with recorder() as upstream, gateway(_config(tmp_path, judge_server), upstream.url,
                                         args=("--max-body-mb", "64")) as url:
        status, took, latencies = asyncio.run(probe(url))
    assert status == 200
    assert len(latencies) >= 3
    # decoding runs beside the event loop: health answers within a fraction of the request
    assert max(latencies) < took / 2, (max(latencies), took)


def _many_spans(count: int) -> list[Any]:
    provider = TracerProvider()
    kept = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(kept))
    for _ in range(count):
        with provider.get_tracer("app").start_as_current_span(
                "work", attributes={f"k{i}": "v" * 40 for i in range(10)}):
            pass
    return list(kept.get_finished_spans())


# -- upstream redirects and secrets -----------------------------------------------------------
@pytest.mark.parametrize("code", [301, 302, 307])
def test_upstream_redirects_are_never_followed(code: int, judge_server: ScriptedJudgeServer,
                                               tmp_path: Path) -> None:
    judge_server.responder = judge_responder()
    with recorder() as trap, recorder(lambda path: (code, {"Location": f"{trap.url}{path}"},
                                                    b"")) as upstream, gateway(
            _config(tmp_path, judge_server), upstream.url,
            args=("--upstream-header", "x-api-key=upstream-secret-value")) as url:
        status, body, _ = post(url, spans_body(3), PROTOBUF)
        app = run_app(url, 2)  # the real exporter: its spans are refused too
        time.sleep(3)  # evaluation telemetry, if any, would be on its way now
    assert status == 502 and b"redirect" in body
    assert app  # the app ran; what matters is where its data went
    assert trap.requests == []  # nothing (and no secret header) reached the other origin
    assert all(path.startswith("/v1/") for path, _, _ in upstream.requests)


def test_upstream_credentials_and_header_values_are_never_shown(
        judge_server: ScriptedJudgeServer, tmp_path: Path) -> None:
    def echo(path: str) -> tuple[int, dict[str, str], bytes]:  # an upstream echoing secrets
        return 400, {}, b"bad key upstream-secret-value for user:pass-w0rd"

    with recorder(echo) as upstream:
        host = upstream.url.removeprefix("http://")
        upstream_url = f"http://user:pass-w0rd@{host}"
        config = _config(tmp_path, judge_server)
        port = free_port()
        process = subprocess.Popen(
            [sys.executable, "-m", "otel_scorers", "serve", "--upstream", upstream_url,
             "--port", str(port), "--grpc-port", "0", "--config", str(config),
             "--upstream-header", "x-api-key=upstream-secret-value"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_until_up(f"{url}/health", process, timeout_s=60, output=lambda: "")
            shown = json.dumps(health(url))
            status, body, _ = post(url, spans_body(2), PROTOBUF)
        finally:
            process.terminate()
            output = process.communicate(timeout=30)[0]
    assert status == 400
    assert upstream.requests and upstream.requests[0][1].get("Authorization", "").startswith(
        "Basic ")  # the credentials still work: they are only never shown
    for text in (shown, body.decode("utf-8", "replace"), output):
        assert "pass-w0rd" not in text and "upstream-secret-value" not in text, text
    assert f"@{host}" in shown and "****" in body.decode("utf-8", "replace")  # masked


# -- authentication and TLS ---------------------------------------------------------------------
def _grpc_export(endpoint: str, *, token: str | None = None, ca: bytes | None = None) -> Any:
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    headers = {"authorization": f"Bearer {token}"} if token else None
    if ca is not None:
        import grpc

        exporter = OTLPSpanExporter(endpoint=endpoint, headers=headers,
                                    credentials=grpc.ssl_channel_credentials(ca))
    else:
        exporter = OTLPSpanExporter(endpoint=endpoint, insecure=True, headers=headers)
    try:
        return exporter.export(_many_spans(2))
    finally:
        exporter.shutdown()


def test_bearer_token_guards_http_and_grpc(judge_server: ScriptedJudgeServer,
                                          tmp_path: Path) -> None:
    from opentelemetry.sdk.trace.export import SpanExportResult

    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    grpc_port = free_port()
    with recorder() as upstream, gateway(_config(tmp_path, judge_server), upstream.url,
                                         grpc_port=grpc_port,
                                         args=("--token-file", str(token_file))) as url:
        body = spans_body(2)
        for headers in ({}, {"Authorization": "Bearer wrong-token-of-some-length"},
                        {"Authorization": f"Basic {TOKEN}"}):
            status, _, reply_headers = _post_with(url, body, headers)
            assert status == 401 and reply_headers.get("WWW-Authenticate") == "Bearer"
        status, _, _ = _post_with(url, body, {"Authorization": f"Bearer {TOKEN}"})
        assert status == 200
        assert health(url)["status"] == "ok"  # probes need no token
        endpoint = f"127.0.0.1:{grpc_port}"
        assert _grpc_export(endpoint) == SpanExportResult.FAILURE
        assert _grpc_export(endpoint, token=TOKEN) == SpanExportResult.SUCCESS
    assert len([p for p, _, _ in upstream.requests if p == "/v1/traces"]) == 2


def _post_with(url: str, body: bytes, headers: dict[str, str]
               ) -> tuple[int, bytes, dict[str, str]]:
    import urllib.error
    import urllib.request

    request = urllib.request.Request(f"{url}/v1/traces", data=body, method="POST",
                                     headers={"Content-Type": PROTOBUF, **headers})
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, reply.read(), dict(reply.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), dict(exc.headers)


def _self_signed(tmp_path: Path) -> tuple[Path, Path, bytes]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert_pem)
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path, cert_pem


@pytest.mark.parametrize("upstream", ["ftp://x", "http://[::1", "collector:4318",
                                      "http://bob:s3cret@:80", "http://h:99999"])
def test_an_upstream_that_is_not_an_http_url_is_a_usage_error(upstream: str) -> None:
    """Refused before anything listens (it used to start and fail each export, forever)."""
    from click.testing import CliRunner

    from otel_scorers.cli import main

    result = CliRunner().invoke(main, ["serve", "--upstream", upstream, "--port",
                                       str(free_port()), "--grpc-port", "0"])
    assert result.exit_code == 2, result.output
    assert "not an http(s) URL with a host" in result.output
    assert "s3cret" not in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("header", ["api-key=secret\r\nx-injected: 1", "api key=v",
                                    "api-key=s3cret%0Ax-injected: 1"])
def test_an_upstream_header_that_would_split_the_request_is_refused(header: str) -> None:
    """A CR/LF in a header value (given, or percent-encoded as OTEL_EXPORTER_OTLP_HEADERS
    allows) is header injection, and failed every export: refused at start, value unshown."""
    from click.testing import CliRunner

    from otel_scorers.cli import main

    result = CliRunner().invoke(main, ["serve", "--upstream", "http://127.0.0.1:9", "--port",
                                       str(free_port()), "--grpc-port", "0",
                                       "--upstream-header", header])
    assert result.exit_code == 2, result.output
    assert "without control characters" in result.output
    assert "s3cret" not in result.output and "secret" not in result.output.replace(
        "its value is not shown", "")


def test_an_encrypted_tls_key_is_refused_never_prompted(tmp_path: Path) -> None:
    """A passphrase-protected key: one line with the fix and exit 2, never OpenSSL's prompt on
    the terminal (a service under systemd would hang there, silent)."""
    from cryptography.hazmat.primitives import serialization

    cert, key, _ = _self_signed(tmp_path)
    loaded = serialization.load_pem_private_key(key.read_bytes(), password=None)
    key.write_bytes(loaded.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"s3cret-passphrase")))
    # a terminal that would answer the prompt: the key must still be refused, not read
    out = subprocess.run(
        [sys.executable, "-m", "otel_scorers", "serve", "--upstream", "http://127.0.0.1:9",
         "--port", str(free_port()), "--grpc-port", "0", "--tls-cert", str(cert),
         "--tls-key", str(key)], input="s3cret-passphrase\n", capture_output=True, text=True,
        timeout=120, check=False)
    assert out.returncode == 2, out.stderr
    assert "is encrypted" in out.stderr and "openssl pkey" in out.stderr
    assert "Traceback" not in out.stderr and "Enter PEM pass phrase" not in out.stderr


def test_tls_on_both_listeners(judge_server: ScriptedJudgeServer, tmp_path: Path) -> None:
    import ssl
    import urllib.request

    from opentelemetry.sdk.trace.export import SpanExportResult

    cert, key, ca = _self_signed(tmp_path)
    port, grpc_port = free_port(), free_port()
    config = _config(tmp_path, judge_server)
    with recorder() as upstream:
        process = subprocess.Popen(
            [sys.executable, "-m", "otel_scorers", "serve", "--upstream", upstream.url,
             "--port", str(port), "--grpc-port", str(grpc_port), "--config", str(config),
             "--tls-cert", str(cert), "--tls-key", str(key)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            context = ssl.create_default_context(cadata=ca.decode())
            deadline = time.monotonic() + 60
            while True:
                try:
                    request = urllib.request.Request(
                        f"https://localhost:{port}/v1/traces", data=spans_body(2),
                        method="POST", headers={"Content-Type": PROTOBUF})
                    with urllib.request.urlopen(request, timeout=10, context=context) as reply:
                        assert reply.status == 200
                    break
                except OSError:
                    assert process.poll() is None and time.monotonic() < deadline
                    time.sleep(0.3)
            with pytest.raises(OSError):  # plain HTTP on the TLS port gets nowhere
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5)
            assert _grpc_export(f"localhost:{grpc_port}", ca=ca) == SpanExportResult.SUCCESS
        finally:
            process.terminate()
            output = process.communicate(timeout=30)[0]
    assert "https://" in output and "tls: on" in output
    assert len([p for p, _, _ in upstream.requests if p == "/v1/traces"]) == 2


# -- logs and metrics ---------------------------------------------------------------------------
async def test_logs_and_metrics_are_forwarded_and_logs_feed_capture(
        judge_server: ScriptedJudgeServer, tmp_path: Path) -> None:
    judge_server.responder = judge_responder()
    async with Upstream() as upstream:
        with gateway(_config(tmp_path, judge_server), upstream.url) as url:
            await asyncio.to_thread(_app_with_logs, url)
            await upstream.wait_for(lambda spans: sum(
                s.name.startswith("gen_ai.evaluation") for s in spans) >= 2, timeout=60)
            state = health(url)
    assert state["decisions"]["rubric"] == {"selected": 1, "scored": 1}, state
    assert state["requests"].get("logs:forwarded", 0) >= 1
    assert state["requests"].get("metrics:forwarded", 0) >= 1
    events = [r for r in upstream.logs
              if r.event_name == "gen_ai.client.inference.operation.details"]
    assert events, "the app's log records were not forwarded"
    assert any(m.name == "app.requests" for m in upstream.metrics)
    judged = "\n".join(r.text for r in judge_server.requests)
    assert "question from the log record" in judged


def _app_with_logs(url: str) -> None:
    """Spans, a GenAI content record (EVENT_ONLY style: none on the spans) and a metric, each
    sent by the real OTLP/HTTP exporters to the gateway."""
    from opentelemetry import trace
    from opentelemetry._logs import LogRecord
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(
        endpoint=f"{url}/v1/traces")))
    logs = LoggerProvider()
    logs.add_log_record_processor(SimpleLogRecordProcessor(OTLPLogExporter(
        endpoint=f"{url}/v1/logs")))
    meters = MeterProvider(metric_readers=[PeriodicExportingMetricReader(
        OTLPMetricExporter(endpoint=f"{url}/v1/metrics"), export_interval_millis=500)])
    meters.get_meter("app").create_counter("app.requests").add(1)
    tracer = provider.get_tracer("app")
    attributes = genai_attributes(prompt="question from the log record")
    content = {key: attributes.pop(key) for key in ("gen_ai.input.messages",
                                                   "gen_ai.output.messages")}
    content = {key: json.loads(value) for key, value in content.items()}
    with tracer.start_as_current_span("invoke_agent support", attributes=attributes), \
            tracer.start_as_current_span("chat", attributes={
                "gen_ai.operation.name": "chat"}) as chat:
        logs.get_logger("app").emit(LogRecord(
            event_name="gen_ai.client.inference.operation.details",
            context=trace.set_span_in_context(chat), attributes=content))
    meters.force_flush()
    meters.shutdown()
    logs.shutdown()
    provider.shutdown()


@pytest.mark.parametrize(("content", "says"), [
    ("", "is empty"), ("  \n\t\n", "is empty"), ("short-token\n", "11 characters"),
    ("two words in the file!", "does not hold one bearer token"),
    (f"{TOKEN}\n{TOKEN}\n", "does not hold one bearer token"),
])
def test_a_token_file_without_a_valid_token_stops_the_gateway(
        tmp_path: Path, content: str, says: str) -> None:
    from click.testing import CliRunner

    from otel_scorers.cli import main

    token_file = tmp_path / "token"
    token_file.write_text(content)
    result = CliRunner().invoke(main, ["serve", "--upstream", "http://127.0.0.1:9",
                                       "--port", str(free_port()), "--token-file",
                                       str(token_file)])
    assert result.exit_code == 2, result.output
    assert says in result.stderr and "auth: none" not in result.output
    assert content.strip() not in result.output or not content.strip()


def test_a_whitespace_token_variable_is_an_error_and_an_empty_one_means_unset() -> None:
    from otel_scorers.gateway.security import ENV_TOKEN, token_from

    with pytest.raises(ValueError, match="is empty"):
        token_from(None, {ENV_TOKEN: "   "})
    assert token_from(None, {ENV_TOKEN: ""}) is None
    assert token_from(None, {}) is None
    assert token_from(None, {ENV_TOKEN: f" {TOKEN}\n"}) == TOKEN


def test_grpc_senders_get_the_status_of_the_upstream_answer(
        judge_server: ScriptedJudgeServer, tmp_path: Path) -> None:
    """An upstream 401 is UNAUTHENTICATED, not INVALID_ARGUMENT: a sender acts on the code."""
    import grpc
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

    answers = {"status": 401}
    grpc_port = free_port()
    request = trace_service_pb2.ExportTraceServiceRequest.FromString(spans_body(1))
    with recorder(lambda path: (answers["status"], {}, b"no")) as upstream, \
            gateway(_config(tmp_path, judge_server), upstream.url, grpc_port=grpc_port), \
            grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
        stub = trace_service_pb2_grpc.TraceServiceStub(channel)
        for status, code in ((401, grpc.StatusCode.UNAUTHENTICATED),
                             (403, grpc.StatusCode.PERMISSION_DENIED),
                             (500, grpc.StatusCode.INTERNAL),
                             (400, grpc.StatusCode.INVALID_ARGUMENT),
                             (503, grpc.StatusCode.UNAVAILABLE)):
            answers["status"] = status
            with pytest.raises(grpc.RpcError) as raised:
                stub.Export(request, timeout=30)
            assert raised.value.code() == code, (status, raised.value.code())


def test_sigterm_during_a_hung_forward_exits_within_the_forward_timeout(
        judge_server: ScriptedJudgeServer, tmp_path: Path) -> None:
    import signal

    def hang(path: str) -> tuple[int, dict[str, str], bytes]:
        time.sleep(60)
        return 200, {}, b""

    port = free_port()
    with recorder(hang) as upstream:
        process = subprocess.Popen(
            [sys.executable, "-m", "otel_scorers", "serve", "--upstream", upstream.url,
             "--port", str(port), "--grpc-port", "0", "--config",
             str(_config(tmp_path, judge_server)), "--forward-timeout", "3",
             "--shutdown-timeout", "2"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            wait_until_up(f"http://127.0.0.1:{port}/health", process, timeout_s=60,
                          output=lambda: "")
            sender = threading.Thread(target=_post_with, args=(
                f"http://127.0.0.1:{port}", spans_body(1), {}), daemon=True)
            sender.start()
            deadline = time.monotonic() + 10
            while not upstream.requests and time.monotonic() < deadline:
                time.sleep(0.05)
            started = time.monotonic()
            process.send_signal(signal.SIGTERM)
            process.wait(45)
            took = time.monotonic() - started
        finally:
            if process.poll() is None:
                process.kill()
    # forward timeout 3 s, then evaluations and the telemetry flush within the shutdown timeout
    # (2 s each); before, each of three exports to the hung upstream took its 10 s in turn
    assert took < 11, f"the gateway took {took:.1f} s to stop"


def _health_with(url: str, token: str | None) -> dict[str, Any]:
    import urllib.request

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(f"{url}/health", headers=headers)
    with urllib.request.urlopen(request, timeout=5) as response:
        data: dict[str, Any] = json.loads(response.read())
        return data


def test_health_shows_state_only_with_the_token_and_error_texts_under_the_policy(
        judge_server: ScriptedJudgeServer, tmp_path: Path) -> None:
    """A judge error that quotes the prompt stays out of /health: without the token the
    gateway answers liveness alone; with it, the last error's text passes the content policy
    (here ``reasons: none`` and ``exported_content: strip``: withheld, its type kept)."""
    from otel_scorers.testing import fault

    secret = "Zebulon launch codes"
    judge_server.responder = lambda _request: fault(
        400, message=f"invalid request: {secret} is not allowed")
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    config = _config(tmp_path, judge_server, reasons="none", exported_content="strip")
    provider = TracerProvider()
    kept = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(kept))
    with provider.get_tracer("app").start_as_current_span(
            "invoke_agent bot", attributes=genai_attributes(prompt=f"Tell me the {secret}")):
        pass
    body = encode_spans(kept.get_finished_spans()).SerializeToString()
    with recorder() as upstream, gateway(config, upstream.url,
                                         args=("--token-file", str(token_file))) as url:
        status, _, _ = _post_with(url, body, {"Authorization": f"Bearer {TOKEN}",
                                              "Content-Type": "application/x-protobuf"})
        assert status == 200
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            state = _health_with(url, TOKEN)
            if state["health"]["scorers"]["rubric"]["last_error"]:
                break
            time.sleep(0.2)
        anonymous = _health_with(url, None)
        assert set(anonymous) == {"status", "version"}  # liveness, nothing of the pipeline
        last = state["health"]["scorers"]["rubric"]["last_error"]
        assert last["type"] == "request_rejected"
        assert secret not in json.dumps(state) and "withheld" in last["message"]
