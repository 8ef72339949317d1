"""The direct transport for OpenAI-compatible endpoints: when it is used, the same judgement,
usage and price as through litellm, and safe against a hostile endpoint (no redirects followed,
bounded bodies, no key echoed). The error mapping of both transports is in test_client.py,
which runs each scorer-level test through both."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest

from otel_scorers import RubricScorer
from otel_scorers.judge.client import JudgeClient
from otel_scorers.judge.litellm_transport import LiteLLMTransport
from otel_scorers.judge.local import LocalTransport
from otel_scorers.judge.openai_compatible import DirectTransport
from otel_scorers.judge.retry import RetryPolicy
from otel_scorers.judge.transport import ChatRequest, ChatResponse, StructuredOutput
from otel_scorers.testing import Answer, ScriptedJudgeServer, fault, garbage, rubric_answer

RUN = {"input": "Say hi", "output": "hi"}
FAST = RetryPolicy(max_retries=1, initial_backoff_s=0.01, max_backoff_s=0.02)


def kind(client: JudgeClient) -> type:
    return type(client.transport)


def test_which_transport_each_judge_gets() -> None:
    base = "http://127.0.0.1:9/v1"
    assert kind(JudgeClient("openai/x", api_base=base)) is DirectTransport
    assert kind(JudgeClient("openai/x", api_base=base, transport="litellm")) is LiteLLMTransport
    assert kind(JudgeClient("openai/x", api_base=base,
                            extra_params={"seed": 1})) is LiteLLMTransport
    assert kind(JudgeClient("openai/gpt-4o-mini")) is LiteLLMTransport  # the provider's own API
    assert kind(JudgeClient("anthropic/claude-3-5-haiku", api_base=base)) is LiteLLMTransport
    assert kind(JudgeClient("local/smollm2")) is LocalTransport


async def test_a_transport_of_your_own_is_all_the_client_talks_to() -> None:
    class Canned:
        model = "canned/judge"

        def __init__(self) -> None:
            self.seen: list[ChatRequest] = []

        async def complete(self, request: ChatRequest) -> ChatResponse:
            self.seen.append(request)
            return ChatResponse(content=json.dumps(rubric_answer([True])), prompt_tokens=7,
                                completion_tokens=3)

        def structured_mode(self) -> StructuredOutput:
            return "json_schema"

        def priced(self) -> bool:
            return False

        def key_variables(self) -> list[str]:
            return []

    canned = Canned()
    result = await RubricScorer(JudgeClient("canned/judge", transport=canned),
                                "- greets the user").arun(RUN)
    assert result.score == 1.0 and result.judge is not None
    assert (result.judge.prompt_tokens, result.judge.completion_tokens) == (7, 3)
    (request,) = canned.seen
    assert request.response_format is not None
    assert request.response_format["type"] == "json_schema"


def test_same_judgement_usage_and_price_as_litellm(judge_server: ScriptedJudgeServer) -> None:
    results = {}
    for transport in ("auto", "litellm"):
        judge_server.script(rubric_answer([True], reasoning=["greets"]))
        judge = JudgeClient("openai/gpt-4o-mini", api_base=judge_server.url, api_key="k",
                            transport=transport, structured_output="json_object")
        assert (kind(judge) is DirectTransport) == (transport == "auto")
        results[transport] = RubricScorer(judge, "- greets the user").run(RUN)
    direct, litellm = results["auto"], results["litellm"]
    assert direct.score == litellm.score == 1.0
    assert direct.reason == litellm.reason
    assert direct.judge is not None and litellm.judge is not None
    assert direct.judge.prompt_tokens == litellm.judge.prompt_tokens
    assert direct.judge.completion_tokens == litellm.judge.completion_tokens
    assert direct.judge.cost_usd is not None and litellm.judge.cost_usd is not None
    assert direct.judge.cost_usd == pytest.approx(litellm.judge.cost_usd, rel=1e-9)
    first, second = judge_server.requests[-2].body, judge_server.requests[-1].body
    assert first["messages"][0] == second["messages"][0]  # the same system prompt
    for key in ("model", "temperature", "max_tokens", "response_format"):
        assert first[key] == second[key], key


@pytest.mark.parametrize("transport", ["auto", "litellm"])
def test_negative_usage_from_the_provider_is_never_taken(
        judge_server: ScriptedJudgeServer, transport: str) -> None:
    """A usage block with negative token counts (issue 35, still open from round 2): no
    negative tokens or spend through either transport, so no budget is refilled by it."""
    judge_server.script(Answer(content=json.dumps(rubric_answer([True])),
                               prompt_tokens=-50_000, completion_tokens=-7))
    judge = JudgeClient("openai/gpt-4o-mini", api_base=judge_server.url, api_key="k",
                        transport=transport, structured_output="json_object")
    result = RubricScorer(judge, "- greets the user").run(RUN)
    assert result.score == 1.0 and result.judge is not None
    assert result.judge.estimated  # as for no usage: estimated from the prompt and answer
    assert result.judge.prompt_tokens > 0 and result.judge.completion_tokens >= 0
    assert result.judge.cost_usd is None or result.judge.cost_usd >= 0


def test_a_response_never_holds_negative_or_broken_figures() -> None:
    odd = ChatResponse(content="x", prompt_tokens=-1, completion_tokens=True,  # type: ignore[arg-type]
                       cost_usd=float("nan"))
    assert (odd.prompt_tokens, odd.completion_tokens, odd.cost_usd) == (0, 0, None)
    assert ChatResponse(content="x", cost_usd=-0.5).cost_usd is None
    assert ChatResponse(content="x", prompt_tokens=3, cost_usd=0.25).cost_usd == 0.25


def test_unpriced_model_has_no_cost(judge_server: ScriptedJudgeServer) -> None:
    judge_server.script(rubric_answer([True]))
    result = RubricScorer("openai/my-own-model", "- greets", api_base=judge_server.url).run(RUN)
    assert result.score == 1.0 and result.judge is not None
    assert result.judge.cost_usd is None


def test_a_redirect_is_not_followed(judge_server: ScriptedJudgeServer) -> None:
    """A hostile or misconfigured endpoint cannot send the key elsewhere."""
    judge_server.script(Answer(status=307, headers={"Location": "http://127.0.0.1:9/steal"}))
    result = RubricScorer(judge_server.model, "- greets", api_base=judge_server.url,
                          api_key="sk-secret-123456789", retry=FAST).run(RUN)
    assert result.error is not None and result.error.type == "invalid_response"
    assert len(judge_server.requests) == 1


def test_a_huge_body_is_cut_and_an_error(judge_server: ScriptedJudgeServer) -> None:
    judge_server.script(garbage(b"x" * (9 * 1024 * 1024)))
    result = RubricScorer(judge_server.model, "- greets", api_base=judge_server.url,
                          retry=FAST).run(RUN)
    assert result.error is not None and result.error.type == "invalid_response"
    assert "larger than 8 MB" in result.error.message


@pytest.mark.parametrize("stall", ["before_headers", "mid_body"])
def test_a_judge_that_stalls_is_cut_at_timeout_s(stall: str) -> None:
    """The direct transport ends its own calls (the client arms no timer around them): a
    judge that stops answering, before its headers or in the middle of its body, is a
    ``timeout`` at ``timeout_s``, not at the client's backstop five seconds later."""
    import socket
    import threading
    import time

    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        with contextlib.suppress(OSError):
            while not stop.is_set():
                connection, _ = listener.accept()
                connection.recv(65_536)
                if stall == "mid_body":
                    connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                       b"Content-Length: 500\r\n\r\n{\"choices\": [")
                stop.wait(10)
                connection.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        judge = JudgeClient("openai/stalled", api_base=f"http://127.0.0.1:"
                            f"{listener.getsockname()[1]}/v1", api_key="k", timeout_s=0.5,
                            retry=RetryPolicy(max_retries=0))
        assert isinstance(judge.transport, DirectTransport) and judge.transport.bounded
        started = time.monotonic()
        result = RubricScorer(judge, "- greets").run(RUN)
        elapsed = time.monotonic() - started
        assert result.error is not None and result.error.type == "timeout", result.error
        assert elapsed < 4.0, elapsed  # 0.5 s and the call's overhead; the backstop is 5.5 s
    finally:
        stop.set()
        listener.close()


