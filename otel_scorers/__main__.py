"""``python -m otel_scorers``: the command line (same as ``otel-scorers``)."""

from otel_scorers.cli import main

main()
