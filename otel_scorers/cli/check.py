"""``otel-scorers check-config``: the resolved settings, where each came from, and (``--ping``)
one judge call."""

from __future__ import annotations

import json
from typing import Any

import click

from otel_scorers.cli.errors import Failed, UsageProblem
from otel_scorers.errors import ConfigError

__all__ = ["check_config"]


@click.command("check-config")
@click.option("--config", "config_file", type=click.Path(dir_okay=False),
              help="YAML settings file (default: $OTEL_SCORERS_CONFIG).")
@click.option("--json", "as_json", is_flag=True, help="Print the resolved settings as JSON.")
@click.option("--ping", is_flag=True,
              help="Also make one tiny judge call: the model used, reachability, latency and "
                   "how structured output is asked for. Exit 1 when it fails.")
def check_config(config_file: str | None, as_json: bool, ping: bool) -> None:
    """Validate the configuration and print every resolved setting with its source."""
    from rich.console import Console
    from rich.table import Table

    from otel_scorers.config import load_settings

    try:
        resolved = load_settings(config=config_file)
    except ConfigError as exc:
        raise UsageProblem(str(exc)) from exc
    # printed, never a secret: keys are SecretStr (dumped as ****), URLs' credentials masked
    data = _shown(resolved.settings.model_dump(mode="json"))
    # the judge's answer is printed last, under the tables (over 100 rows): it is what a user
    # checking a set-up looks for, and the line left above the prompt
    answer, failure = _ping(resolved.settings, data if as_json else None) if ping else ("", None)
    if as_json and not ping:
        click.echo(json.dumps(data, indent=2))
    elif not as_json:
        table = Table(title="otel-scorers settings")
        for column in ("setting", "value", "source"):
            table.add_column(column, overflow="fold")
        for path, value in _flatten(data).items():
            shown = "****" if path.endswith("api_key") and value else json.dumps(value)
            table.add_row(path, shown, resolved.sources.get(path, "default"))
        Console().print(table)
        _print_evaluators(resolved.settings, Console())
        if answer:
            click.echo(answer)
    if failure is not None:
        raise failure


def _print_evaluators(settings: Any, console: Any) -> None:
    """Each configured scorer as its results will name their evaluator: type, judge model and
    the fingerprint of its instructions, rubric and judge settings (a change to any of them
    changes it: the dashboards' series split there)."""
    from rich.table import Table

    from otel_scorers.pipeline.build import rubrics_from, scorers_from
    from otel_scorers.scorers.provenance import evaluator_of
    from otel_scorers.scorers.run import ScorerRun

    try:
        specs = scorers_from(settings)
        rubrics = rubrics_from(settings, None)
    except ConfigError as exc:
        raise UsageProblem(str(exc)) from exc
    table = Table(title="evaluators (as each result names it)")
    for column in ("scorer", "type", "judge model", "fingerprint", "score range"):
        table.add_column(column, overflow="fold")
    for spec in specs:
        scorer = spec.scorer
        # a rubric scorer without criteria of its own judges each agent by its rubric: its
        # results carry the fingerprint of the rubric they were judged by
        per_agent = rubrics if getattr(scorer, "criteria", None) == () else {}
        runs: dict[str, ScorerRun | None] = {
            f" (agent {agent})": ScorerRun(request_context={"rubric": rubric})
            for agent, rubric in per_agent.items()} or {"": None}
        for suffix, run in runs.items():
            evaluator = evaluator_of(scorer, run)
            table.add_row(evaluator.id + suffix, evaluator.type, evaluator.judge_model or "-",
                          evaluator.fingerprint,
                          f"{evaluator.score_min:g}..{evaluator.score_max:g}")
    console.print(table)


def _ping(settings: Any, as_json: dict[str, Any] | None) -> tuple[str, Failed | None]:
    """One tiny call to the configured judge, in its structured-output mode: the line saying
    what it answered (printed by the caller after the tables), and the failure to raise
    (exit 1) once the rest is printed, when it failed. With ``as_json`` (the settings), prints
    ``{"settings": ..., "ping": ...}`` and returns no line."""
    from otel_scorers import background_loop
    from otel_scorers.gateway.security import safe_url
    from otel_scorers.judge.ping import ping
    from otel_scorers.pipeline.build import judge_from

    try:
        client = judge_from(settings.judge)
    except ConfigError as exc:
        raise UsageProblem(str(exc)) from exc
    result = background_loop.run_sync(ping(client))
    report = {"model": result.model,
              "api_base": safe_url(result.api_base) if result.api_base else None,
              "reachable": result.reachable, "latency_s": round(result.latency_s, 3),
              "structured_output": result.structured_output, "ok": result.ok,
              "answer": result.answer, "error_type": result.error_type,
              "error": result.error}
    line = ""
    if as_json is not None:
        click.echo(json.dumps({"settings": as_json, "ping": report}, indent=2))
    else:
        schema = ("a JSON schema the provider enforces" if result.structured_output == "json_schema"
                  else f"JSON mode ({result.structured_output}), the schema in the prompt")
        where = f"judge {result.model}" + (f" at {report['api_base']}" if result.api_base
                                           else "")
        if result.ok:
            state = "OK, it answered"
        elif result.reachable:
            state = f"reached, but the call FAILED ({result.error_type})"
        elif result.error_type == "auth":  # the key is missing: the call was never sent
            state = "NOT called: its API key is missing (auth)"
        else:
            state = f"NOT reached ({result.error_type})"
        answered = f"; it answered {result.answer}" if result.answer else ""
        line = (f"{where}: {state} in {result.latency_s:.2f}s{answered}; structured "
                f"output: {schema}")
    if not result.ok:
        return line, Failed(f"the judge did not answer ({result.error_type}): {result.error}")
    return line, None


def _shown(value: Any) -> Any:
    """Settings as they may be printed: every URL's credentials and query values masked."""
    from otel_scorers.http import shown_url

    if isinstance(value, str) and "://" in value:
        return shown_url(value)
    if isinstance(value, list):
        return [_shown(item) for item in value]
    if isinstance(value, dict):
        return {key: _shown(item) for key, item in value.items()}
    return value


def _flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict) and value and key not in ("rubrics", "attributes"):
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out
