"""OTLP/gRPC for the gateway: ``TraceService``, ``LogsService`` and ``MetricsService``
``Export`` (the Collector's load-balancing exporter speaks only OTLP/gRPC to its backends),
handled like the HTTP requests: admission, forwarding, then scoring. With a token, calls
without ``authorization: Bearer <token>`` metadata fail with ``UNAUTHENTICATED``; with TLS
files, the port serves TLS only. The largest message accepted, decompressed, is the gateway's
body limit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.metrics.v1 import (
    metrics_service_pb2,
    metrics_service_pb2_grpc,
)
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

__all__ = ["Receiver", "grpc_server"]


class Receiver(Protocol):
    """What the gRPC server needs of the gateway (:class:`~otel_scorers.gateway.server.Gateway`):
    its limits and token, its event loop, and the one way in every request takes."""

    auth: Any
    max_inflight: int
    max_body_bytes: int
    forward_timeout_s: float
    tls_files: tuple[str, str] | None

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None: ...

    def accept(self, signal: str, decoded: Any) -> Coroutine[Any, Any, tuple[int, str]]: ...

    def count(self, signal: str, outcome: str) -> None: ...


def grpc_server(gateway: Receiver, address: str) -> Any:
    """Start the OTLP/gRPC server on ``address`` (``host:port``)."""
    from concurrent.futures import ThreadPoolExecutor

    import grpc

    # the upstream's HTTP answer as the gRPC status a sender acts on (retry only UNAVAILABLE)
    codes = {400: grpc.StatusCode.INVALID_ARGUMENT, 401: grpc.StatusCode.UNAUTHENTICATED,
             403: grpc.StatusCode.PERMISSION_DENIED, 404: grpc.StatusCode.UNIMPLEMENTED,
             413: grpc.StatusCode.RESOURCE_EXHAUSTED, 429: grpc.StatusCode.RESOURCE_EXHAUSTED,
             500: grpc.StatusCode.INTERNAL, 501: grpc.StatusCode.UNIMPLEMENTED,
             502: grpc.StatusCode.UNAVAILABLE, 503: grpc.StatusCode.UNAVAILABLE,
             504: grpc.StatusCode.DEADLINE_EXCEEDED}

    def code_of(status: int) -> Any:
        if status in codes:
            return codes[status]
        return grpc.StatusCode.UNAVAILABLE if status >= 500 else grpc.StatusCode.INVALID_ARGUMENT

    def export(signal: str, response: Callable[[], Any]) -> Callable[[Any, Any, Any], Any]:
        def method(_self: Any, request: Any, context: Any) -> Any:
            if gateway.auth is not None:
                header = dict(context.invocation_metadata()).get("authorization")
                if not gateway.auth.allows(header):
                    gateway.count(signal, "unauthorized")
                    context.abort(grpc.StatusCode.UNAUTHENTICATED,
                                  "missing or wrong bearer token")
            loop = gateway.loop
            assert loop is not None
            future = asyncio.run_coroutine_threadsafe(gateway.accept(signal, request), loop)
            try:
                status, message = future.result(gateway.forward_timeout_s + 5)
            except Exception as exc:
                future.cancel()
                context.abort(grpc.StatusCode.UNAVAILABLE, f"gateway: {type(exc).__name__}")
            if status != 200:
                context.abort(code_of(status), message)
            return response()
        return method

    servicers = [
        (trace_service_pb2_grpc.TraceServiceServicer,
         trace_service_pb2_grpc.add_TraceServiceServicer_to_server,
         export("traces", trace_service_pb2.ExportTraceServiceResponse)),
        (logs_service_pb2_grpc.LogsServiceServicer,
         logs_service_pb2_grpc.add_LogsServiceServicer_to_server,
         export("logs", logs_service_pb2.ExportLogsServiceResponse)),
        (metrics_service_pb2_grpc.MetricsServiceServicer,
         metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server,
         export("metrics", metrics_service_pb2.ExportMetricsServiceResponse)),
    ]
    server = grpc.server(ThreadPoolExecutor(max_workers=gateway.max_inflight,
                                            thread_name_prefix="otel-scorers-grpc"),
                         options=[("grpc.max_receive_message_length", gateway.max_body_bytes)],
                         maximum_concurrent_rpcs=gateway.max_inflight * 2)
    for base, add, method in servicers:
        servicer = type(f"{base.__name__}Impl", (base,), {"Export": method})()
        add(servicer, server)  # type: ignore[no-untyped-call]
    if gateway.tls_files is not None:
        cert, key = gateway.tls_files
        with open(key, "rb") as key_file, open(cert, "rb") as cert_file:
            credentials = grpc.ssl_server_credentials([(key_file.read(), cert_file.read())])
        bound = server.add_secure_port(address, credentials)
    else:
        bound = server.add_insecure_port(address)
    if bound == 0:
        raise OSError(f"cannot listen for OTLP/gRPC on {address}")
    server.start()
    return server
