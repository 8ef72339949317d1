"""Test helpers for users of otel-scorers (and for this project's own tests).

:class:`ScriptedJudgeServer` is a real OpenAI-compatible HTTP server on 127.0.0.1. Point a scorer
at it (``model="openai/scripted-judge", api_base=server.url``) and litellm makes real HTTP calls;
the server answers from a script, records every request, and injects faults on demand (delays,
HTTP errors with ``Retry-After``, garbage bodies, hangs). Faking the judge at the HTTP boundary
keeps litellm, retries, timeouts and parsing under test.

The answer builders (:func:`rubric_answer`, :func:`alignment_answer`) produce the JSON a real judge
would return for this project's schemas, so tests state verdicts rather than hand-write JSON.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "Answer",
    "RecordedRequest",
    "ScriptedJudgeServer",
    "TraceIdRouter",
    "alignment_answer",
    "fault",
    "garbage",
    "hang",
    "judge_responder",
    "reply",
    "rubric_answer",
]

SCRIPTED_MODEL = "openai/scripted-judge"


@dataclass(frozen=True)
class Answer:
    """One scripted response: a chat completion, an HTTP fault, raw bytes, or a hang."""

    content: str | None = None
    status: int = 200
    body: bytes | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    finish_reason: str = "stop"
    prompt_tokens: int = 100
    completion_tokens: int = 50


@dataclass(frozen=True)
class RecordedRequest:
    """A request the server received, decoded (header names lower-cased)."""

    path: str
    headers: Mapping[str, str]
    body: Mapping[str, Any]
    received_at: float

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", []))

    @property
    def text(self) -> str:
        """All message contents joined: what the judge was shown."""
        parts: list[str] = []
        for message in self.messages:
            content = message.get("content")
            if isinstance(content, str):
                parts.append(content)
            elif isinstance(content, list):
                parts.extend(str(p.get("text", "")) for p in content if isinstance(p, dict))
        return "\n".join(parts)


def reply(content: str | Mapping[str, Any], **kwargs: Any) -> Answer:
    """A successful completion whose message content is ``content`` (dicts are JSON-encoded)."""
    text = content if isinstance(content, str) else json.dumps(content)
    return Answer(content=text, **kwargs)


def fault(status: int, *, retry_after: float | None = None, message: str = "scripted fault",
          delay_s: float = 0.0) -> Answer:
    """An HTTP error in the OpenAI error format, optionally with a ``Retry-After`` header."""
    headers = {} if retry_after is None else {"Retry-After": f"{retry_after:g}"}
    body = json.dumps({"error": {"message": message, "type": "scripted", "code": status}})
    return Answer(status=status, body=body.encode(), headers=headers, delay_s=delay_s)


def garbage(body: bytes = b"\x00\xffnot json at all<html>", status: int = 200) -> Answer:
    """A response body that is not a chat completion at all."""
    return Answer(status=status, body=body)


def hang(seconds: float) -> Answer:
    """Hold the connection open for ``seconds`` before answering 200 with an empty JSON object."""
    return Answer(content="{}", delay_s=seconds)


def rubric_answer(verdicts: Sequence[bool], *, reasoning: Sequence[str] | None = None,
                  overall: str = "Scripted overall assessment.") -> dict[str, Any]:
    """The judge JSON for a rubric with one verdict per criterion, in criterion order."""
    notes = list(reasoning) if reasoning is not None else [
        f"Scripted reasoning for criterion {i}." for i in range(1, len(verdicts) + 1)
    ]
    return {
        "verdicts": {
            f"c{i}": {"reasoning": note, "satisfied": bool(ok)}
            for i, (ok, note) in enumerate(zip(verdicts, notes, strict=True), start=1)
        },
        "overallAssessment": overall,
    }


def _dimensions(scores: Sequence[float], *, requirements: Iterable[tuple[str, bool]] = (),
                missing: Sequence[str] = ()) -> dict[str, Any]:
    intent, reqs, complete, appropriate = scores
    return {
        "intentAlignment": {
            "primaryIntent": "scripted intent", "reasoning": "scripted intent reasoning",
            "isAddressed": intent >= 0.5, "score": intent,
        },
        "requirementsFulfillment": {
            "requirements": [
                {"requirement": r, "reasoning": "scripted", "isFulfilled": ok}
                for r, ok in requirements
            ],
            "overallScore": reqs,
        },
        "completeness": {
            "missingElements": list(missing), "reasoning": "scripted completeness reasoning",
            "score": complete,
        },
        "responseAppropriateness": {
            "reasoning": "scripted appropriateness reasoning",
            "formatAlignment": appropriate >= 0.5,
            "toneAlignment": appropriate >= 0.5, "score": appropriate,
        },
    }


def alignment_answer(user: Sequence[float] | None = None, system: Sequence[float] | None = None,
                     *, requirements: Iterable[tuple[str, bool]] = (), missing: Sequence[str] = (),
                     overall: str = "Scripted overall assessment.") -> dict[str, Any]:
    """The judge JSON for the prompt-alignment scorer.

    ``user`` and ``system`` are the four dimension scores (intent, requirements, completeness,
    appropriateness); give the ones the scorer's mode asks for.
    """
    answer: dict[str, Any] = {}
    reqs = list(requirements)
    if user is not None:
        answer["userAlignment"] = _dimensions(user, requirements=reqs, missing=missing)
    if system is not None:
        answer["systemCompliance"] = _dimensions(system, requirements=reqs, missing=missing)
    answer["overallAssessment"] = overall
    return answer


Responder = Callable[[RecordedRequest], Answer]

_CRITERION_LINE = re.compile(r"^c(\d+): ", re.MULTILINE)


def judge_responder(*, satisfied: bool | Callable[[int, str], bool] = True,
                    user: Sequence[float] = (1.0, 1.0, 1.0, 1.0),
                    system: Sequence[float] = (1.0, 1.0, 1.0, 1.0),
                    delay_s: float = 0.0, prompt_tokens: int = 100,
                    completion_tokens: int = 50) -> Responder:
    """A responder that answers any rubric or prompt-alignment request of this library.

    Rubric requests get one verdict per criterion (``satisfied``, or ``satisfied(i, text)``
    per criterion); alignment requests get the dimension scores their mode asks for.
    """
    def respond(request: RecordedRequest) -> Answer:
        user_text = request.messages[-1].get("content", "") if request.messages else ""
        criteria = _CRITERION_LINE.findall(str(user_text))
        if criteria:
            texts = re.findall(r"^c\d+: (.*)$", str(user_text), re.MULTILINE)
            verdicts = [satisfied(i, t) if callable(satisfied) else satisfied
                        for i, t in enumerate(texts, start=1)]
            content: Mapping[str, Any] = rubric_answer(verdicts)
        else:
            task = str(user_text)
            content = alignment_answer(
                user=user if '"userAlignment"' in task else None,
                system=system if '"systemCompliance"' in task else None)
        return reply(content, delay_s=delay_s, prompt_tokens=prompt_tokens,
                     completion_tokens=completion_tokens)
    return respond


class ScriptedJudgeServer:
    """An OpenAI-compatible chat-completions server on 127.0.0.1 answering from a script.

    Answers queued with :meth:`script` are served first, in order; when the queue is empty the
    ``responder`` callable (if any) decides; otherwise the server answers HTTP 500 saying that no
    answer was scripted, so a test that under-scripts fails loudly instead of passing.
    """

    def __init__(self, responder: Responder | None = None) -> None:
        self.responder = responder
        self.requests: list[RecordedRequest] = []
        self._queue: deque[Answer] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[Any] = set()

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> ScriptedJudgeServer:
        handler = _make_handler(self)
        self._httpd = _QuietHTTPServer(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="scripted-judge",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        # Keep-alive connections outlive serve_forever(): close them so a stopped server is
        # really gone (clients then see connection errors, as with a dead judge).
        with self._lock:
            connections, self._connections = set(self._connections), set()
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                connection.close()

    def __enter__(self) -> ScriptedJudgeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("server not started")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """The ``api_base`` to give litellm (``http://127.0.0.1:PORT/v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    model = SCRIPTED_MODEL

    # -- scripting -------------------------------------------------------------------------
    def script(self, *answers: Answer | Mapping[str, Any] | str) -> None:
        """Queue answers; dicts and strings become successful completions."""
        with self._lock:
            for answer in answers:
                self._queue.append(answer if isinstance(answer, Answer) else reply(answer))

    def reset(self) -> None:
        with self._lock:
            self._queue.clear()
            self.requests.clear()

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def _next_answer(self, request: RecordedRequest) -> Answer:
        with self._lock:
            self.requests.append(request)
            if self._queue:
                return self._queue.popleft()
        if self.responder is not None:
            return self.responder(request)
        return fault(500, message="ScriptedJudgeServer: no answer scripted for this request")

    def _sleep(self, seconds: float) -> None:
        self._stopping.wait(seconds)


def _completion_body(answer: Answer, request: RecordedRequest) -> bytes:
    return json.dumps({
        "id": f"chatcmpl-scripted-{int(time.time() * 1e6)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": str(request.body.get("model", "scripted-judge")),
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": answer.content},
            "finish_reason": answer.finish_reason,
        }],
        "usage": {
            "prompt_tokens": answer.prompt_tokens,
            "completion_tokens": answer.completion_tokens,
            "total_tokens": answer.prompt_tokens + answer.completion_tokens,
        },
    }).encode()


