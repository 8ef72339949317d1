"""The gateway's forward duration is in seconds with second buckets (issue 54): with the SDK's
default (millisecond) boundaries a 2 ms forward landed in le="5", so no quantile was right."""

from __future__ import annotations

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from otel_scorers import names as n
from otel_scorers.gateway.server import FORWARD_BUCKETS, Gateway
from otel_scorers.pipeline import ScoringSpanProcessor
from otel_scorers.scorers.checks_scorer import ChecksScorer


def test_a_2_ms_forward_lands_in_a_seconds_bucket() -> None:
    reader = InMemoryMetricReader()
    processor = ScoringSpanProcessor([ChecksScorer(["no_tool_errors"])], events=False)
    try:
        gateway = Gateway(processor, "http://127.0.0.1:9", meter_provider=MeterProvider(
            metric_readers=[reader]))
        gateway._forward.record(0.002, {"signal": "traces"})
    finally:
        processor.shutdown()
    data = reader.get_metrics_data()
    assert data is not None
    (point,) = [p for rm in data.resource_metrics for sm in rm.scope_metrics
                for m in sm.metrics if m.name == n.METRIC_GATEWAY_FORWARD_DURATION
                for p in m.data.data_points]
    assert tuple(point.explicit_bounds) == FORWARD_BUCKETS
    assert point.bucket_counts[FORWARD_BUCKETS.index(0.0025)] == 1  # le="0.0025", not le="5"
