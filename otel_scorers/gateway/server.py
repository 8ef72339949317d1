"""``otel-scorers serve``: an OTLP/HTTP gateway that scores spans sent by any language's SDK
(or a Collector) and forwards them upstream.

``POST /v1/traces``, ``/v1/logs`` and ``/v1/metrics`` (protobuf or JSON, gzip or not):

1. admission first: a request past ``max_inflight`` gets ``503`` with ``Retry-After`` before
   its body is read; with a token configured, one without ``Authorization: Bearer <token>``
   gets ``401`` (see :mod:`.security`);
2. the body is read with bounds (:mod:`.body`: declared and real size, one content encoding,
   decompressed size, a read deadline) and decoded off the event loop (a malformed one gets
   ``400`` with the reason; nothing is forwarded);
3. the request is forwarded to ``{upstream}/v1/<signal>`` as protobuf (protobuf bodies byte for
   byte once decompressed; JSON ones re-encoded, the same data; with ``exported_content:
   strip``, re-encoded without GenAI content). The reply mirrors the upstream's: success is
   ``200``; an upstream that is unreachable, throttling or failing gives ``503`` with
   ``Retry-After`` so the sender's exporter retries; a redirect is never followed (it would
   turn the POST into a bodyless GET, or carry ``--upstream-header`` secrets to another
   origin) and gives ``502``. The gateway never accepts data it could not hand on, and never
   holds it;
4. only then are traces offered to the scoring pipeline (``on_end`` per span, children first)
   and log records with GenAI content to its log side (content joined to spans by ids, in
   either order). Metrics are forwarded only. A slow or hung judge therefore never delays or
   drops forwarded data; at worst runs are dropped unscored, counted.

Turn records (a gateway fleet's session turns, :mod:`otel_scorers.otlp.turns`) are
taken out of ``/v1/logs`` requests first: kept for the session scorers (or dropped and counted
without one), never forwarded upstream.

Memory is bounded by ``max_inflight`` requests of at most ``max_body_bytes`` each (decoded
size; see the README for the measured bound), plus the pipeline's queue and buffer.

Evaluation spans, ``gen_ai.evaluation.result`` events and metrics go upstream over OTLP too.
``GET /health`` reports liveness to anyone and, with the token when one is set, the pipeline's
state (decisions, the judge's last error under the content policy); ``GET /metrics`` is the
Prometheus exposition of the gateway's and the pipeline's metrics (numbers and bounded labels,
no text), unauthenticated for scrapers. Neither carries a secret.

Scaling out: several replicas behind the Collector's ``loadbalancing`` exporter with
``routing_key: traceID`` (see ``collector-config/``), so all of a trace reaches one replica.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal as signal_module
import time
from collections.abc import Mapping
from typing import Any

from aiohttp import ClientSession, ClientTimeout, web
from google.protobuf.message import Message
from google.rpc import status_pb2
from opentelemetry.metrics import MeterProvider, get_meter

from otel_scorers import names as n
from otel_scorers._version import __version__
from otel_scorers.gateway.body import BodyError, decompress, read_limited
from otel_scorers.gateway.content import strip_logs, strip_spans
from otel_scorers.gateway.security import BearerAuth, mask, safe_url, url_secrets
from otel_scorers.otlp import OTLPDecodeError, spans_of
from otel_scorers.otlp.bodies import SIGNALS, decode
from otel_scorers.otlp.logs import records_of, take_records
from otel_scorers.otlp.turns import TURN_EVENT
from otel_scorers.pipeline.processor import ScoringSpanProcessor

__all__ = ["Gateway"]

logger = logging.getLogger(__name__)

_RETRYABLE = {429, 502, 503, 504}
_JSON = "application/json"
_PROTOBUF = "application/x-protobuf"
_CODES = {400: 3, 401: 16, 408: 4, 413: 8, 415: 3, 502: 14, 503: 14}  # google.rpc.Code
#: Seconds: the SDK's default boundaries are milliseconds' (5, 10, ... 10,000), so a 2 ms forward
#: would land in le="5" and no quantile of the histogram would be right.
FORWARD_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Gateway:
    """The aiohttp application of ``otel-scorers serve`` (see the module docstring)."""

    def __init__(self, processor: ScoringSpanProcessor, upstream: str, *,
                 meter_provider: MeterProvider | None = None,
                 max_body_bytes: int = 16 * 1024 * 1024, max_inflight: int = 64,
                 forward_timeout_s: float = 10.0, read_timeout_s: float = 30.0,
                 retry_after_s: int = 5, grpc_address: str | None = None,
                 upstream_headers: Mapping[str, str] | None = None,
                 auth: BearerAuth | None = None, tls: Any = None,
                 tls_files: tuple[str, str] | None = None) -> None:
        self.processor = processor
        self.upstream = upstream.rstrip("/")
        self.max_body_bytes = max_body_bytes
        self.max_inflight = max_inflight
        self.forward_timeout_s = forward_timeout_s
        self.read_timeout_s = read_timeout_s
        self.retry_after_s = retry_after_s
        self.grpc_address = grpc_address
        self.upstream_headers = dict(upstream_headers or {})
        self.auth = auth
        self.tls = tls  # the HTTP listener's SSLContext (given to the web runner)
        self.tls_files = tls_files  # (cert, key) for the gRPC listener
        self.strip_policy = processor.strip_policy  # the processor's: one policy for both
        processor.log_processor()  # log records arrive here too: runs may wait for them
        self._inflight = 0
        self._session: ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._grpc: Any = None
        #: processors a reload replaced: shut down, kept so their cumulative counts (the
        #: observable decision counters) go on adding up instead of falling back
        self._retired: list[ScoringSpanProcessor] = []
        #: what the next reload builds (``serve`` with ``--config``; ``None``: none on SIGHUP)
        self.rebuild: Any = None
        self._reloading = False
        self.counts: dict[str, int] = {}
        meter = get_meter(n.SCOPE_NAME, __version__, meter_provider=meter_provider)
        self._requests = meter.create_counter(
            n.METRIC_GATEWAY_REQUESTS, unit="{request}",
            description="OTLP requests received by the gateway, by signal and outcome")
        self._spans = meter.create_counter(
            n.METRIC_GATEWAY_SPANS, unit="{span}",
            description="Spans forwarded upstream by the gateway")
        self._forward = meter.create_histogram(
            n.METRIC_GATEWAY_FORWARD_DURATION, unit="s",
            description="Time to forward a request upstream",
            explicit_bucket_boundaries_advisory=FORWARD_BUCKETS)

    @property
    def shown_upstream(self) -> str:
        """The upstream URL as it may be printed: without credentials."""
        return safe_url(self.upstream)

    def app(self) -> web.Application:
        # aiohttp's own decompression is off: bodies are decompressed here, with bounds
        app = web.Application(client_max_size=self.max_body_bytes,
                              handler_args={"auto_decompress": False})
        for signal in SIGNALS:
            app.router.add_post(f"/v1/{signal}", self._handler(signal))
        app.router.add_get("/health", self.health)
        app.router.add_get("/metrics", self.metrics)
        app.on_startup.append(self._start)
        app.on_cleanup.append(self._stop)
        return app

    async def _start(self, _app: web.Application) -> None:
        self._loop = asyncio.get_running_loop()
        if self.rebuild is not None and hasattr(signal_module, "SIGHUP"):
            self._loop.add_signal_handler(signal_module.SIGHUP, self._on_hup)
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

    # -- SIGHUP: the configuration again ----------------------------------------------------
    def _on_hup(self) -> None:
        if self._reloading:
            logger.warning("otel-scorers: a reload is running already; this SIGHUP is ignored")
            return
        self._reloading = True
        assert self._loop is not None
        self._loop.create_task(self.reload(self.rebuild))

    async def reload(self, build: Any) -> bool:
        """Swap in a processor ``build()`` makes from the configuration as it is now (rubrics,
        scorers, sampling): built and validated first, off the loop; a bad configuration is
        one error line and the running one is kept. The old processor finishes what it holds
        (its evaluations in flight and queued, its traces, its sessions) while new data goes
        to the new one: nothing in flight is lost. ``True`` when the new one is in."""
        try:
            try:
                fresh = await asyncio.to_thread(build)
            except Exception as exc:  # a bad file or variable, a scorer that cannot be built
                logger.error("otel-scorers: the configuration was not reloaded: %s; the running "
                             "one is kept", str(exc).splitlines()[0] if str(exc) else
                             type(exc).__name__)
                return False
            old = self.processor
            fresh.log_processor()
            self.processor, self.strip_policy = fresh, fresh.strip_policy
            self._retired.append(old)
            await asyncio.to_thread(old.shutdown)
            logger.warning("otel-scorers: configuration reloaded (scorers: %s)",
                           ", ".join(s.name for s in fresh.scorers) or "none")
            return True
        finally:
            self._reloading = False

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop serving requests (``None`` before start)."""
        return self._loop

    def count(self, signal: str, outcome: str) -> None:
        """One request of ``signal`` ended with ``outcome`` (``forwarded``, ``busy``, ...)."""
        key = outcome if signal == "traces" else f"{signal}:{outcome}"
        self.counts[key] = self.counts.get(key, 0) + 1
        self._requests.add(1, {n.M_OUTCOME: outcome, n.M_SIGNAL: signal})

    # -- POST /v1/<signal> ----------------------------------------------------------------------
    def _handler(self, signal: str) -> Any:
        async def handle(request: web.Request) -> web.Response:
            return await self.receive(request, signal)
        return handle

    async def receive(self, request: web.Request, signal: str) -> web.Response:
        as_json = (request.content_type or _PROTOBUF) == _JSON
        if self.auth is not None and not self.auth.allows(request.headers.get("Authorization")):
            self.count(signal, "unauthorized")
            return self._error(401, "missing or wrong bearer token", as_json,
                               headers={"WWW-Authenticate": "Bearer"})
        if self._inflight >= self.max_inflight:  # admission comes before reading
            self.count(signal, "busy")
            return self._error(503, "gateway busy: too many requests in flight", as_json,
                               retry=True)
        self._inflight += 1
        try:
            body = await read_limited(request.content, declared=request.content_length,
                                      max_bytes=self.max_body_bytes,
                                      timeout_s=self.read_timeout_s)
            body = decompress(body, request.headers.get("Content-Encoding", ""),
                              max_bytes=self.max_body_bytes)
            media = request.content_type or _PROTOBUF
            decoded, payload = await asyncio.to_thread(self._decode, signal, body, media)
            del body
            status, message = await self.accept(signal, decoded, payload, counted=True)
        except BodyError as exc:
            self.count(signal, {408: "timeout", 413: "too_large"}.get(exc.status, "invalid"))
            return self._error(exc.status, str(exc), as_json)
        except OTLPDecodeError as exc:
            self.count(signal, "invalid")
            return self._error(400, str(exc), as_json)
        finally:
            self._inflight -= 1
        if status != 200:
            return self._error(status, message, as_json, retry=status == 503)
        # an empty Export*ServiceResponse (full success) serializes to no bytes
        if as_json:
            return web.Response(body=b"{}", status=200, content_type=_JSON)
        return web.Response(body=b"", status=200, content_type=_PROTOBUF)

    def _decode(self, signal: str, body: bytes, media: str) -> tuple[Message, bytes]:
        """The decoded request and the protobuf bytes to forward (runs in a worker thread:
        a large JSON body never stalls the event loop)."""
        decoded = decode(body, content_type=media, signal=signal)
        json_body = media.split(";", maxsplit=1)[0].strip().lower() == _JSON
        if json_body or (self.strip_policy is not None and signal != "metrics"):
            return decoded, self._payload_of(signal, decoded)
        return decoded, body

    async def accept(self, signal: str, decoded: Message, payload: bytes | None = None, *,
                     counted: bool = False) -> tuple[int, str]:
        """Forward a decoded request (``payload``: the protobuf bytes to send, when already at
        hand), then offer it for scoring. Returns an HTTP status and a message; runs on the
        gateway loop. ``counted``: the caller holds an admission slot already."""
        if not counted:
            if self._inflight >= self.max_inflight:
                self.count(signal, "busy")
                return 503, "gateway busy: too many requests in flight"
            self._inflight += 1
        try:
            if signal == "logs":
                turns, left = await asyncio.to_thread(
                    take_records, decoded, TURN_EVENT)  # type: ignore[arg-type]
                if turns:  # a fleet's turn records: judged here, never forwarded upstream
                    payload = None
                    await asyncio.to_thread(self.processor.receive_turns, turns,
                                            authenticated=self.auth is not None)
                    if not left:
                        self.count(signal, "turns")
                        return 200, ""
            if payload is None:
                payload = await asyncio.to_thread(self._payload_of, signal, decoded)
            started = time.monotonic()
            status, detail = await self._forward_body(signal, payload)
            self._forward.record(time.monotonic() - started, {n.M_SIGNAL: signal})
            if status is None or status in _RETRYABLE:
                self.count(signal, "upstream_unavailable")
                return 503, f"upstream not accepting data: {detail}"
            if 300 <= status < 400:
                self.count(signal, "upstream_redirect")
                return 502, (f"upstream answered HTTP {status} (a redirect); redirects are "
                             "not followed: point --upstream at the final URL")
            if not 200 <= status < 300:
                self.count(signal, "upstream_rejected")
                return status, f"upstream rejected the data: {detail}"
            self.count(signal, "forwarded")
            if signal != "metrics":
                await asyncio.to_thread(self._score, signal, decoded)
            return 200, ""
        finally:
            if not counted:
                self._inflight -= 1

    def _payload_of(self, signal: str, decoded: Any) -> bytes:
        """Protobuf bytes of ``decoded``, without GenAI content when stripping."""
        policy = self.strip_policy
        if policy is None or signal == "metrics":
            return bytes(decoded.SerializeToString())
        forwarded = type(decoded)()
        forwarded.CopyFrom(decoded)
        if signal == "traces":
            strip_spans(forwarded, policy)
        else:
            strip_logs(forwarded, policy)
        return bytes(forwarded.SerializeToString())

    async def _forward_body(self, signal: str, body: bytes) -> tuple[int | None, str]:
        assert self._session is not None
        try:
            async with self._session.post(f"{self.upstream}/v1/{signal}", data=body,
                                          allow_redirects=False,
                                          headers={**self.upstream_headers,
                                                   "Content-Type": _PROTOBUF}) as response:
                text = (await response.content.read(300)).decode("utf-8", "replace")
                return response.status, self._masked(f"{response.status} {text!r}")
        except Exception as exc:  # refused, timed out, reset: aiohttp and OS errors alike
            return None, self._masked(f"{type(exc).__name__}: {exc}")

    def _masked(self, text: str) -> str:
        """Upstream answers and errors with the upstream's credentials and headers masked."""
        secrets = [*self.upstream_headers.values(), *url_secrets(self.upstream)]
        shown = self.shown_upstream
        if shown != self.upstream:
            text = text.replace(self.upstream, shown)
        return mask(text, secrets)

    def _score(self, signal: str, decoded: Any) -> None:
        """Offer forwarded data to the pipeline (a worker thread: conversion costs CPU)."""
        try:
            if signal == "logs":
                for record in records_of(decoded):
                    self.processor.observe_record(record)
                return
            readable = list(spans_of(decoded))
        except OTLPDecodeError as exc:
            logger.warning("otel-scorers gateway: forwarded data not scored: %s", exc)
            return
        # children before parents, as they end in a live process (runs assemble from them)
        readable.sort(key=lambda s: s.end_time or 0)
        for span in readable:
            self.processor.on_end(span)
        self._spans.add(len(readable))

    def _error(self, status: int, message: str, as_json: bool, *, retry: bool = False,
               headers: Mapping[str, str] | None = None) -> web.Response:
        code = _CODES.get(status, 2)
        extra = dict(headers or {})
        if retry:
            extra["Retry-After"] = str(self.retry_after_s)
        if as_json:
            return web.Response(text=json.dumps({"code": code, "message": message}),
                                status=status, content_type=_JSON, headers=extra)
        body = status_pb2.Status(code=code, message=message).SerializeToString()
        return web.Response(body=body, status=status, content_type=_PROTOBUF, headers=extra)

    # -- GET /health, /metrics -----------------------------------------------------------------
    async def health(self, request: web.Request) -> web.Response:
        """Liveness for anyone (a load balancer's probe); the pipeline's state (counts, the
        judge's last error) only with the token, when one is set."""
        if self.auth is not None and not self.auth.allows(request.headers.get("Authorization")):
            return web.json_response({"status": "ok", "version": __version__})
        return web.json_response({
            "status": "ok", "version": __version__, "upstream": self.shown_upstream,
            "inflight_requests": self._inflight, "requests": self.counts,
            "queue_depth": self.processor.queue_depth,
            "decisions": self.processor.stats(), "health": self.processor.health()})

    async def metrics(self, _request: web.Request) -> web.Response:
        from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

        return web.Response(body=generate_latest(REGISTRY),
                            headers={"Content-Type": CONTENT_TYPE_LATEST})