def _make_handler(server: ScriptedJudgeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # headers and body are separate writes: without TCP_NODELAY, Nagle's algorithm and the
        # client's delayed ACK add ~40 ms to every answer
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            return

        def setup(self) -> None:
            super().setup()
            with server._lock:
                server._connections.add(self.connection)

        def finish(self) -> None:
            with server._lock:
                server._connections.discard(self.connection)
            with contextlib.suppress(OSError):
                super().finish()

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {"_unparsed": raw.decode("utf-8", "replace")}
            headers = {k.lower(): v for k, v in self.headers.items()}
            request = RecordedRequest(path=self.path, headers=headers,
                                      body=body, received_at=time.monotonic())
            answer = server._next_answer(request)
            if answer.delay_s:
                server._sleep(answer.delay_s)
            payload = answer.body if answer.body is not None else _completion_body(answer, request)
            try:
                self.send_response(answer.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                return

    return Handler


class _QuietHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if isinstance(sys.exc_info()[1], ConnectionError):
            return  # a client that went away (a cancelled judge call) is not a server error
        super().handle_error(request, client_address)


class TraceIdRouter:
    """An OTLP/HTTP ``/v1/traces`` router on 127.0.0.1 sending each span to one of ``targets``
    by trace id (:func:`otel_scorers.otlp.split_by_trace`): a stand-in, for tests and local
    trials, for the Collector's ``loadbalancing`` exporter with ``routing_key: traceID`` in
    front of several ``otel-scorers serve`` replicas. Answers with the worst target status."""

    def __init__(self, targets: Sequence[str]) -> None:
        self.targets = [t.rstrip("/") for t in targets]
        self.routed = [0] * len(self.targets)
        self._httpd: ThreadingHTTPServer | None = None

    def start(self) -> TraceIdRouter:
        router = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                from otel_scorers.otlp import OTLPDecodeError, decode_request, split_by_trace

                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                try:
                    request = decode_request(
                        body, content_type=self.headers.get("Content-Type", ""),
                        content_encoding=self.headers.get("Content-Encoding", ""))
                except OTLPDecodeError as exc:
                    self._reply(400, str(exc).encode())
                    return
                status = 200
                for index, part in enumerate(split_by_trace(request, len(router.targets))):
                    if not part.resource_spans:
                        continue
                    router.routed[index] += sum(len(ss.spans) for rs in part.resource_spans
                                                for ss in rs.scope_spans)
                    status = max(status, _post(f"{router.targets[index]}/v1/traces",
                                               part.SerializeToString()))
                self._reply(status, b"")

            def _reply(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._httpd = _QuietHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._httpd.serve_forever, name="trace-id-router",
                         daemon=True).start()
        return self

    @property
    def url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> TraceIdRouter:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _post(url: str, body: bytes) -> int:
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url, data=body, method="POST",
                                     headers={"Content-Type": "application/x-protobuf"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return 503


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m otel_scorers.testing``: serve a scripted judge until interrupted.

    Answers every rubric and prompt-alignment request (``judge_responder``) after ``--delay``
    seconds; handy as a stand-in judge for integration tests and benchmarks in another process.
    """
    import argparse

    parser = argparse.ArgumentParser(prog="python -m otel_scorers.testing")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument("--satisfied", choices=("true", "false"), default="true")
    args = parser.parse_args(argv)
    responder = judge_responder(satisfied=args.satisfied == "true", delay_s=args.delay)
    with ScriptedJudgeServer(responder) as server:
        print(server.url, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()
