"""``otel-scorers calibrate``: how far to trust a judge model, measured on labelled cases.

The cases are the bundled golden set (``--cases bundled``, the default), files of labelled cases,
or ``rescore --include-run`` output with a ``corrected`` column. The report (stdout: tables;
``--json FILE``: the whole of it) gives verdict agreement and Cohen's kappa over the rubric
verdicts, the alignment score's mean absolute error and band hit rate, judge errors, calls,
tokens, cost and latency, per domain, and the worst cases with the judge's reasons.
``--fail-under`` checks the verdict agreement (exit 1 below it, or when any case could not be
judged). ``--examples FILE`` shows the judge a user's corrected cases (few-shot); with
``--compare`` the cases are judged without and with them, the examples themselves held apart.
``--fused`` measures fused judge calls (``fuse_judge_calls``) for this judge: each case is judged
beside a companion scorer on the same run, in a call each and in one call, and the labelled
half's figures are compared (:mod:`otel_scorers.calibration.paired`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from otel_scorers.cli.errors import EXIT_FAILED, Failed, UsageProblem
from otel_scorers.cli.options import Finite, ScorerTypes, judge_of, judge_options
from otel_scorers.errors import ConfigError
from otel_scorers.judge.client import JudgeClient

__all__ = ["calibrate"]


@click.command()
@judge_options
@click.option("--cases", "case_files", multiple=True,
              metavar="FILE|bundled|agents|phoenix|mlflow",
              help="Labelled cases (JSON lines), or corrected `rescore --include-run` output; "
                   "'bundled' is the golden set shipped with the package (the default), "
                   "'agents' the golden set of the tool-use and faithfulness scorers, "
                   "'phoenix' the human annotations of OTEL_SCORERS_PHOENIX_PROJECT in "
                   "OTEL_SCORERS_PHOENIX_ENDPOINT, 'mlflow' the human feedback of "
                   "OTEL_SCORERS_MLFLOW_EXPERIMENT. Repeatable.")
@click.option("--scorer", "scorer_name", type=ScorerTypes(judging=True),
              help="Only the cases of one scorer.")
@click.option("--domain", "domains", multiple=True, help="Only cases of this domain (repeatable).")
@click.option("--limit", type=click.IntRange(1), help="At most this many cases (in file order).")
@click.option("--concurrency", type=click.IntRange(1, 256), default=8, show_default=True,
              help="Judge calls at a time.")
@click.option("--examples", "examples_file", type=click.Path(exists=True, dir_okay=False),
              help="Corrected cases shown to the judge as few-shot examples (JSON lines).")
@click.option("--examples-max-tokens", type=click.IntRange(1), default=1500, show_default=True,
              help="Token budget of the examples in the judge prompt.")
@click.option("--compare", is_flag=True,
              help="With --examples: judge without and with them and report both (the "
                   "examples are never scored as test cases).")
@click.option("--fused", is_flag=True,
              help="Judge each case beside a companion scorer of the other kind, apart and in "
                   "one fused call, and report both: whether fuse_judge_calls loses agreement "
                   "with this judge.")
@click.option("--json", "json_file", type=click.Path(dir_okay=False, allow_dash=True),
              help="Write the whole report as JSON to FILE ('-': stdout, instead of tables).")
@click.option("--save", "save_file", type=click.Path(dir_okay=False),
              help="Write each scorer's true positive and negative rates to FILE, for the "
                   "live pipeline (judge_rates / OTEL_SCORERS_JUDGE_RATES).")
@click.option("--fail-under", type=Finite(0, 1),
              help="Exit 1 when the verdict agreement is below this, or a case failed.")
@click.option("--emit", is_flag=True,
              help="Also send the figures as OTel metrics (otel_scorers.calibration.*) over "
                   "OTLP/HTTP, to track judge agreement over time.")
@click.option("--otlp-endpoint", envvar="OTEL_EXPORTER_OTLP_ENDPOINT",
              default="http://127.0.0.1:4318", show_default=True,
              help="Where --emit sends. [env OTEL_EXPORTER_OTLP_ENDPOINT]")
@click.option("--progress/--no-progress", default=None,
              help="A progress bar (default: when stderr is a terminal).")
def calibrate(model: str | None, api_base: str | None, api_key: str | None,
              timeout: float | None,
              redact: bool | None, case_files: tuple[str, ...], scorer_name: str | None,
              domains: tuple[str, ...], limit: int | None, concurrency: int,
              examples_file: str | None, examples_max_tokens: int, compare: bool,
              fused: bool, json_file: str | None, save_file: str | None,
              fail_under: float | None, emit: bool,
              otlp_endpoint: str, progress: bool | None) -> None:
    """Measure how well a judge model agrees with labelled cases."""
    from rich.console import Console

    from otel_scorers.calibration import runner
    from otel_scorers.scorers.examples import FewShot

    if compare and examples_file is None:
        raise UsageProblem("--compare needs --examples FILE")
    if fused and save_file is not None:
        raise UsageProblem("--save takes the rates of one way of judging: run it without "
                           "--fused (with fuse_judge_calls on, measure with it on first)")
    if fused and examples_file is not None:
        raise UsageProblem("--fused does not take --examples: a judge call with few-shot "
                           "examples is never fused")
    cases, notes = _cases(case_files, scorer_name, domains, limit)
    try:
        judge = judge_of(model, api_base, api_key, timeout, redact)
        examples: dict[str, FewShot] = {}
        if examples_file is not None:
            examples = _examples(examples_file, examples_max_tokens, judge)
    except ConfigError as exc:
        raise UsageProblem(str(exc)) from exc
    console = Console(stderr=True)
    for note in notes:
        click.echo(note, err=True)
    test = runner.held_apart(cases, examples) if examples else cases
    if not test:
        raise UsageProblem("no cases left to judge (every case is an example)")
    total = len(test) * (2 if compare or fused else 1)
    with _bar(console, progress, total) as advance:
        if fused:
            from otel_scorers.calibration.paired import compare_fused

            report = compare_fused(test, judge, concurrency=concurrency, advance=advance)
        elif compare:
            report = runner.compare(cases, judge, examples, concurrency=concurrency,
                                    advance=advance)
        else:
            report = runner.calibrate(test, judge, concurrency=concurrency,
                                      examples=examples or None, advance=advance)
    report["held_apart"] = len(cases) - len(test)
    if json_file == "-":
        click.echo(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        if json_file is not None:
            Path(json_file).write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n",
                                       encoding="utf-8")
        from otel_scorers.cli.calibrate_report import print_report

        print_report(report, Console())
    if save_file is not None:
        _save(report, save_file)
    if emit:
        from otel_scorers.calibration.telemetry import emit_report

        unsent = emit_report(report, otlp_endpoint)
        if unsent is not None:
            raise Failed(f"figures not sent: {unsent}")
        click.echo(f"figures sent to {otlp_endpoint}", err=True)
    _check(report, fail_under)


def _save(report: dict[str, Any], path: str) -> None:
    """``--save``: the true rates written, and which scorers had none to write."""
    from otel_scorers.calibration.rates import save_rates

    saved = save_rates(report, path)
    click.echo(f"true rates of {', '.join(saved['scorers']) or 'no scorer'} saved to {path}"
               + "".join(f"; {kind}: {why}" for kind, why in saved["not_measured"].items()),
               err=True)


def _cases(case_files: tuple[str, ...], scorer_name: str | None, domains: tuple[str, ...],
           limit: int | None) -> tuple[list[Any], list[str]]:
    from otel_scorers.calibration import agent_cases, bundled_cases
    from otel_scorers.calibration.corrections import read_case_file

    cases: list[Any] = []
    notes: list[str] = []
    try:
        for spec in case_files or ("bundled",):
            if spec in ("bundled", "agents"):
                cases.extend(bundled_cases() if spec == "bundled" else agent_cases())
                continue
            if spec in _label_readers():
                found_here, left_out = _reviewed_cases(spec)
                cases.extend(found_here)
                notes.extend(left_out)
                continue
            found, uncorrected = read_case_file(spec)
            if uncorrected:
                notes.append(f"{spec}: {uncorrected} rescore line(s) without 'corrected' left "
                             "out")
            cases.extend(found)
    except ConfigError as exc:
        raise UsageProblem(str(exc)) from exc
    ids = [case.id for case in cases]
    duplicates = sorted({ident for ident in ids if ids.count(ident) > 1})
    if duplicates:
        raise UsageProblem(f"case ids appear twice across the case files: {duplicates[:5]}")
    if scorer_name is not None:
        wanted = scorer_name.replace("-", "_")
        cases = [case for case in cases if case.scorer == wanted]
    if domains:
        cases = [case for case in cases if case.domain in domains]
    if limit is not None:
        cases = cases[:limit]
    if not cases:
        raise UsageProblem("no cases to judge (check --cases, --scorer and --domain)")
    return cases, notes


#: The most spans (Phoenix) or traces (MLflow) one reading of reviewers' labels goes through.
MAX_REVIEWED = 20_000


def _label_readers() -> set[str]:
    """The backends that read reviewers' labels back (``--cases NAME``)."""
    from otel_scorers import registry

    return {row.name for row in registry.backends() if row.labels is not None}


