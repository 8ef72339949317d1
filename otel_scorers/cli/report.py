"""``otel-scorers report``: the failure digest of a time window."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import click

from otel_scorers.cli.errors import Failed, UsageProblem

__all__ = ["report"]

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _seconds(_ctx: Any, _param: Any, value: str) -> float:
    found = _DURATION.fullmatch(value.strip())
    if found is None or float(found.group(1)) <= 0:
        raise click.BadParameter("a duration such as 30m, 1h or 2d")
    return float(found.group(1)) * _UNITS[found.group(2)]


@click.command()
@click.argument("files", nargs=-1, type=click.Path(exists=True, dir_okay=False))
@click.option("--jaeger", metavar="URL", help="Read from the Jaeger query API at URL (the UI's "
              "base URL, e.g. http://127.0.0.1:16686); needs --service.")
@click.option("--service", help="The service whose evaluations are read (Jaeger).")
@click.option("--phoenix", metavar="URL", help="Read this project's span annotations from the "
              "Phoenix at URL (--project; OTEL_SCORERS_PHOENIX_API_KEY as its key).")
@click.option("--project", default="default", show_default=True, help="The Phoenix project.")
@click.option("--mlflow", metavar="URI", help="Read this project's assessments from the MLflow "
              "tracking server at URI; needs --experiment.")
@click.option("--experiment", help="The MLflow experiment id (MLflow).")
@click.option("--window", "window_s", default="1h", show_default=True, callback=_seconds,
              help="The time window: the last 30m, 1h, 2d ... (compared with the one before).")
@click.option("--agent", help="Only this agent.")
@click.option("--scorer", help="Only this scorer.")
@click.option("--markdown", "as_markdown", is_flag=True, help="Markdown, for a ticket or chat.")
@click.option("--json", "as_json", is_flag=True, help="JSON, for tools.")
def report(files: tuple[str, ...], jaeger: str | None, service: str | None,
           phoenix: str | None, project: str, mlflow: str | None, experiment: str | None,
           window_s: float, agent: str | None, scorer: str | None, as_markdown: bool,
           as_json: bool) -> None:
    """The failure digest of a time window: pass rates by agent and scorer against the window
    before, and failures grouped by agent, scorer and criterion with their most frequent
    reasons and example traces. Reads evaluation results back from exported OTLP trace FILES
    (JSON lines or protobuf, .gz too), Jaeger (--jaeger, --service), Phoenix (--phoenix) or
    MLflow (--mlflow, --experiment).

    Exit 0 with the digest; 1 when the source cannot be read; 2 on a usage error.
    """
    from otel_scorers.report import SourceError, build_digest, markdown, terminal

    if as_markdown and as_json:
        raise UsageProblem("--markdown and --json are alternatives: give one")
    given = [name for name, value in (("FILES", files), ("--jaeger", jaeger),
                                      ("--phoenix", phoenix), ("--mlflow", mlflow)) if value]
    if len(given) != 1:
        raise UsageProblem("read from one of FILES, --jaeger URL (with --service), --phoenix "
                           "URL or --mlflow URI (with --experiment)"
                           + (f": {', '.join(given)} given" if given else ""))
    if jaeger and not service:
        raise UsageProblem("--jaeger needs --service: the service whose evaluations to read")
    if mlflow and not experiment:
        raise UsageProblem("--mlflow needs --experiment: the experiment id your traces go to")
    source = _source(files, jaeger, service, phoenix, project, mlflow, experiment)
    end_ns = time.time_ns()
    start_ns = end_ns - int(window_s * 1e9)
    try:  # one read of both windows: the one before is the comparison
        read, notes = source.read(start_ns - int(window_s * 1e9), end_ns)
    except SourceError as exc:
        raise Failed(str(exc)) from None
    wanted = [e for e in read if (agent is None or e.agent == agent)
              and (scorer is None or e.scorer == scorer.replace("-", "_"))]
    digest = build_digest([e for e in wanted if e.time_ns >= start_ns],
                          [e for e in wanted if e.time_ns < start_ns], start_ns=start_ns,
                          end_ns=end_ns, source=source.name, link=source.trace_link,
                          notes=notes)
    if as_json:
        click.echo(json.dumps(digest, indent=2))
    elif as_markdown:
        click.echo(markdown(digest), nl=False)
    else:
        terminal(digest)


def _source(files: tuple[str, ...], jaeger: str | None, service: str | None,
            phoenix: str | None, project: str, mlflow: str | None, experiment: str | None
            ) -> Any:
    import os

    from otel_scorers.errors import ConfigError
    from otel_scorers.report import FileSource, JaegerSource, SourceError
    from otel_scorers.report.backends import MLflowSource, PhoenixSource

    try:
        if files:
            return FileSource(files)
        if jaeger:
            return JaegerSource(jaeger, service or "")
        if phoenix:
            return PhoenixSource(phoenix, project,
                                 os.environ.get("OTEL_SCORERS_PHOENIX_API_KEY") or None)
        return MLflowSource(mlflow or "", experiment or "")
    except (ConfigError, SourceError) as exc:
        raise UsageProblem(str(exc)) from None
