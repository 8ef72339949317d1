"""The ``otel-scorers`` command line: thin commands that parse, call the library and print.

User mistakes are ``click.ClickException`` (exit 1, one line). ``score`` exits 0 when the run
was scored and 1 when it could not be (the error is printed); ``--fail-under`` turns a low score
into exit code 2 for CI checks.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from otel_scorers.errors import ConfigError
from otel_scorers.judge.client import ENV_API_BASE, ENV_API_KEY, ENV_MODEL, JudgeClient
from otel_scorers.scorers.alignment import (
    AlignmentAnalysis,
    AlignmentDimensions,
    PromptAlignmentScorer,
)
from otel_scorers.scorers.base import BaseScorer
from otel_scorers.scorers.result import ScoreResult
from otel_scorers.scorers.rubric import Criterion, RubricAnalysis, RubricScorer, parse_rubric
from otel_scorers.scorers.run import Message, ScorerRun

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="otel-scorers")
def main() -> None:
    """Judge AI-agent runs with rubric and prompt-alignment scorers."""


def _read_text(value: str) -> str:
    """``@path`` reads a file; anything else is the text itself."""
    if value.startswith("@"):
        try:
            return Path(value[1:]).read_text(encoding="utf-8")
        except OSError as exc:
            raise click.ClickException(f"cannot read {value[1:]}: {exc.strerror}") from exc
    return value


def _build_run(run_file: str | None, input_text: str | None, system: tuple[str, ...],
               output: str | None) -> ScorerRun:
    if run_file is not None:
        try:
            data = json.loads(Path(run_file).read_text(encoding="utf-8"))
            base = ScorerRun.coerce(data)
        except (OSError, ValueError, TypeError) as exc:
            raise click.ClickException(f"cannot read the run from {run_file}: {exc}") from exc
    else:
        base = ScorerRun()
    updates: dict[str, Any] = {}
    if input_text is not None:
        updates["input_messages"] = (Message(role="user", content=_read_text(input_text)),)
    if system:
        updates["system_messages"] = tuple(Message(role="system", content=_read_text(s))
                                           for s in system)
    if output is not None:
        updates["output"] = (Message(role="assistant", content=_read_text(output)),)
    run = base.model_copy(update=updates)
    if not run.output:
        raise click.ClickException("nothing to score: give --output TEXT or --run FILE.json")
    return run


@main.command()
@click.option("--scorer", "scorer_name", type=click.Choice(["rubric", "prompt-alignment"]),
              default="rubric", show_default=True, help="Which scorer judges the run.")
@click.option("--criteria", multiple=True, metavar="TEXT",
              help="Required criterion (repeatable), a newline checklist, or @file.")
@click.option("--optional", multiple=True, metavar="TEXT",
              help="Optional criterion: judged and reported, never gating (repeatable).")
@click.option("--mode", type=click.Choice(["user", "system", "both"]), default="both",
              show_default=True, help="Prompt-alignment evaluation mode.")
@click.option("--scale", type=float, default=1.0, show_default=True, help="Maximum score.")
@click.option("--input", "input_text", metavar="TEXT", help="The user prompt (or @file).")
@click.option("--system", multiple=True, metavar="TEXT",
              help="A system message (repeatable, or @file).")
@click.option("--output", metavar="TEXT", help="The agent's response (or @file).")
@click.option("--run", "run_file", type=click.Path(exists=True, dir_okay=False),
              help="The run as JSON (the seed's shapes); --input/--system/--output override.")
@click.option("--model", envvar=ENV_MODEL, help=f"Judge model (litellm string). [env {ENV_MODEL}]")
@click.option("--api-base", envvar=ENV_API_BASE, help=f"Judge API base URL. [env {ENV_API_BASE}]")
@click.option("--api-key", envvar=ENV_API_KEY, help=f"Judge API key. [env {ENV_API_KEY}]")
@click.option("--timeout", type=float, default=60.0, show_default=True,
              help="Seconds per judge call.")
@click.option("--redact/--no-redact", default=False, show_default=True,
              help="Redact e-mails, phones, card numbers and secrets before judging.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (to_dict()).")
@click.option("--fail-under", type=float, default=None,
              help="Exit 2 when the score is below this value.")
def score(scorer_name: str, criteria: tuple[str, ...], optional: tuple[str, ...], mode: str,
          scale: float, input_text: str | None, system: tuple[str, ...], output: str | None,
          run_file: str | None, model: str | None, api_base: str | None, api_key: str | None,
          timeout: float, redact: bool, as_json: bool, fail_under: float | None) -> None:
    """Score one run: a prompt, optional system messages and the agent's output."""
    run = _build_run(run_file, input_text, system, output)
    try:
        judge = JudgeClient(model, api_base=api_base, api_key=api_key, timeout_s=timeout,
                            redactor=redact)
        scorer: BaseScorer
        if scorer_name == "rubric":
            rubric = [c for text in criteria for c in parse_rubric(_read_text(text))]
            rubric += [Criterion(c.description, required=False)
                       for text in optional for c in parse_rubric(_read_text(text))]
            scorer = RubricScorer(judge, rubric, scale=scale)
        else:
            if criteria or optional:
                raise click.UsageError("--criteria/--optional apply to the rubric scorer only")
            scorer = PromptAlignmentScorer(judge, scale=scale, evaluation_mode=mode)  # type: ignore[arg-type]
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc
    result = scorer.run(run)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
    else:
        _print_result(result)
    if result.error is not None:
        if not as_json:
            click.echo(f"Error: not scored ({result.error.type}): {result.error.message}",
                       err=True)
        sys.exit(1)
    if fail_under is not None and result.score is not None and result.score < fail_under:
        sys.exit(2)


