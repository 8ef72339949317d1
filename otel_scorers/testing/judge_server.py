"""``ScriptedJudgeServer``: a real OpenAI-compatible HTTP server on 127.0.0.1.

Point a scorer at it (``model="openai/scripted-judge", api_base=server.url``) and litellm makes
real HTTP calls; the server answers from a script, records every request, and injects faults on
demand (delays, HTTP errors with ``Retry-After``, garbage bodies, hangs). Faking the judge at the
HTTP boundary keeps litellm, retries, timeouts and parsing under test.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
import urllib.parse
from collections import deque
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from otel_scorers.testing.answers import Answer, RecordedRequest, Responder, fault, reply
from otel_scorers.testing.batches import ScriptedBatches

__all__ = ["SCRIPTED_MODEL", "QuietHTTPServer", "ScriptedJudgeServer"]

SCRIPTED_MODEL = "openai/scripted-judge"


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
        #: OpenAI's files and batches endpoints, answering each line as a live request
        self.batches = ScriptedBatches(self._batch_answer)

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> ScriptedJudgeServer:
        handler = _make_handler(self)
        self._httpd = QuietHTTPServer(("127.0.0.1", 0), handler)
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
            self.batches = ScriptedBatches(self._batch_answer)

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

    def _batch_answer(self, request: RecordedRequest) -> tuple[Answer, bytes]:
        answer = self._next_answer(request)
        payload = answer.body if answer.body is not None else _completion_body(answer, request)
        return answer, payload

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
            **({"prompt_tokens_details": {"cached_tokens": answer.cached_tokens}}
               if answer.cached_tokens else {}),
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

        def _batches(self, method: str, raw: bytes) -> None:
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, payload = server.batches.handle(method, self.path, headers, raw)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self) -> None:
            self._batches("GET", b"")

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0") or 0)
            raw = self.rfile.read(length)
            if urllib.parse.urlsplit(self.path).path.startswith(("/v1/files", "/v1/batches")):
                self._batches("POST", raw)  # (a proxy's absolute target too)
                return
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


class QuietHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    # the listen backlog of a real server (socketserver's default of 5 overflows when 32
    # judge calls connect at once: the kernel drops SYNs and the client retries after 1 s)
    request_queue_size = 1024

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if isinstance(sys.exc_info()[1], ConnectionError):
            return  # a client that went away (a cancelled judge call) is not a server error
        super().handle_error(request, client_address)
