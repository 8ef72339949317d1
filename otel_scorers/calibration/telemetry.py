"""The calibration figures as OTel metrics, so a dashboard can track judge agreement over time.

One gauge per figure, recorded once per ``calibrate --emit`` run with the judge model and the
case count as attributes: ``otel_scorers.calibration.verdict_agreement``, ``.kappa``,
``.alignment_mae``, ``.band_hit_rate``, ``.errors``.
"""

from __future__ import annotations

from typing import Any

from otel_scorers.names import (
    M_CASES,
    M_JUDGE_MODEL,
    METRIC_CALIBRATION_AGREEMENT,
    METRIC_CALIBRATION_BAND_HITS,
    METRIC_CALIBRATION_ERRORS,
    METRIC_CALIBRATION_KAPPA,
    METRIC_CALIBRATION_MAE,
)

__all__ = ["emit_report"]

_FIGURES = {
    "verdict_agreement": METRIC_CALIBRATION_AGREEMENT,
    "kappa": METRIC_CALIBRATION_KAPPA,
    "alignment_mae": METRIC_CALIBRATION_MAE,
    "band_hit_rate": METRIC_CALIBRATION_BAND_HITS,
    "errors": METRIC_CALIBRATION_ERRORS,
}


def emit_report(report: dict[str, Any], endpoint: str) -> str | None:
    """Send the report's figures over OTLP/HTTP (figures without a value are left out);
    ``None`` when they went out, else what failed."""
    from otel_scorers.otlp import Telemetry

    telemetry = Telemetry(endpoint, service_name="otel-scorers-calibrate")
    try:
        meter = telemetry.meter_provider.get_meter("otel_scorers.calibration")
        attributes: dict[str, str | int] = {M_JUDGE_MODEL: str(report.get("model")),
                      M_CASES: int(report["cases"])}
        for key, name in _FIGURES.items():
            value = report.get(key)
            if value is not None:
                meter.create_gauge(name).set(value, attributes)
    finally:
        telemetry.shutdown()
    return telemetry.outcome()