def _print_result(result: ScoreResult) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    analysis = result.analysis
    if isinstance(analysis, RubricAnalysis):
        table = Table(title=f"{result.scorer}: criteria", show_lines=False)
        for column in ("criterion", "required", "verdict", "reasoning"):
            table.add_column(column, overflow="fold")
        for c in analysis.criteria:
            verdict = "[green]satisfied[/]" if c.satisfied else "[red]not satisfied[/]"
            table.add_row(c.description, "required" if c.required else "optional", verdict,
                          c.reasoning)
        console.print(table)
    elif isinstance(analysis, AlignmentAnalysis):
        table = Table(title=f"{result.scorer}: dimensions ({result.mode} mode)")
        for column in ("dimension", "score", "reasoning"):
            table.add_column(column, overflow="fold")
        sides: list[tuple[str, AlignmentDimensions]] = [
            ("user" if result.mode != "system" else "system", analysis)]
        if analysis.system_compliance is not None:
            sides.append(("system", analysis.system_compliance))
        for side, dims in sides:
            table.add_row(f"{side} intent", f"{dims.intent_alignment.score:.2f}",
                          dims.intent_alignment.reasoning)
            table.add_row(f"{side} requirements",
                          f"{dims.requirements_fulfillment.overall_score:.2f}",
                          "; ".join(f"{'✓' if r.is_fulfilled else '✗'} {r.requirement}"
                                    for r in dims.requirements_fulfillment.requirements))
            table.add_row(f"{side} completeness", f"{dims.completeness.score:.2f}",
                          dims.completeness.reasoning)
            table.add_row(f"{side} appropriateness",
                          f"{dims.response_appropriateness.score:.2f}",
                          dims.response_appropriateness.reasoning)
        console.print(table)
    if result.score is not None:
        console.print(f"[bold]score[/] {result.score:g} / {result.scale:g}  "
                      f"[bold]label[/] {result.label}")
    console.print(result.reason, markup=False, highlight=False)
    if result.judge is not None:
        usage = result.judge
        cost = "n/a" if usage.cost_usd is None else f"${usage.cost_usd:.6f}"
        console.print(f"[dim]judge {usage.model}: {usage.calls} call(s), "
                      f"{usage.prompt_tokens}+{usage.completion_tokens} tokens, cost {cost}, "
                      f"{usage.latency_s:.2f}s[/]")


@main.command()
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
        raise click.ClickException("no run was scored: see the decisions above")
    if keep_serving and prometheus_port is not None:
        click.echo(f"Serving metrics on http://127.0.0.1:{prometheus_port}/metrics; Ctrl-C stops.")
        import time

        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


@main.command("check-config")
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
        raise click.ClickException(str(exc)) from exc
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


def _ends_torn(path: Path) -> bool:
    with path.open("rb") as stream:
        stream.seek(0, 2)
        if stream.tell() == 0:
            return False
        stream.seek(-1, 2)
        return stream.read(1) != b"\n"


def _processor_for(config_file: str | None, telemetry: Any, **overrides: Any) -> Any:
    """A processor configured as live scoring is (file, env), sending telemetry to
    ``telemetry`` (an :class:`otel_scorers.otlp.Telemetry`) or nowhere."""
    from opentelemetry.sdk.metrics import MeterProvider

    from otel_scorers.pipeline.processor import ScoringSpanProcessor

    try:
        if telemetry is None:
            return ScoringSpanProcessor(config=config_file, meter_provider=MeterProvider(),
                                        evaluation_spans=False, events=False, **overrides)
        return ScoringSpanProcessor(config=config_file,
                                    tracer_provider=telemetry.tracer_provider,
                                    meter_provider=telemetry.meter_provider,
                                    logger_provider=telemetry.logger_provider, **overrides)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc


