"""``otel-scorers score``: judge one run given on the command line, or a dataset of runs."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource
from pydantic import ValidationError

from otel_scorers import registry
from otel_scorers.cli.errors import EXIT_FAILED, UsageProblem
from otel_scorers.cli.options import Finite, ScorerTypes, judge_of, judge_options
from otel_scorers.errors import ConfigError
from otel_scorers.judge.client import JudgeClient
from otel_scorers.scorers.analysis import rendering
from otel_scorers.scorers.base import BaseScorer
from otel_scorers.scorers.result import ScoreResult
from otel_scorers.scorers.run import Message, ScorerRun

__all__ = ["score"]


def _read_text(value: str) -> str:
    """``@path`` reads a file; anything else is the text itself."""
    if value.startswith("@"):
        try:
            return Path(value[1:]).read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageProblem(f"cannot read {value[1:]}: {exc.strerror}") from exc
    return value


def _build_run(run_file: str | None, input_text: str | None, system: tuple[str, ...],
               output: str | None) -> ScorerRun:
    if run_file is not None:
        try:
            data = json.loads(Path(run_file).read_text(encoding="utf-8"))
            base = ScorerRun.coerce(data)
        except (OSError, ValueError, TypeError) as exc:
            raise UsageProblem(f"cannot read the run from {run_file}: {exc}") from exc
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
        raise UsageProblem("nothing to score: give --output TEXT or --run FILE.json")
    return run


class _ScoreCommand(click.Command):
    """``score`` with the options the scorer types' registry rows declare (one ``--name``
    each, shared by the types that declare it), read from the rows when the command runs."""

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        params = super().get_params(ctx)
        taken = {name for param in params for name in param.opts}
        for row in registry.scorer_types():
            for flag in row.flags:
                if f"--{flag.name}" in taken:
                    continue
                taken.add(f"--{flag.name}")
                params.insert(len(params) - 1, click.Option(  # before --help
                    [f"--{flag.name}", flag.name], multiple=flag.multiple,
                    metavar=flag.metavar,
                    type=click.Choice(flag.choices) if flag.choices else None,
                    default=flag.default if not flag.multiple else (), help=flag.help,
                    show_default=flag.default is not None))
        return params


@click.command(cls=_ScoreCommand)
@click.option("--scorer", "scorer_name", type=ScorerTypes(), default="rubric",
              show_default=True,
              help="Which scorer judges the run (multi_turn: a whole conversation, from a run "
                   "with 'turns', or its messages).")
@click.option("--scale", type=Finite(0, 1e6, min_open=True), default=1.0, show_default=True,
              help="Maximum score.")
@click.option("--input", "input_text", metavar="TEXT", help="The user prompt (or @file).")
@click.option("--system", multiple=True, metavar="TEXT",
              help="A system message (repeatable, or @file).")
@click.option("--output", metavar="TEXT", help="The agent's response (or @file).")
@click.option("--run", "run_file", type=click.Path(exists=True, dir_okay=False),
              help="The run as JSON (the seed's shapes); --input/--system/--output override.")
@judge_options
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (to_dict()).")
@click.option("--fail-under", type=Finite(), default=None,
              help="Exit 1 when the score (with --dataset: the mean) is below this value, or "
                   "nothing was judged.")
@click.option("--dataset", type=click.Path(exists=True, dir_okay=False),
              help="Score every record of a JSON-lines file of {input, output, system?, "
                   "rubric?} (or a conversation: {turns: [{user, assistant}]}): JSON lines "
                   "out, a summary table on stderr.")
@click.option("--results", type=click.Path(dir_okay=False),
              help="With --dataset: write the JSON lines to this file (default: stdout).")
@click.option("--concurrency", type=click.IntRange(1, 256), default=8, show_default=True,
              help="With --dataset: judge calls at a time.")
@click.option("--progress/--no-progress", default=None,
              help="With --dataset: a progress bar (default: when stderr is a terminal).")
def score(scorer_name: str, scale: float, input_text: str | None,
          system: tuple[str, ...], output: str | None,
          run_file: str | None, model: str | None, api_base: str | None, api_key: str | None,
          timeout: float | None, redact: bool | None, as_json: bool, fail_under: float | None,
          dataset: str | None, results: str | None, concurrency: int,
          progress: bool | None, **type_flags: Any) -> None:
    """Score one run (a prompt, optional system messages and the agent's output; with --run,
    also what the agent did: its steps and tools), or with --dataset every run of a file."""
    if dataset is not None and (input_text or output or run_file or system):
        raise UsageProblem("--dataset takes the runs from the file: no --input, --output, "
                           "--system or --run with it")
    run = _build_run(run_file, input_text, system, output) if dataset is None else None
    try:
        scorer = _scorer(registry.scorer_type(scorer_name), type_flags, scale,
                         lambda: judge_of(model, api_base, api_key, timeout, redact))
    except ConfigError as exc:
        raise UsageProblem(str(exc)) from exc
    if dataset is not None:
        _score_dataset(scorer, Path(dataset), results, concurrency, progress, fail_under)
        return
    assert run is not None
    result = scorer.run(run).reported()
    if as_json:  # the result, error or not, is the output
        click.echo(json.dumps(result.to_dict(), indent=2, ensure_ascii=False, allow_nan=False))
    elif result.error is None:
        _print_result(result)
    if result.error is not None:
        if not as_json:  # said once, on stderr
            click.echo(f"Error: not scored ({result.error.type}): {result.error.message}",
                       err=True)
        sys.exit(EXIT_FAILED)
    if fail_under is not None:
        if result.score is None:  # skipped: nothing was judged, so nothing passed
            click.echo(f"Error: not scored ({result.skipped}): --fail-under needs a judged "
                       "run", err=True)
            sys.exit(EXIT_FAILED)
        if result.score < fail_under:
            sys.exit(EXIT_FAILED)


def _score_dataset(scorer: BaseScorer, path: Path, results: str | None, concurrency: int,
                   progress: bool | None, fail_under: float | None) -> None:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from otel_scorers.cli.dataset import (
        OutputClosed,
        read_dataset,
        score_dataset,
        summary_table,
    )

    runs = read_dataset(path)
    console = Console(stderr=True)
    show = progress if progress is not None else console.is_terminal
    bar = Progress(TextColumn("scoring"), BarColumn(), MofNCompleteColumn(), console=console,
                   disable=not show)
    out = open(results, "w", encoding="utf-8") if results else sys.stdout  # noqa: SIM115
    try:
        with bar:
            task = bar.add_task("score", total=len(runs))
            summary = score_dataset(scorer, runs, out, concurrency=concurrency,
                                    advance=lambda: bar.advance(task))
    except OutputClosed as closed:  # `... | head`: one line, no traceback, no more calls
        if out is sys.stdout:  # nothing more may go to the closed pipe, not even at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        click.echo(f"Stopped: {closed}", err=True)
        sys.exit(EXIT_FAILED)
    finally:
        if out is not sys.stdout:
            out.close()
    console.print(summary_table(summary, scorer.name))
    if summary.errors:
        click.echo(f"Error: {summary.errors} of {summary.records} records were not scored "
                   "(judge errors; see their lines)", err=True)
        sys.exit(EXIT_FAILED)
    if fail_under is not None and (summary.mean is None or summary.mean < fail_under):
        shown = "nothing judged" if summary.mean is None else f"{summary.mean:.3f}"
        click.echo(f"Error: mean score {shown} is below --fail-under {fail_under:g}", err=True)
        sys.exit(EXIT_FAILED)


def _print_result(result: ScoreResult) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console()
    shown = rendering(result.analysis).table(result)
    if shown is not None:
        table = Table(title=shown.title, show_lines=False)
        for column in shown.columns:
            table.add_column(column, overflow="fold")
        for row in shown.rows:
            table.add_row(*(_verdict(cell) if index == shown.verdict_column else escape(cell)
                            for index, cell in enumerate(row)))
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


def _verdict(cell: str) -> str:
    from rich.markup import escape

    return "[green]satisfied[/]" if cell == "satisfied" else f"[red]{escape(cell)}[/]"


def _scorer(row: registry.ScorerType, flags: dict[str, Any], scale: float,
            judge: Callable[[], JudgeClient]) -> BaseScorer:
    """The scorer the options describe, built by its type's row (a type that does not judge
    gets no judge: none is built)."""
    context = click.get_current_context()
    given = {name: value for name, value in flags.items()
             if context.get_parameter_source(name) != ParameterSource.DEFAULT}
    takes = {flag.name: flag for flag in row.flags}
    wrong = [f"--{name}" for name in given if name not in takes]
    if wrong:
        raise UsageProblem(f"{', '.join(wrong)}: not an option of the {row.name} scorer")
    values = {name: tuple(_read_text(v) for v in value) if takes[name].text and
              isinstance(value, tuple) else value for name, value in given.items()}
    for name, value in given.items():  # an empty rubric or context file is a mistake
        if takes[name].text and isinstance(value, tuple):
            for raw, text in zip(value, values[name], strict=True):
                if not text.strip():
                    raise UsageProblem(f"--{name} {raw}: it is empty (nothing would be "
                                       "judged)")
    try:
        options = row.options.model_validate(row.options_from_flags(values))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise UsageProblem(f"the {row.name} scorer: {where + ': ' if where else ''}"
                           f"{first['msg']}") from None
    made: BaseScorer = row.build(row.name, scale, options, judge() if row.judges else None)
    return made
