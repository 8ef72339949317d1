"""The ``otel-scorers`` command line: thin commands that parse, call the library and print.

One module per command family (:mod:`.score`, :mod:`.live` for ``demo`` and ``check-config``,
:mod:`.rescore`, :mod:`.serve`). User mistakes are ``click.ClickException`` (one line, no
traceback). ``score`` exits 0 when the run was scored and 1 when it could not be;
``--fail-under`` turns a low score into exit code 2 for CI checks.
"""

from __future__ import annotations

import click

from otel_scorers.cli.live import check_config, demo
from otel_scorers.cli.rescore import rescore
from otel_scorers.cli.score import score
from otel_scorers.cli.serve import serve

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="otel-scorers")
def main() -> None:
    """Judge AI-agent runs with rubric and prompt-alignment scorers."""


for _command in (score, demo, check_config, rescore, serve):
    main.add_command(_command)