def test_the_key_is_never_echoed(judge_server: ScriptedJudgeServer) -> None:
    key = "sk-live-abcdefghijklmnopqrstuvwx"
    judge_server.script(fault(401, message=f"Incorrect API key provided: {key}"))
    result = RubricScorer(judge_server.model, "- greets", api_base=judge_server.url,
                          api_key=key, retry=FAST).run(RUN)
    assert result.error is not None and result.error.type == "auth"
    assert key not in result.error.message and key not in result.reason
    assert "OTEL_SCORERS_JUDGE_API_KEY" in result.error.message


@pytest.mark.parametrize("transport", ["auto", "litellm"])
@pytest.mark.parametrize("echo", ["prefix", "suffix", "basic", "proxy"])
def test_no_piece_of_a_secret_is_echoed(judge_server: ScriptedJudgeServer,
                                        monkeypatch: pytest.MonkeyPatch, echo: str,
                                        transport: str) -> None:
    """A provider (or proxy) echoing part of a key, the key inside a Basic credential, or the
    proxy's own credentials: none of it reaches the error text that is exported."""
    import base64

    key = "sk-live-abcdefghijklmnopqrstuvwx"
    proxy_password = "pr0xy-s3cret-pw"
    monkeypatch.setenv("HTTPS_PROXY", f"http://ops:{proxy_password}@proxy.invalid:3128")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    leaked = {"prefix": key[:20], "suffix": key[-14:],
              "basic": base64.b64encode(f"user:{key}".encode()).decode(),
              "proxy": f"ops:{proxy_password}"}[echo]
    judge_server.script(fault(401, message=f"Incorrect credentials provided: {leaked}"))
    judge = JudgeClient(judge_server.model, api_base=judge_server.url, api_key=key, retry=FAST,
                        transport=transport)
    result = RubricScorer(judge, "- greets").run(RUN)
    assert result.error is not None and result.error.type == "auth", result
    for text in (result.error.message, result.reason):
        assert leaked not in text
        assert key[4:14] not in text and proxy_password not in text
        assert "****" in text