@main.command()
@click.argument("files", nargs=-1, required=True,
                type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="JSON-lines results file; an existing one is resumed (default: stdout).")
@click.option("--config", "config_file", type=click.Path(dir_okay=False),
              help="YAML settings file, as for live scoring (default: $OTEL_SCORERS_CONFIG).")
@click.option("--concurrency", type=click.IntRange(1, 1024), default=None,
              help="Judge calls at a time (default: the configured concurrency).")
@click.option("--limit", type=click.IntRange(0), default=None,
              help="Judge at most this many runs.")
@click.option("--dry-run", is_flag=True,
              help="Print what would be judged and its estimated tokens and cost; no judge call.")
@click.option("--emit", is_flag=True,
              help="Also send evaluation spans, events and metrics over OTLP/HTTP.")
@click.option("--otlp-endpoint", envvar="OTEL_EXPORTER_OTLP_ENDPOINT",
              default="http://127.0.0.1:4318", show_default=True,
              help="Where --emit sends. [env OTEL_EXPORTER_OTLP_ENDPOINT]")
@click.option("--restart", is_flag=True, help="Overwrite --output instead of resuming it.")
@click.option("--progress/--no-progress", default=None,
              help="Show a progress bar (default: when stderr is a terminal).")
def rescore(files: tuple[str, ...], output: str | None, config_file: str | None,
            concurrency: int | None, limit: int | None, dry_run: bool, emit: bool,
            otlp_endpoint: str, restart: bool, progress: bool | None) -> None:
    """Score agent runs in exported OTLP trace files (JSON lines or protobuf, .gz too).

    Selection, capture and scorers are configured as for live scoring. Results are JSON lines,
    one per evaluated span and scorer, with its trace and span ids.
    """
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TaskProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from otel_scorers.otlp import OTLPDecodeError, Telemetry
    from otel_scorers.rescore import Rescorer, done_pairs, write_line

    console = Console(stderr=True)
    telemetry = Telemetry(otlp_endpoint, service_name="otel-scorers-rescore") if (
        emit and not dry_run) else None
    processor = _processor_for(config_file, telemetry)
    rescorer = Rescorer(processor, concurrency=concurrency or processor.settings.concurrency)
    out_path = Path(output) if output else None
    done = done_pairs(out_path) if out_path is not None and not restart else set()
    try:
        runs, spans, skipped = rescorer.plan(files, limit=limit, done=done)
    except (OTLPDecodeError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc
    console.print(f"{spans} spans read, {len(runs) + skipped} agent runs selected"
                  + (f", {skipped} already in {output}" if skipped else "")
                  + (f", judging {len(runs)}" if not dry_run else ""))
    if dry_run:
        estimate = rescorer.estimate(runs).to_dict()
        click.echo(json.dumps(estimate, indent=2))
        processor.shutdown()
        return
    stream = (out_path.open("w" if restart else "a", encoding="utf-8") if out_path is not None
              else sys.stdout)
    if out_path is not None and not restart and _ends_torn(out_path):
        stream.write("\n")  # an interrupted run's torn last line stays on its own
    show = progress if progress is not None else console.is_terminal
    bar = Progress(TextColumn("rescoring"), BarColumn(), MofNCompleteColumn(),
                   TaskProgressColumn(), TextColumn("{task.fields[rate]}"), TimeElapsedColumn(),
                   TimeRemainingColumn(), console=console, disable=not show)
    try:
        with bar:
            task = bar.add_task("rescore", total=len(runs), rate="")

            def advance(count: int) -> None:
                bar.advance(task, count)
                elapsed = bar.tasks[task].elapsed or 0.0
                if elapsed > 0:
                    bar.update(task, rate=f"{bar.tasks[task].completed / elapsed:.1f} runs/s")

            outcome = rescorer.run(runs, on_result=lambda r: write_line(stream, r),
                                   progress=advance)
    finally:
        if stream is not sys.stdout:
            stream.close()
        processor.shutdown()
        if telemetry is not None:
            telemetry.shutdown()
    console.print(f"results: {outcome['scored']} scored, {outcome['skipped']} skipped, "
                  f"{outcome['error']} errors, "
                  f"{outcome['not_captured']} runs without usable content"
                  + (f"; written to {output}" if output else "")
                  + (f"; telemetry sent to {otlp_endpoint}" if telemetry is not None else ""))
    if outcome["error"] and not outcome["scored"]:
        raise SystemExit(1)


@main.command()
@click.option("--upstream", envvar="OTEL_SCORERS_UPSTREAM", required=True,
              help="Base URL of the OTLP/HTTP receiver traces are forwarded to (a Collector: "
                   "http://collector:4318). [env OTEL_SCORERS_UPSTREAM]")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=int, default=4318, show_default=True,
              help="OTLP/HTTP port (/v1/traces, /health, /metrics).")
