"""Result sinks: evaluation results written natively into the backends teams already use
(Phoenix span annotations), beside the OTel telemetry, asynchronously and counted."""

from otel_scorers.sinks.base import IDENTIFIER, Evaluated, ResultSink, SinkError
from otel_scorers.sinks.phoenix import PhoenixSink
from otel_scorers.sinks.queue import SinkQueue

__all__ = ["IDENTIFIER", "Evaluated", "PhoenixSink", "ResultSink", "SinkError", "SinkQueue"]
