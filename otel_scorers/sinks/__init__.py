"""Result sinks: evaluation results written natively into the backends teams already use
(Phoenix span annotations, MLflow assessments), beside the OTel telemetry, asynchronously and
counted."""

from otel_scorers.sinks.base import IDENTIFIER, Evaluated, ResultSink, SinkError
from otel_scorers.sinks.mlflow import MLflowSink
from otel_scorers.sinks.phoenix import PhoenixSink
from otel_scorers.sinks.queue import SinkQueue

__all__ = ["IDENTIFIER", "Evaluated", "MLflowSink", "PhoenixSink", "ResultSink", "SinkError",
           "SinkQueue"]
