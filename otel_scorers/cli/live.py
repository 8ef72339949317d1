"""``otel-scorers demo`` and ``otel-scorers check-config``."""

from __future__ import annotations

import json
from typing import Any

import click

from otel_scorers.cli.errors import Failed, UsageProblem
from otel_scorers.errors import ConfigError

__all__ = ["check_config", "demo"]


@click.command()
@click.option("--prometheus-port", type=int, default=None,
              help="Also serve the metrics for Prometheus on 127.0.0.1:PORT.")
@click.option("--keep-serving", is_flag=True,
              help="With --prometheus-port: keep serving after the demo until Ctrl-C.")
@click.option("--telemetry-file", type=click.Path(dir_okay=False),
              default="otel-scorers-demo.jsonl", show_default=True,
              help="Where the console exporters write (without OTLP).")
def demo(prometheus_port: int | None, keep_serving: bool, telemetry_file: str) -> None:
    """Run a traced example agent and score its runs live with both scorers."""
    from pathlib import Path

    from otel_scorers.demo import run_demo

    report = run_demo(prometheus_port=prometheus_port, telemetry_file=Path(telemetry_file))
    if not any(s.get("scored") for s in report.stats.values()):
        raise Failed("no run was scored: see the decisions above")
    if keep_serving and prometheus_port is not None:
        click.echo(f"Serving metrics on http://127.0.0.1:{prometheus_port}/metrics; Ctrl-C stops.")
        import time

        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


@click.command("check-config")
@click.option("--config", "config_file", type=click.Path(dir_okay=False),
              help="YAML settings file (default: $OTEL_SCORERS_CONFIG).")
@click.option("--json", "as_json", is_flag=True, help="Print the resolved settings as JSON.")
def check_config(config_file: str | None, as_json: bool) -> None:
    """Validate the configuration and print every resolved setting with its source."""
    from rich.console import Console
    from rich.table import Table

    from otel_scorers.config import load_settings

    try:
        resolved = load_settings(config=config_file)
    except ConfigError as exc:
        raise UsageProblem(str(exc)) from exc
    data = resolved.settings.model_dump(mode="json")
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    table = Table(title="otel-scorers settings")
    for column in ("setting", "value", "source"):
        table.add_column(column, overflow="fold")
    for path, value in _flatten(data).items():
        shown = "****" if path.endswith("api_key") and value else json.dumps(value)
        table.add_row(path, shown, resolved.sources.get(path, "default"))
    Console().print(table)


def _flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict) and value and key not in ("rubrics", "attributes"):
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out
