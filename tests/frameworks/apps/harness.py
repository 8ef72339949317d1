"""Runs one case of the framework conformance matrix inside that framework's own virtual
environment (``.frameworks/<venv>``, built by ``tests/frameworks/build-venv.sh``).

    .frameworks/<venv>/bin/python tests/frameworks/apps/harness.py CASE OUT_DIR

The case's app runs the scenario of :mod:`llm` three times with the real framework and its real
instrumentation, the agent's LLM served by :class:`llm.AppLLM` on 127.0.0.1. When
``MATRIX_JUDGE_URL`` is set, scoring is installed the way a user installs it
(``otel_scorers.install()`` on the SDK providers, first in their chains) with a judge at that
URL; the test that started the app holds that judge and reads what it was asked. The app's
telemetry (spans and log records, in the order they ended) is written as OTLP JSON lines to
``OUT_DIR/telemetry.jsonl`` (what ``make record-frameworks`` commits, for replay), and
``OUT_DIR/result.json`` says what was expected, what the processor decided, what it logged and
which package versions ran.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import logging
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from cases import CASES  # noqa: E402
from llm import AppLLM, Plan, Scenario  # noqa: E402


@dataclass
class Expected:
    """What the judge must be shown for each interaction (``None``: nothing must be judged)."""

    questions: list[str]
    answers: list[str]
    system: str | None = None
    content: bool = True
    #: the decision reason when nothing is judged (``content`` false)
    reason: str | None = None
    #: a fragment of the one warning that says what to change
    fix: str | None = None
    interactions: int = 3
    notes: list[str] = field(default_factory=list)


@dataclass
class App:
    """What an app module gets: the agent LLM, the scenario and the SDK providers."""

    llm: AppLLM
    scenario: Scenario
    tracer_provider: Any
    logger_provider: Any
    plan: Plan


class Warnings(logging.Handler):
    """The warnings otel-scorers logged, kept for the result (and shown on stderr)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        line = record.getMessage()
        self.lines.append(line)
        print(f"[otel-scorers {record.levelname}] {line}", file=sys.stderr)


def versions(venv: str) -> dict[str, str]:
    """The versions of the pinned packages (and the OTel SDK) that ran."""
    names = ["opentelemetry-sdk", "opentelemetry-api"]
    requirements = HERE.parent / "requirements" / f"{venv}.txt"
    for raw in requirements.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            names.append(line.split("==")[0].split("[")[0])
    out = {}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "missing"
    return out


def setup(out: Path, service: str) -> tuple[Any, Any, Any, Callable[[], None]]:
    """SDK providers writing OTLP JSON lines to ``out/telemetry.jsonl``, made global (several
    frameworks trace through the global providers)."""
    from opentelemetry import trace
    from opentelemetry._logs import set_logger_provider
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from otel_scorers.otlp.json_lines import (
        JsonLinesFile,
        JsonLinesLogExporter,
        JsonLinesSpanExporter,
    )

    resource = Resource.create({"service.name": service})
    tracer_provider = TracerProvider(resource=resource)
    logger_provider = LoggerProvider(resource=resource)
    stream = (out / "telemetry.jsonl").open("w", encoding="utf-8")
    lines = JsonLinesFile(stream)
    tracer_provider.add_span_processor(SimpleSpanProcessor(JsonLinesSpanExporter(lines)))
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(JsonLinesLogExporter(lines)))
    trace.set_tracer_provider(tracer_provider)
    set_logger_provider(logger_provider)
    return tracer_provider, logger_provider, stream, stream.close


def scoring(tracer_provider: Any, logger_provider: Any, judge_url: str) -> Any:
    """Scoring as a user installs it: both scorers, one judge, first in the providers' chains;
    with ``MATRIX_SCORERS=env``, the scorers and the judge the ``OTEL_SCORERS_*`` variables
    configure (zero-code configuration)."""
    import otel_scorers
    from otel_scorers import JudgeClient, PromptAlignmentScorer, RubricScorer

    if os.environ.get("MATRIX_SCORERS") == "env":
        return otel_scorers.install(tracer_provider=tracer_provider,
                                    logger_provider=logger_provider)

    judge = JudgeClient("openai/scripted-judge", api_base=judge_url, api_key="test-key",
                        timeout_s=10.0)
    return otel_scorers.install(
        tracer_provider=tracer_provider, logger_provider=logger_provider,
        scorers=[RubricScorer(judge, "- answers the weather question in one sentence"),
                 PromptAlignmentScorer(judge)])


def main(argv: list[str]) -> int:
    case, out = argv[1], Path(argv[2])
    out.mkdir(parents=True, exist_ok=True)
    venv, module_name, variant = CASES[case]
    warnings = Warnings()
    logging.getLogger("otel_scorers").addHandler(warnings)
    tracer_provider, logger_provider, _stream, close = setup(out, case)
    judge_url = os.environ.get("MATRIX_JUDGE_URL")
    processor = scoring(tracer_provider, logger_provider, judge_url) if judge_url else None
    scenario = Scenario()
    module = importlib.import_module(module_name)
    plan = module.plan(variant) if hasattr(module, "plan") else Plan()
    llm = AppLLM(scenario, plan).start()
    started = time.monotonic()
    try:
        expected: Expected = module.run(variant, App(llm, scenario, tracer_provider,
                                                     logger_provider, plan))
    finally:
        llm.stop()
    ran_s = time.monotonic() - started
    flushed = processor.force_flush(60_000) if processor is not None else None
    tracer_provider.force_flush()
    logger_provider.force_flush()
    result = {
        "case": case, "variant": variant, "expected": asdict(expected),
        "versions": versions(venv), "llm_requests": len(plan.requests), "ran_s": ran_s,
        "flushed": flushed, "warnings": warnings.lines,
        "stats": processor.stats() if processor is not None else None,
        "decisions": [[*key, value] for key, value in processor.counts.snapshot().items()]
        if processor is not None else None,
    }
    (out / "result.json").write_text(json.dumps(result, indent=2))
    if processor is not None:
        processor.shutdown()
    tracer_provider.shutdown()
    close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
