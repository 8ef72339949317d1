"""Options shared by the commands that call a judge directly (``score``, ``calibrate``), and the
judge they give: resolved like every entry point's (argument, environment, file, default)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from otel_scorers.cli.errors import UsageProblem
from otel_scorers.errors import ConfigError
from otel_scorers.judge.client import ENV_API_BASE, ENV_API_KEY, ENV_MODEL, JudgeClient

__all__ = ["Finite", "ScorerTypes", "judge_of", "judge_options"]

F = TypeVar("F", bound=Callable[..., Any])


class Finite(click.FloatRange):
    """A float in a range that is a real number: ``inf`` and ``nan`` pass ``click.FloatRange``
    (``nan`` compares false with every bound), never this."""

    name = "float"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        import math

        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number


if TYPE_CHECKING:  # generic from click 8.2 on; the project supports earlier ones too
    _ParamType = click.ParamType[str, Any]
else:
    _ParamType = click.ParamType


class ScorerTypes(_ParamType):
    """A scorer type's name (either spelling), checked against the registry rows when the
    command runs, so a type registered after the CLI was built is accepted too;
    ``judging``: only the types that judge."""

    name = "type"

    def __init__(self, *, judging: bool = False) -> None:
        self.judging = judging

    def names(self) -> list[str]:
        from otel_scorers import registry

        return [row.name for row in registry.scorer_types() if row.judges or not self.judging]

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        from otel_scorers import registry

        name = registry.canonical(str(value))
        if name not in self.names():
            self.fail(registry.unknown_type(str(value), self.names()), param, ctx)
        return name

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return "[" + "|".join(self.names()) + "]"


def judge_options(command: F) -> F:
    """``--model``, ``--api-base``, ``--api-key``, ``--timeout`` and ``--redact``: each wins
    over its ``OTEL_SCORERS_*`` variable and the settings file."""
    for option in reversed((
        click.option("--model", help=f"Judge model (litellm string). [env {ENV_MODEL}]"),
        click.option("--api-base", help=f"Judge API base URL. [env {ENV_API_BASE}]"),
        click.option("--api-key", help=f"Judge API key. [env {ENV_API_KEY}]"),
        click.option("--timeout", type=Finite(0.1, 3600), default=None,
                     help="Seconds per judge call. [env OTEL_SCORERS_JUDGE_TIMEOUT; 60]"),
        click.option("--redact/--no-redact", default=None,
                     help="Redact e-mails, phones, card numbers and secrets before judging. "
                          "[env OTEL_SCORERS_REDACT; off]"),
    )):
        command = option(command)
    return command


def judge_of(model: str | None, api_base: str | None, api_key: str | None,
             timeout: float | None, redact: bool | None) -> JudgeClient:
    """The judge the command's options and the settings give; a bad or unknown
    ``OTEL_SCORERS_*`` variable, or a bad option, is a usage error (exit 2)."""
    from otel_scorers.config import load_settings
    from otel_scorers.pipeline.build import judge_from

    given = {"model": model, "api_base": api_base, "api_key": api_key, "timeout_s": timeout,
             "redact": redact}
    overrides = {key: value for key, value in given.items() if value is not None}
    try:
        settings = load_settings({"judge": overrides} if overrides else None)
        return judge_from(settings.settings.judge)
    except ConfigError as exc:
        raise UsageProblem(str(exc)) from None
