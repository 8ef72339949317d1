"""``otel-scorers serve``: an OTLP/HTTP gateway that scores spans sent by any language's SDK
(or a Collector) and forwards them upstream.

``POST /v1/traces`` (protobuf or JSON, gzip or not):

1. the body is decoded (a malformed one gets ``400`` with the reason; nothing is forwarded);
2. the body is forwarded to ``{upstream}/v1/traces``: protobuf bodies byte for byte (gzip
   undone), JSON ones re-encoded as protobuf (the same spans; every OTLP receiver takes
   protobuf, not every one takes JSON). The reply mirrors the
   upstream's: success is ``200``; an upstream that is unreachable, throttling or failing gives
   ``503`` with ``Retry-After`` so the sender's exporter retries (the gateway never accepts
   spans it could not hand on, and never holds them: memory is bounded by the requests in
   flight, ``max_inflight`` x ``max_body_bytes``);
3. only then are the spans offered to the scoring pipeline (a
   :class:`~otel_scorers.pipeline.ScoringSpanProcessor`): ``on_end`` per span, which selects,
   samples and queues without waiting. A slow or hung judge therefore never delays or drops
   forwarded traces; at worst runs are dropped unscored, counted.

Evaluation spans, ``gen_ai.evaluation.result`` events and metrics go upstream over OTLP too
(``/v1/traces``, ``/v1/logs``, ``/v1/metrics``). ``GET /health`` reports liveness and the
pipeline's state; ``GET /metrics`` is the Prometheus exposition of the gateway's and the
pipeline's metrics.

Scaling out: run several replicas behind the Collector's ``loadbalancing`` exporter with
``routing_key: traceID`` (see ``collector-config/``), so every span of a trace reaches the same
replica and agent runs can be assembled from their LLM spans.

The HTTP server and the forwarding run on the gateway's own event loop; judging runs on the
library's background loop, so the two never wait on each other.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping
from typing import Any

from aiohttp import ClientSession, ClientTimeout, web
from google.rpc import status_pb2
from opentelemetry.metrics import MeterProvider, get_meter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from otel_scorers._version import __version__
from otel_scorers.emit import names as n
from otel_scorers.otlp import OTLPDecodeError, decode_request, gunzip, spans_of
from otel_scorers.pipeline.processor import ScoringSpanProcessor

__all__ = ["Gateway"]

logger = logging.getLogger(__name__)

_RETRYABLE = {429, 502, 503, 504}
_JSON = "application/json"
_PROTOBUF = "application/x-protobuf"


class Gateway:
    """The aiohttp application of ``otel-scorers serve`` (see the module docstring)."""

    def __init__(self, processor: ScoringSpanProcessor, upstream: str, *,
                 meter_provider: MeterProvider | None = None,
                 max_body_bytes: int = 16 * 1024 * 1024, max_inflight: int = 64,
                 forward_timeout_s: float = 10.0, retry_after_s: int = 5,
                 grpc_address: str | None = None,
                 upstream_headers: Mapping[str, str] | None = None) -> None:
        self.processor = processor
        self.upstream = upstream.rstrip("/")
        self.max_body_bytes = max_body_bytes
        self.max_inflight = max_inflight
        self.forward_timeout_s = forward_timeout_s
        self.retry_after_s = retry_after_s
        self.grpc_address = grpc_address
        self.upstream_headers = dict(upstream_headers or {})
        self._inflight = 0
        self._session: ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._grpc: Any = None
        self.counts: dict[str, int] = {}
        meter = get_meter(n.SCOPE_NAME, __version__, meter_provider=meter_provider)
        self._requests = meter.create_counter(
            n.METRIC_GATEWAY_REQUESTS, unit="{request}",
            description="OTLP trace requests received by the gateway, by outcome")
        self._spans = meter.create_counter(
            n.METRIC_GATEWAY_SPANS, unit="{span}",
            description="Spans forwarded upstream by the gateway")
        self._forward = meter.create_histogram(
            n.METRIC_GATEWAY_FORWARD_DURATION, unit="s",
            description="Time to forward a request upstream")

    def app(self) -> web.Application:
        app = web.Application(client_max_size=self.max_body_bytes)
        app.router.add_post("/v1/traces", self.traces)
        app.router.add_get("/health", self.health)
        app.router.add_get("/metrics", self.metrics)
        app.on_startup.append(self._start)
        app.on_cleanup.append(self._stop)
        return app

    async def _start(self, _app: web.Application) -> None:
        self._loop = asyncio.get_running_loop()
        self._session = ClientSession(timeout=ClientTimeout(total=self.forward_timeout_s),
                                      auto_decompress=False)
        if self.grpc_address is not None:
            from otel_scorers.gateway.grpc import grpc_server

            self._grpc = grpc_server(self, self.grpc_address)

    async def _stop(self, _app: web.Application) -> None:
        if self._grpc is not None:
            await asyncio.to_thread(lambda: self._grpc.stop(5).wait())
        if self._session is not None:
            await self._session.close()
        await asyncio.to_thread(self.processor.shutdown)

    def _count(self, outcome: str) -> None:
        self.counts[outcome] = self.counts.get(outcome, 0) + 1
        self._requests.add(1, {n.M_OUTCOME: outcome})

    # -- POST /v1/traces ----------------------------------------------------------------------
    async def traces(self, request: web.Request) -> web.Response:
        media = request.content_type or _PROTOBUF
        as_json = media == _JSON
        try:
            encoding = request.headers.get("Content-Encoding", "").strip().lower()
            if encoding not in ("", "identity", "gzip"):
                raise OTLPDecodeError(f"unsupported Content-Encoding {encoding!r} "
                                      "(gzip or none)")
            body = await request.read()
            if encoding == "gzip" and body[:2] == b"\x1f\x8b":
                # aiohttp normally undoes gzip itself; this covers servers set up without it.
                # Either way the upstream gets the plain bytes.
                body = gunzip(body)
            decoded = decode_request(body, content_type=media)
        except web.HTTPRequestEntityTooLarge:
            self._count("too_large")
            return self._error(413, f"body exceeds {self.max_body_bytes} bytes", as_json)
        except OTLPDecodeError as exc:
            self._count("invalid")
            return self._error(400, str(exc), as_json)
        except Exception as exc:  # a broken stream, bad gzip inside aiohttp
            self._count("invalid")
            return self._error(400, f"unreadable body: {exc}", as_json)
        # JSON is re-encoded: every OTLP receiver takes protobuf; the spans are the same
        status, message = await self.accept(decoded, None if as_json else body)
        if status != 200:
            return self._error(status, message, as_json, retry=status == 503)
        body_out = (b"{}" if as_json else ExportTraceServiceResponse().SerializeToString())
        return web.Response(body=body_out, status=200, content_type=media)

    async def accept(self, decoded: ExportTraceServiceRequest, body: bytes | None
                     ) -> tuple[int, str]:
        """Forward a decoded request (``body``: its protobuf bytes, when at hand), then offer
        its spans for scoring. Returns an HTTP status and a message; runs on the gateway loop.
        """
        if self._inflight >= self.max_inflight:
            self._count("busy")
            return 503, "gateway busy: too many requests in flight"
        self._inflight += 1
        try:
            started = time.monotonic()
            payload = body if body is not None else decoded.SerializeToString()
            status, detail = await self._forward_body(payload, _PROTOBUF)
            self._forward.record(time.monotonic() - started)
            if status is None or status in _RETRYABLE:
                self._count("upstream_unavailable")
                return 503, f"upstream not accepting spans: {detail}"
            if not 200 <= status < 300:
                self._count("upstream_rejected")
                return status, f"upstream rejected the spans: {detail}"
            self._count("forwarded")
            self._score(decoded)
            return 200, ""
        finally:
            self._inflight -= 1

    async def _forward_body(self, body: bytes, media: str) -> tuple[int | None, str]:
        assert self._session is not None
        try:
            async with self._session.post(f"{self.upstream}/v1/traces", data=body,
                                          headers={**self.upstream_headers,
                                                   "Content-Type": media}) as response:
                text = (await response.read())[:300]
                return response.status, f"{response.status} {text!r}"
        except Exception as exc:  # refused, timed out, reset: aiohttp and OS errors alike
            return None, f"{type(exc).__name__}: {exc}"

    def _score(self, decoded: Any) -> None:
        spans = 0
        try:
            readable = list(spans_of(decoded))
        except OTLPDecodeError as exc:
            logger.warning("otel-scorers gateway: forwarded spans not scored: %s", exc)
            return
        # children before parents, as they end in a live process (runs assemble from them)
        readable.sort(key=lambda s: s.end_time or 0)
        for span in readable:
            self.processor.on_end(span)
            spans += 1
        self._spans.add(spans)

    def _error(self, status: int, message: str, as_json: bool, *, retry: bool = False
               ) -> web.Response:
        code = {400: 3, 413: 8, 503: 14}.get(status, 2)  # google.rpc.Code
        headers = {"Retry-After": str(self.retry_after_s)} if retry else None
        if as_json:
            return web.Response(text=json.dumps({"code": code, "message": message}),
                                status=status, content_type=_JSON, headers=headers)
        body = status_pb2.Status(code=code, message=message).SerializeToString()
        return web.Response(body=body, status=status, content_type=_PROTOBUF, headers=headers)

    # -- GET /health, /metrics -----------------------------------------------------------------
    async def health(self, _request: web.Request) -> web.Response:
        return web.json_response({
            "status": "ok", "version": __version__, "upstream": self.upstream,
            "inflight_requests": self._inflight, "requests": self.counts,
            "queue_depth": self.processor.queue_depth,
            "decisions": self.processor.stats()})

    async def metrics(self, _request: web.Request) -> web.Response:
        from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

        return web.Response(body=generate_latest(REGISTRY),
                            headers={"Content-Type": CONTENT_TYPE_LATEST})
