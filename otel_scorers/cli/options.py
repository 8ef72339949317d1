"""Options shared by the commands that call a judge directly (``score``, ``calibrate``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from otel_scorers.judge.client import ENV_API_BASE, ENV_API_KEY, ENV_MODEL

__all__ = ["judge_options"]

F = TypeVar("F", bound=Callable[..., Any])


def judge_options(command: F) -> F:
    """``--model``, ``--api-base``, ``--api-key`` (each with its ``OTEL_SCORERS_JUDGE_*``
    variable), ``--timeout`` and ``--redact``."""
    for option in reversed((
        click.option("--model", envvar=ENV_MODEL,
                     help=f"Judge model (litellm string). [env {ENV_MODEL}]"),
        click.option("--api-base", envvar=ENV_API_BASE,
                     help=f"Judge API base URL. [env {ENV_API_BASE}]"),
        click.option("--api-key", envvar=ENV_API_KEY, help=f"Judge API key. [env {ENV_API_KEY}]"),
        click.option("--timeout", type=float, default=60.0, show_default=True,
                     help="Seconds per judge call."),
        click.option("--redact/--no-redact", default=False, show_default=True,
                     help="Redact e-mails, phones, card numbers and secrets before judging."),
    )):
        command = option(command)
    return command
