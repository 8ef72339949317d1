"""``TraceIdRouter``: a stand-in, for tests and local trials, for the Collector's
``loadbalancing`` exporter (``routing_key: traceID``) in front of several gateways."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from otel_scorers.testing.judge_server import QuietHTTPServer

__all__ = ["TraceIdRouter"]


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

        self._httpd = QuietHTTPServer(("127.0.0.1", 0), Handler)
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
