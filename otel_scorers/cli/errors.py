"""The command line's exit codes: 0 ok, 1 a failed judgement or a score below
``--fail-under``, 2 a usage or configuration error. Errors print one line, no traceback."""

from __future__ import annotations

import click

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "Failed", "UsageProblem"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


class UsageProblem(click.ClickException):
    """A usage or configuration error: ``Error: <message>`` on one line, exit 2."""

    exit_code = EXIT_USAGE


class Failed(click.ClickException):
    """The command ran but its check failed (a judgement, a threshold): exit 1."""

    exit_code = EXIT_FAILED
