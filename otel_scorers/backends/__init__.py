"""Result backends: evaluation results written natively into the backends teams already use
(Phoenix span annotations, MLflow assessments), beside the OTel telemetry, asynchronously and
counted; and reviewers' labels read back from them for calibration. Each backend is one module
and one registry row (:class:`otel_scorers.registry.Backend`)."""

from otel_scorers.backends.base import IDENTIFIER, Evaluated, ResultSink, SinkError
from otel_scorers.backends.mlflow import MLflowSink
from otel_scorers.backends.phoenix import PhoenixSink
from otel_scorers.backends.queue import SinkQueue

__all__ = ["IDENTIFIER", "Evaluated", "MLflowSink", "PhoenixSink", "ResultSink", "SinkError",
           "SinkQueue"]