def _reviewed_cases(name: str) -> tuple[list[Any], list[str]]:
    """Cases from the reviewers' labels in a configured backend (its registry row reads
    them; docs/sinks.md)."""
    from otel_scorers.backends.labels import reviewed_cases
    from otel_scorers.config import load_settings

    return reviewed_cases(name, load_settings().settings.backend(name), MAX_REVIEWED)


def _examples(path: str, max_tokens: int, judge: JudgeClient) -> dict[str, Any]:
    from otel_scorers.calibration.corrections import read_case_file
    from otel_scorers.scorers.examples import FewShot

    found, _ = read_case_file(path)
    by_kind: dict[str, Any] = {}
    for kind in ("rubric", "prompt_alignment"):
        mine = [case for case in found if case.scorer == kind]
        if mine:
            by_kind[kind] = FewShot(mine, kind=kind, max_tokens=max_tokens,
                                    redactor=judge.redactor)
    if not by_kind:
        raise ConfigError(f"{path} holds no examples")
    return by_kind


class _bar:
    """A progress bar on stderr whose ``advance`` the runner calls once per judged case."""

    def __init__(self, console: Any, progress: bool | None, total: int) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        show = progress if progress is not None else console.is_terminal
        self.progress = Progress(TextColumn("calibrating"), BarColumn(), MofNCompleteColumn(),
                                 console=console, disable=not show)
        self.total = total

    def __enter__(self) -> Any:
        self.progress.__enter__()
        task = self.progress.add_task("calibrate", total=self.total)
        return lambda: self.progress.advance(task)

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(None, None, None)


def _check(report: dict[str, Any], fail_under: float | None) -> None:
    if report["errors"]:
        click.echo(f"Error: {report['errors']} of {report['cases']} cases were not judged "
                   f"({', '.join(f'{k}: {v}' for k, v in report['error_types'].items())})",
                   err=True)
        if fail_under is not None or report["errors"] == report["cases"]:
            sys.exit(EXIT_FAILED)
    if fail_under is not None:
        agreement = report["verdict_agreement"]
        if agreement is None or agreement < fail_under:
            shown = "none (no rubric verdicts)" if agreement is None else f"{agreement:.3f}"
            click.echo(f"Error: verdict agreement {shown} is below --fail-under "
                       f"{fail_under:g}", err=True)
            sys.exit(EXIT_FAILED)
