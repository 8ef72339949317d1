"""The failure digest (``otel-scorers report``): evaluation results read back from where they
already are (OTLP trace files, the Jaeger query API, this project's Phoenix annotations and
MLflow assessments: :mod:`otel_scorers.report.backends`), pass rates against the window before, and
failures grouped by agent, scorer and criterion with their most frequent reasons and example
traces."""

from otel_scorers.report.digest import build_digest, group_reasons
from otel_scorers.report.records import Evaluation
from otel_scorers.report.render import markdown, terminal
from otel_scorers.report.sources import FileSource, JaegerSource, Source, SourceError

__all__ = ["Evaluation", "FileSource", "JaegerSource", "Source", "SourceError", "build_digest",
           "group_reasons", "markdown", "terminal"]