@click.option("--grpc-port", type=int, default=4317, show_default=True,
              help="OTLP/gRPC port (what the Collector's load-balancing exporter sends); "
                   "0 disables it.")
@click.option("--config", "config_file", type=click.Path(dir_okay=False),
              help="YAML settings file, as for live scoring (default: $OTEL_SCORERS_CONFIG).")
@click.option("--max-inflight", type=click.IntRange(1), default=64, show_default=True,
              help="Requests handled at once; more get 503 with Retry-After.")
@click.option("--max-body-mb", type=click.FloatRange(0.1), default=16.0, show_default=True,
              help="Largest request body accepted (after decompression).")
@click.option("--forward-timeout", type=float, default=10.0, show_default=True,
              help="Seconds to wait for the upstream per request.")
@click.option("--metric-interval", type=float, default=10.0, show_default=True,
              help="Seconds between OTLP metric exports upstream.")
@click.option("--upstream-header", "upstream_headers", multiple=True, metavar="KEY=VALUE",
              help="Header sent upstream with forwarded traces and evaluation telemetry "
                   "(repeatable; e.g. an API key). Default: OTEL_EXPORTER_OTLP_HEADERS.")
@click.option("--shutdown-timeout", type=click.FloatRange(0.1), default=10.0,
              show_default=True,
              help="On SIGTERM, seconds to let queued evaluations finish (forwarding stops at "
                   "once; within a typical 30 s termination grace period).")
def serve(upstream: str, host: str, port: int, grpc_port: int, config_file: str | None,
          max_inflight: int,
          max_body_mb: float, forward_timeout: float, metric_interval: float,
          upstream_headers: tuple[str, ...], shutdown_timeout: float) -> None:
    """Run the OTLP/HTTP scoring gateway: accept /v1/traces, forward upstream, score.

    Spans are forwarded unchanged before they are scored, so a slow judge never delays them.
    GET /health and GET /metrics (Prometheus) report on the gateway and its pipeline.
    """
    from aiohttp import web
    from opentelemetry.exporter.prometheus import PrometheusMetricReader

    from otel_scorers.gateway import Gateway
    from otel_scorers.otlp import Telemetry

    logging_setup()
    headers = _headers(upstream_headers)
    telemetry = Telemetry(upstream, service_name="otel-scorers-gateway",
                          metric_interval_s=metric_interval,
                          extra_readers=[PrometheusMetricReader()], headers=headers or None)
    processor = _processor_for(config_file, telemetry, shutdown_timeout_s=shutdown_timeout)
    gateway = Gateway(processor, upstream, meter_provider=telemetry.meter_provider,
                      max_body_bytes=int(max_body_mb * 1024 * 1024), max_inflight=max_inflight,
                      forward_timeout_s=forward_timeout,
                      grpc_address=f"{host}:{grpc_port}" if grpc_port else None,
                      upstream_headers=headers)
    app = gateway.app()

    async def flush_telemetry(_app: Any) -> None:
        import asyncio

        await asyncio.to_thread(telemetry.shutdown)

    app.on_cleanup.append(flush_telemetry)
    click.echo(f"otel-scorers gateway on http://{host}:{port}"
               + (f" and grpc://{host}:{grpc_port}" if grpc_port else "")
               + f" -> {gateway.upstream} "
               f"(scorers: {', '.join(s.name for s in processor.scorers)})", err=True)
    web.run_app(app, host=host, port=port, print=None, handle_signals=True)


def _headers(pairs: tuple[str, ...]) -> dict[str, str]:
    """``KEY=VALUE`` options, else ``OTEL_EXPORTER_OTLP_HEADERS`` (``k1=v1,k2=v2``)."""
    import os
    from urllib.parse import unquote

    if not pairs:
        raw = os.environ.get("OTEL_EXPORTER_OTLP_HEADERS", "")
        pairs = tuple(p for p in raw.split(",") if p.strip())
    headers: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise click.ClickException(f"header {pair!r} is not KEY=VALUE")
        headers[key.strip().lower()] = unquote(value.strip())
    return headers


def logging_setup() -> None:
    import logging

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
