"""The ``otel-scorers`` command line: thin commands that parse, call the library and print.

One module per command family (:mod:`.score`, :mod:`.demo`, :mod:`.check` for ``check-config``,
:mod:`.rescore`, :mod:`.serve`, :mod:`.calibrate`). Exit codes: 0 done; 1 a failed judgement or
a result below ``--fail-under``; 2 a usage or configuration error (one line, no traceback).
"""

from __future__ import annotations

import click

from otel_scorers.cli.calibrate import calibrate
from otel_scorers.cli.check import check_config
from otel_scorers.cli.demo import demo
from otel_scorers.cli.report import report
from otel_scorers.cli.rescore import rescore
from otel_scorers.cli.score import score
from otel_scorers.cli.serve import serve

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="otel-scorers")
def main() -> None:
    """Judge AI-agent runs with rubric and prompt-alignment scorers."""


for _command in (score, demo, check_config, rescore, serve, calibrate, report):
    main.add_command(_command)