def test_no_key_sends_no_authorization(judge_server: ScriptedJudgeServer,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A local OpenAI-compatible server needs no key: none is made up; OPENAI_API_KEY is
    sent when set, as litellm does for openai/ models."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    judge_server.script(rubric_answer([True]), rubric_answer([True]))
    assert RubricScorer(judge_server.model, "- greets", api_base=judge_server.url
                        ).run(RUN).score == 1.0
    assert "authorization" not in judge_server.requests[-1].headers
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    assert RubricScorer(judge_server.model, "- greets", api_base=judge_server.url
                        ).run(RUN).score == 1.0
    assert judge_server.requests[-1].headers["authorization"] == "Bearer sk-from-env"


def test_the_proxy_environment_is_honoured(judge_server: ScriptedJudgeServer,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Behind an egress proxy the judge stays reachable: HTTP_PROXY is used (here a closed
    port, so the call fails to connect) and NO_PROXY bypasses it, as litellm's clients do."""
    from otel_scorers import http
    from otel_scorers.background_loop import run_sync
    from tests.support import free_port

    async def fresh_session() -> None:  # a judge reads the environment when it is made
        await http.close_all()

    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{free_port()}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    run_sync(fresh_session())
    judge_server.script(rubric_answer([True]))
    result = RubricScorer(judge_server.model, "- greets", api_base=judge_server.url,
                          retry=RetryPolicy(max_retries=0)).run(RUN)
    assert result.error is not None and result.error.type == "connection_error"
    assert not judge_server.requests  # it went to the proxy, not straight to the judge
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    run_sync(fresh_session())
    assert RubricScorer(judge_server.model, "- greets", api_base=judge_server.url
                        ).run(RUN).score == 1.0
    monkeypatch.delenv("HTTP_PROXY")
    monkeypatch.delenv("NO_PROXY")
    run_sync(fresh_session())


def test_a_proxy_with_credentials_gets_them_as_proxy_auth(judge_server: ScriptedJudgeServer,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """HTTP_PROXY with user:password@ routes the call through the proxy (here the scripted
    server, which records the absolute request target) with a Proxy-Authorization header; the
    password never appears in the URL that errors could name."""
    import base64

    proxy = judge_server.url.removesuffix("/v1").replace("://", "://us%40er:s3cret@")
    monkeypatch.setenv("HTTP_PROXY", proxy)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    judge_server.script(rubric_answer([True]))
    # a judge host that does not resolve: only the proxy can reach it
    result = RubricScorer(judge_server.model, "- greets", api_key="k",
                          api_base="http://judge.invalid:9/v1").run(RUN)
    assert result.score == 1.0, result.error
    (request,) = judge_server.requests
    assert request.path == "http://judge.invalid:9/v1/chat/completions"
    expected = base64.b64encode(b"us@er:s3cret").decode()
    assert request.headers["proxy-authorization"] == f"Basic {expected}"
    assert request.headers["authorization"] == "Bearer k"


def test_a_netrc_entry_never_clashes_with_the_key(judge_server: ScriptedJudgeServer,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Path) -> None:
    """A ~/.netrc with a default entry (common on build machines) is not read for the judge:
    the API key stays the one Authorization."""
    netrc = tmp_path / "netrc"
    netrc.write_text("default login someone password other\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    judge_server.script(rubric_answer([True]))
    result = RubricScorer(judge_server.model, "- greets", api_key="k",
                          api_base=judge_server.url).run(RUN)
    assert result.score == 1.0, result.error
    assert judge_server.requests[-1].headers["authorization"] == "Bearer k"


def test_an_unreachable_proxy_is_named_without_its_password(
        judge_server: ScriptedJudgeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support import free_port

    monkeypatch.setenv("HTTP_PROXY", f"http://ops:s3cret@127.0.0.1:{free_port()}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    result = RubricScorer(judge_server.model, "- greets", api_key="k",
                          api_base="http://judge.invalid:9/v1",
                          retry=RetryPolicy(max_retries=0)).run(RUN)
    assert result.error is not None and result.error.type == "connection_error"
    assert "s3cret" not in result.error.message and "s3cret" not in result.reason
    assert not judge_server.requests


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class _HostileJudge:
    """An endpoint on 127.0.0.1 answering every chat completion with a gzip bomb (a few
    hundred KB that inflate to 256 MB) or an endless body."""

    def __init__(self, mode: str) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        bomb = _gzip_bomb(256) if mode == "bomb" else b""

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                return

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0) or 0))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                try:
                    if mode == "bomb":
                        self.send_header("Content-Encoding", "gzip")
                        self.send_header("Content-Length", str(len(bomb)))
                        self.end_headers()
                        self.wfile.write(bomb)
                    else:
                        self.send_header("Transfer-Encoding", "chunked")
                        self.end_headers()
                        chunk = b'{"a": "' + b"x" * 65_536
                        for _ in range(16_384):  # 1 GB, never a complete answer
                            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                except (BrokenPipeError, ConnectionResetError):
                    pass

        class Server(ThreadingHTTPServer):
            def handle_error(self, request: object, client_address: object) -> None:
                return  # the client hung up on purpose: that is the point

        self.server = Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _gzip_bomb(megabytes: int) -> bytes:
    import zlib

    packer = zlib.compressobj(9, zlib.DEFLATED, 31)  # gzip framing
    block = b"\0" * (1024 * 1024)
    return b"".join([*(packer.compress(block) for _ in range(megabytes)), packer.flush()])


@pytest.mark.parametrize("transport", ["litellm", "direct"])
@pytest.mark.parametrize("mode", ["bomb", "endless"])
def test_each_transport_bounds_what_it_reads(mode: str, transport: str) -> None:
    hostile = _HostileJudge(mode)
    try:
        judge = JudgeClient("openai/hostile", api_base=hostile.url, api_key="k",
                            transport="litellm" if transport == "litellm" else "auto",
                            retry=FAST, timeout_s=30)
        assert (type(judge.transport) is DirectTransport) == (transport == "direct")
        RubricScorer(judge, "- greets").run(RUN)  # litellm imported and warm before measuring
        before = _rss_mb()
        result = RubricScorer(judge, "- greets").run(RUN)
        grown = _rss_mb() - before
    finally:
        hostile.close()
    assert result.error is not None and result.error.type == "invalid_response", result
    assert "larger than 8 MB" in result.error.message
    assert grown < 120, f"the application grew by {grown:.0f} MB"
