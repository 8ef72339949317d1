"""``otel-scorers serve``: the OTLP scoring gateway (HTTP in :mod:`.server`, gRPC in
:mod:`.grpc`)."""

from otel_scorers.gateway.server import Gateway

__all__ = ["Gateway"]
