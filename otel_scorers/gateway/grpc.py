"""OTLP/gRPC ``TraceService/Export`` for the gateway (the Collector's load-balancing exporter
speaks only OTLP/gRPC to its backends); requests are handled like ``POST /v1/traces``."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

if TYPE_CHECKING:
    from otel_scorers.gateway.server import Gateway

__all__ = ["grpc_server"]


def grpc_server(gateway: Gateway, address: str) -> Any:
    """OTLP/gRPC ``TraceService/Export`` on ``address``, handled like ``POST /v1/traces`` (the
    Collector's load-balancing exporter speaks only OTLP/gRPC to its backends)."""
    from concurrent.futures import ThreadPoolExecutor

    import grpc
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

    codes = {400: grpc.StatusCode.INVALID_ARGUMENT, 413: grpc.StatusCode.RESOURCE_EXHAUSTED,
             429: grpc.StatusCode.RESOURCE_EXHAUSTED, 503: grpc.StatusCode.UNAVAILABLE}

    class Servicer(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request: ExportTraceServiceRequest, context: Any
                   ) -> ExportTraceServiceResponse:
            assert gateway._loop is not None
            future = asyncio.run_coroutine_threadsafe(gateway.accept(request, None),
                                                      gateway._loop)
            try:
                status, message = future.result(gateway.forward_timeout_s + 5)
            except Exception as exc:
                future.cancel()
                context.abort(grpc.StatusCode.UNAVAILABLE, f"gateway: {exc}")
            if status != 200:
                context.abort(codes.get(status, grpc.StatusCode.INVALID_ARGUMENT), message)
            return ExportTraceServiceResponse()

    server = grpc.server(ThreadPoolExecutor(max_workers=gateway.max_inflight,
                                            thread_name_prefix="otel-scorers-grpc"),
                         options=[("grpc.max_receive_message_length", gateway.max_body_bytes)])
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(  # type: ignore[no-untyped-call]
        Servicer(), server)
    if server.add_insecure_port(address) == 0:
        raise OSError(f"cannot listen for OTLP/gRPC on {address}")
    server.start()
    return server
