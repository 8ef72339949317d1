"""``otel-scorers rescore``: judge the agent runs of exported OTLP files."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from otel_scorers.cli.errors import Failed, UsageProblem
from otel_scorers.errors import ConfigError

__all__ = ["processor_for", "rescore"]


def processor_for(config_file: str | None, telemetry: Any, **overrides: Any) -> Any:
    """A processor configured as live scoring is (file, env), sending telemetry to
    ``telemetry`` (an :class:`otel_scorers.otlp.Telemetry`) or nowhere."""
    from opentelemetry.sdk.metrics import MeterProvider

    from otel_scorers.config import load_settings
    from otel_scorers.pipeline.processor import ScoringSpanProcessor

    try:
        load_settings(config=config_file)  # a bad environment is exit 2 here, not "disabled"
        if telemetry is None:
            return ScoringSpanProcessor(config=config_file, meter_provider=MeterProvider(),
                                        evaluation_spans=False, events=False, **overrides)
        return ScoringSpanProcessor(config=config_file,
                                    tracer_provider=telemetry.tracer_provider,
                                    meter_provider=telemetry.meter_provider,
                                    logger_provider=telemetry.logger_provider, **overrides)
    except ConfigError as exc:
        raise UsageProblem(str(exc)) from exc


@click.command()
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
@click.option("--include-run", is_flag=True,
              help="Write each judged run (input, system, context, output) on its line: the "
                   "conversation itself, so off by default. Add a 'corrected' column and pass "
                   "the file to `otel-scorers calibrate --cases`.")
@click.option("--progress/--no-progress", default=None,
              help="Show a progress bar (default: when stderr is a terminal).")
@click.option("--lane", type=click.Choice(["live", "batch"]), default="live", show_default=True,
              help="batch: send every judge request as one batch through the provider's batch "
                   "API (about half the price; an openai/<model> judge) and wait for it; the "
                   "batch is picked up again by the same command when stopped.")
@click.option("--batch-timeout", type=click.FloatRange(min=1), default=90_000.0,
              show_default=True, help="Seconds to wait for the batch before stopping (exit 1; "
                                      "run the command again to pick the batch up).")
def rescore(files: tuple[str, ...], output: str | None, config_file: str | None,
            concurrency: int | None, limit: int | None, dry_run: bool, emit: bool,
            otlp_endpoint: str, restart: bool, include_run: bool, progress: bool | None,
            lane: str, batch_timeout: float) -> None:
    """Score agent runs in exported OTLP trace files (JSON lines or protobuf, .gz too).

    Selection, capture and scorers are configured as for live scoring. Results are JSON lines,
    one per evaluated span and scorer, with its trace and span ids.
    """
    from rich.console import Console

    from otel_scorers.errors import ConfigError
    from otel_scorers.otlp import OTLPDecodeError, Telemetry
    from otel_scorers.rescore import OutputError, done_pairs
    from otel_scorers.rescore.batch import BatchTimeout

    if output is not None and Path(output).exists() and any(
            os.path.samefile(output, name) for name in files):
        raise UsageProblem(f"--output {output} is one of the input files: it would be "
                           "overwritten (or read as results); name another file")
    console = Console(stderr=True)
    telemetry = Telemetry(otlp_endpoint, service_name="otel-scorers-rescore") if (
        emit and not dry_run) else None
    processor = processor_for(config_file, telemetry)
    out_path = Path(output) if output else None
    rescorer = _rescorer(processor, out_path, concurrency=concurrency, include_run=include_run,
                         lane=lane, batch_timeout_s=batch_timeout)
    done = done_pairs(out_path) if out_path is not None and not restart else set()
    try:
        plan = rescorer.plan(files, limit=limit, done=done)  # unreadable input: found here
        console.print(f"{plan.spans} spans read, {plan.runs} agent runs selected"
                      + (f", {plan.done} already in {output}" if plan.done else "")
                      + (f", judging {plan.to_judge}" if not dry_run else ""))
        if dry_run:
            estimated = rescorer.estimate(files, limit=limit, done=done)
            click.echo(json.dumps(estimated.to_dict(), indent=2))
            if estimated.hint:
                console.print(f"note: {estimated.hint}", markup=False, highlight=False)
            return
        outcome, sessions = _judge(rescorer, files, plan.to_judge, out_path, restart, limit,
                                   done, console, progress)
    except (BatchTimeout, ConfigError) as exc:  # the batch's id is kept beside the output;
        # a judge without a batch API: one line each
        raise (Failed if isinstance(exc, BatchTimeout) else UsageProblem)(str(exc)) from None
    except OutputError as exc:  # `rescore ... | head -1`, a full disk: one line, exit 1
        if output is None:
            _quiet_stdout()
        raise Failed(f"stopped: {exc.strerror}; no further judge calls were made") from None
    except (OTLPDecodeError, OSError) as exc:
        raise UsageProblem(str(exc)) from None
    finally:
        if "sinks" in processor.health():  # results on their way to Phoenix: let them land
            wait = int((processor.settings.sinks.retry_s + 5) * 1000)
            processor.force_flush(wait)
            processor.wait_for_results(wait)
        processor.shutdown()
        if telemetry is not None:
            telemetry.shutdown()
    unsent = telemetry.outcome() if telemetry is not None else None
    sinks = processor.health().get("sinks", {})
    console.print(f"results: {outcome['scored']} scored, {outcome['skipped']} skipped, "
                  f"{outcome['error']} errors, "
                  f"{outcome['not_captured']} runs without usable content"
                  + (f" ({sessions} sessions judged whole)" if sessions else "")
                  + (f"; written to {output}" if output else "")
                  + "".join(f"; {row.get('written', 0)} written to {name}"
                            for name, row in sinks.items())
                  + (f"; telemetry sent to {otlp_endpoint}"
                     if telemetry is not None and unsent is None else ""))
    if unsent is not None:
        raise Failed(f"telemetry not sent: {unsent}")
    _sinks_kept_all(sinks)
    if outcome["error"] and not outcome["scored"]:
        raise SystemExit(1)


def _sinks_kept_all(sinks: dict[str, Any]) -> None:
    """Exit 1 naming a result backend that dropped results, and why."""
    for name, row in sinks.items():
        if row.get("dropped"):
            reasons = ", ".join(f"{key.split(':', 1)[1]}: {count}" for key, count in row.items()
                                if key.startswith("dropped:"))
            raise Failed(f"{row['dropped']} result(s) not written to {name} ({reasons})")


def _rescorer(processor: Any, out_path: Path | None, *, concurrency: int | None,
              **options: Any) -> Any:
    """The rescorer (``--lane batch`` keeps its batch's id beside the output); a
    configuration it cannot judge is one line, exit 2."""
    from otel_scorers.errors import ConfigError
    from otel_scorers.rescore import Rescorer

    try:
        return Rescorer(processor, concurrency=concurrency or processor.settings.concurrency,
                        batch_state=out_path.with_name(out_path.name + ".batch.json")
                        if out_path else None, **options)
    except ConfigError as exc:
        processor.shutdown()
        raise UsageProblem(str(exc)) from None


def _judge(rescorer: Any, files: tuple[str, ...], total: int, out_path: Path | None,
           restart: bool, limit: int | None, done: set[tuple[str, str, str]], console: Any,
           progress: bool | None) -> tuple[dict[str, int], int]:
    """Judge the runs, writing each result line as it comes, with a progress bar; the
    outcome counts and the sessions judged."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TaskProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from otel_scorers.rescore import ends_torn, write_line

    stream = (out_path.open("w" if restart else "a", encoding="utf-8") if out_path is not None
              else sys.stdout)
    if out_path is not None and not restart and ends_torn(out_path):
        stream.write("\n")  # an interrupted run's torn last line stays on its own
    show = progress if progress is not None else console.is_terminal
    bar = Progress(TextColumn("rescoring"), BarColumn(), MofNCompleteColumn(),
                   TaskProgressColumn(), TextColumn("{task.fields[rate]}"), TimeElapsedColumn(),
                   TimeRemainingColumn(), console=console, disable=not show)
    try:
        with bar:
            task = bar.add_task("rescore", total=total, rate="")

            def advance(count: int) -> None:
                bar.advance(task, count)
                elapsed = bar.tasks[task].elapsed or 0.0
                if elapsed > 0:
                    bar.update(task, rate=f"{bar.tasks[task].completed / elapsed:.1f} runs/s")

            plan = rescorer.run(files, on_result=lambda r: write_line(stream, r), limit=limit,
                                done=done, progress=advance)
    finally:
        if stream is not sys.stdout:
            stream.close()
    return dict(plan.outcome), plan.sessions


def _quiet_stdout() -> None:
    """stdout's reader is gone: point it at /dev/null, so that nothing (Python's own flush at
    exit included) fails on it again."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
