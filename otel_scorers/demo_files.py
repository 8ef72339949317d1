"""Where ``otel-scorers demo`` writes: its telemetry (OTLP, or OTLP JSON lines in a file) and,
beside the file, the configuration it scored with, so that ``rescore FILE --config`` judges the
demo's runs again as the demo did (the demo's rubrics are not in the telemetry)."""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from opentelemetry.sdk._logs.export import LogRecordExporter
from opentelemetry.sdk.metrics.export import MetricExporter
from opentelemetry.sdk.trace.export import SpanExporter

__all__ = ["Exporters", "config_path", "demo_config"]


def demo_config(model: str, checks: Sequence[str], rubrics: Mapping[str, str]
                ) -> dict[str, Any]:
    """The demo's configuration in the file's shape (docs/configuration.md): the judge, the
    three scorers, the checks and the rubrics its processor was built with. No key is ever
    written; the judge's API base only when it holds no credentials (user, password, query)."""
    judge: dict[str, Any] = {"model": model, "timeout_s": 180}
    base = os.environ.get("OTEL_SCORERS_JUDGE_API_BASE")
    if base:
        parts = urllib.parse.urlsplit(base)
        if parts.username is None and parts.password is None and not parts.query:
            judge["api_base"] = base
    return {"judge": judge,
            "scorers": [{"type": "rubric"}, {"type": "prompt_alignment"},
                        {"type": "checks", "checks": list(checks)}],
            "rubrics": dict(rubrics), "concurrency": 2, "evaluation_timeout_s": 600}


def config_path(telemetry_file: Path) -> Path:
    """Where the demo writes its configuration: beside its telemetry file."""
    path = telemetry_file.with_suffix(".yaml")
    return path if path != telemetry_file else telemetry_file.with_name(
        telemetry_file.name + ".yaml")


def _write_config(path: Path, telemetry_file: Path, config: dict[str, Any]) -> None:
    import yaml

    class Dumper(yaml.SafeDumper):
        """Rubrics as the block text they are."""

    Dumper.add_representer(str, lambda dumper, text: dumper.represent_scalar(
        "tag:yaml.org,2002:str", text, style="|" if "\n" in text else None))
    # (a file name holding a line break must not end the comment and write YAML of its own)
    data, written = _one_line(telemetry_file.name), _one_line(path.name)
    header = (f"# The configuration otel-scorers demo scored {data}'s runs "
              f"with:\n# otel-scorers rescore {data} --config {written}\n")
    path.write_text(header + yaml.dump(config, Dumper=Dumper, sort_keys=False,
                                       allow_unicode=True), encoding="utf-8")


def _one_line(text: str) -> str:
    return "".join(c if c.isprintable() else "?" for c in text)


class Exporters:
    """OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set, else OTLP JSON lines into a file (and the
    demo's configuration beside it, for ``rescore``)."""

    def __init__(self, telemetry_file: Path, config: dict[str, Any]) -> None:
        self.stream: IO[str] | None = None
        self.spans: SpanExporter
        self.metrics: MetricExporter
        self.logs: LogRecordExporter
        endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        if endpoint:
            from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
                OTLPMetricExporter,
            )
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            self.spans, self.metrics, self.logs = (OTLPSpanExporter(), OTLPMetricExporter(),
                                                   OTLPLogExporter())
            self.destination = f"OTLP/HTTP at {endpoint}"
        else:
            from otel_scorers.otlp.json_lines import (
                JsonLinesFile,
                JsonLinesLogExporter,
                JsonLinesMetricExporter,
                JsonLinesSpanExporter,
            )

            written = config_path(telemetry_file)
            _write_config(written, telemetry_file, config)
            self.stream = telemetry_file.open("w", encoding="utf-8")
            out = JsonLinesFile(self.stream)
            self.spans = JsonLinesSpanExporter(out)
            self.metrics = JsonLinesMetricExporter(out)
            self.logs = JsonLinesLogExporter(out)
            self.destination = (f"OTLP JSON lines in {telemetry_file}, the demo's configuration "
                                f"in {written} (read them back: otel-scorers rescore "
                                f"{telemetry_file} --config {written})")

    def close(self) -> None:
        if self.stream is not None:
            self.stream.close()
