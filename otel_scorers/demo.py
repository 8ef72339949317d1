"""``otel-scorers demo``: a traced example agent, scored live through the real pipeline.

A small deterministic support agent answers a handful of tasks (some well, some badly). Each run
is an ``invoke_agent`` span with GenAI semantic-convention content, ended through a
``TracerProvider`` that has the ``ScoringSpanProcessor`` with the rubric and prompt-alignment
scorers, and a checks scorer decided in code (no judge: its verdicts are true with any judge,
none at all included). The summary is read back from the evaluation spans the pipeline
emitted, counts what was scored, what failed and why, and the
telemetry goes to OTLP when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set, else to a file of OTLP JSON
lines (one export request per line, as the Collector's file exporter writes) with the demo's
configuration beside it (``otel-scorers rescore FILE --config`` judges the runs again as the demo
did), plus a Prometheus scrape endpoint when asked.

The judge is ``OTEL_SCORERS_JUDGE_MODEL`` or, when unset, the embedded SmolLM2-135M model. The
embedded judge's measured informedness on the shipped rubric golden set is not above 0.2
(:mod:`otel_scorers.demo_judge`): its answers are emitted (the plumbing is real) but never shown
as a pass, a fail or a label, and the demo says what would give real verdicts. The checks
column is what is true without a key: the three runs are written so that it shows a pass, a
failure with its reason (an answer too short to help) and a tool error.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import (
    BatchLogRecordProcessor,
    InMemoryLogRecordExporter,
    SimpleLogRecordProcessor,
)
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    InMemoryMetricReader,
    MetricReader,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from otel_scorers.demo_files import Exporters, demo_config
from otel_scorers.demo_judge import MIN_INFORMEDNESS, closing_lines, standing
from otel_scorers.judge.client import DEFAULT_LOCAL_MODEL, JudgeClient
from otel_scorers.pipeline.processor import ScoringSpanProcessor
from otel_scorers.scorers.alignment import PromptAlignmentScorer
from otel_scorers.scorers.checks_scorer import ChecksScorer
from otel_scorers.scorers.rubric import RubricScorer

__all__ = ["DEMO_TASKS", "DemoReport", "DemoTask", "run_demo"]


@dataclass(frozen=True)
class DemoTask:
    agent: str
    system: str
    prompt: str
    answer: str
    quality: str  # what the answer was written to be: "good" or "bad"
    #: the tool the agent called: its name, its result, and whether it failed
    tool: tuple[str, str, bool] | None = None


SUPPORT = "You are Acme Cloud's support agent. Be polite and answer in at most three sentences."
CODER = "You are a coding assistant. Always include a Python code example."

DEMO_TASKS: tuple[DemoTask, ...] = (
    DemoTask("support-bot", SUPPORT, "How do I reset my password?",
             "Open Settings > Security and click 'Reset password'. We e-mail you a link that is "
             "valid for one hour.", "good",
             ("search_docs", "Settings > Security > Reset password; link valid 1 h", False)),
    DemoTask("support-bot", SUPPORT, "How do I reset my password?",
             "Passwords are important. Many people forget them.", "bad",
             ("search_docs", "Settings > Security > Reset password; link valid 1 h", False)),
    DemoTask("code-helper", CODER, "How do I reverse a string in Python?",
             "Call the string's reverse method:\n\n```python\ndef reverse(s: str) -> str:\n"
             "    return s.reverse()\n```", "bad",
             ("run_python", "AttributeError: 'str' object has no attribute 'reverse'", True)),
)

#: Decided in code, without the judge: true whatever the judge is.
CHECKS = ("no_tool_errors", "max_tool_calls 3", "min_length 8 words")
SCORERS = ("rubric", "prompt_alignment", "checks")
JUDGED = ("rubric", "prompt_alignment")

RUBRICS = {
    "support-bot": "- Tells the user where the reset option is\n- Mentions the e-mail link",
    "code-helper": "- Includes a Python code block\n- The code returns the string reversed",
}


@dataclass
class DemoReport:
    """What the demo did: evaluation spans per run, decisions, where telemetry went."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    stats: dict[str, dict[str, int]] = field(default_factory=dict)
    #: per scorer, its decisions with their reasons (``{"error": {"timeout": 2}}``)
    decisions: dict[str, dict[str, Any]] = field(default_factory=dict)
    destinations: list[str] = field(default_factory=list)
    spans_exported: int = 0
    evaluation_spans: int = 0
    events: int = 0
    seconds: float = 0.0
    judge_model: str = ""


def _messages(role: str, text: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}])


def _run_agent(provider: TracerProvider, task: DemoTask) -> int:
    """One traced agent run; returns its span id."""
    tracer = provider.get_tracer("acme.demo-agent")
    with tracer.start_as_current_span(f"invoke_agent {task.agent}", attributes={
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": task.agent,
        "gen_ai.system_instructions": json.dumps([{"type": "text", "content": task.system}]),
        "gen_ai.input.messages": _messages("user", task.prompt),
    }) as span:
        with tracer.start_as_current_span("chat demo-llm", attributes={
                "gen_ai.operation.name": "chat", "gen_ai.request.model": "demo-llm"}):
            time.sleep(0.01)  # the "LLM call" of this deterministic agent
        if task.tool is not None:
            name, result, failed = task.tool
            with tracer.start_as_current_span(f"execute_tool {name}", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                    "gen_ai.tool.call.arguments": json.dumps({"query": task.prompt}),
                    "gen_ai.tool.call.result": result}) as tool:
                if failed:
                    tool.set_attribute("error.type", "503")
                    tool.set_status(StatusCode.ERROR, result)
        span.set_attribute("gen_ai.output.messages", _messages("assistant", task.answer))
        return int(span.get_span_context().span_id)


def run_demo(console: Console | None = None, *, prometheus_port: int | None = None,
             telemetry_file: Path = Path("otel-scorers-demo.jsonl"),
             tasks: tuple[DemoTask, ...] = DEMO_TASKS) -> DemoReport:
    """Trace the demo agent's runs, score them live, print what was scored and where it went."""
    console = console or Console()
    report = DemoReport()
    judge = JudgeClient.from_environment(timeout_s=180, total_timeout_s=400)
    report.judge_model = judge.model
    if judge.model == DEFAULT_LOCAL_MODEL:
        console.print("[yellow]Judge: the embedded SmolLM2-135M model (no API key, no network). "
                      "It cannot tell a pass from a fail (measured below): its answers are "
                      "emitted but not shown as verdicts.[/]", soft_wrap=True)
    else:
        console.print(f"Judge: {judge.model}", highlight=False)
    exporters = Exporters(telemetry_file, demo_config(judge.model, CHECKS, RUBRICS))
    report.destinations.append(f"spans, events and metrics: {exporters.destination}")
    resource = Resource.create({"service.name": "otel-scorers-demo"})
    readers: list[MetricReader] = [
        InMemoryMetricReader(),
        PeriodicExportingMetricReader(exporters.metrics, export_interval_millis=3_600_000)]
    if prometheus_port is not None:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from prometheus_client import start_http_server

        start_http_server(prometheus_port, addr="127.0.0.1")
        readers.append(PrometheusMetricReader())
        report.destinations.append(
            f"metrics: Prometheus scrape endpoint http://127.0.0.1:{prometheus_port}/metrics")
    meter_provider = MeterProvider(resource=resource, metric_readers=readers)
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(BatchLogRecordProcessor(exporters.logs))
    events = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(events))
    tracer_provider = TracerProvider(resource=resource)
    scoring = ScoringSpanProcessor(
        [RubricScorer(judge), PromptAlignmentScorer(judge), ChecksScorer(CHECKS)],
        rubrics=RUBRICS,
        tracer_provider=tracer_provider, meter_provider=meter_provider,
        logger_provider=logger_provider, concurrency=2, evaluation_timeout_s=600)
    collected = InMemorySpanExporter()
    tracer_provider.add_span_processor(scoring)
    tracer_provider.add_span_processor(SimpleSpanProcessor(collected))
    tracer_provider.add_span_processor(BatchSpanProcessor(exporters.spans))
    started = time.monotonic()
    try:
        agent_spans = [(_run_agent(tracer_provider, task), task) for task in tasks]
        _wait_with_progress(console, scoring, total=len(SCORERS) * len(tasks))
        report.stats = scoring.stats()
        report.decisions = {name: dict(state["decisions"])
                            for name, state in scoring.health()["scorers"].items()}
        report.seconds = time.monotonic() - started
        finished = collected.get_finished_spans()
        report.rows = [_row(task, span_id, finished) for span_id, task in agent_spans]
        report.evaluation_spans = sum(1 for s in finished if s.name.startswith("gen_ai.eval"))
        report.spans_exported = len(finished)
        report.events = sum(1 for r in events.get_finished_logs()
                            if r.log_record.event_name == "gen_ai.evaluation.result")
    finally:
        tracer_provider.shutdown()
        meter_provider.shutdown()
        logger_provider.shutdown()
        exporters.close()
    _print(console, report)
    for line in closing_lines(report.judge_model, None if os.environ.get(
            "OTEL_EXPORTER_OTLP_ENDPOINT") else str(telemetry_file)):
        console.print(line, soft_wrap=True, highlight=False, markup=False)
    return report


def _wait_with_progress(console: Console, scoring: ScoringSpanProcessor, total: int) -> None:
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
               TextColumn("{task.completed}/{task.total} evaluations"), TimeElapsedColumn())
    started, said = time.monotonic(), 0
    with Progress(*columns, console=console, transient=True) as progress:
        bar = progress.add_task("judging the demo agent's runs", total=total)
        while True:
            done = sum(sum(v for k, v in counts.items() if k != "selected")
                       for counts in scoring.stats().values())
            progress.update(bar, completed=done)
            # never the counts alone: a decision is counted before its span is emitted, and
            # the table is read from the spans (the code-helper's checks read "not scored"
            # under the embedded judge's load); force_flush waits for the emission too
            finished = scoring.force_flush(250)
            if not console.is_terminal and (done > said or finished):  # no bar: a line each
                said = total if finished else done  # finished: every run has its decision
                console.print(f"{min(said, total)}/{total} evaluations decided "
                              f"({time.monotonic() - started:.0f} s)", highlight=False)
            if finished:
                progress.update(bar, completed=total)
                return


def _row(task: DemoTask, span_id: int, spans: tuple[ReadableSpan, ...]) -> dict[str, Any]:
    row: dict[str, Any] = {"agent": task.agent, "task": task.prompt, "quality": task.quality}
    ended = next((s.end_time for s in spans if s.context is not None
                  and s.context.span_id == span_id), None)
    last = None  # the end of the run's last judged evaluation
    for span in spans:
        if span.parent is None or span.parent.span_id != span_id:
            continue
        attrs = span.attributes or {}
        scorer = attrs.get("gen_ai.evaluation.name")
        if not isinstance(scorer, str):
            continue
        if scorer in JUDGED and span.end_time is not None:
            last = max(last or 0, span.end_time)
        unmet = attrs.get("otel_scorers.criteria.unmet")
        row[scorer] = {
            "score": attrs.get("gen_ai.evaluation.score.value"),
            "label": attrs.get("gen_ai.evaluation.score.label"),
            "error": attrs.get("error.type"),
            # the criteria as written in the rubric, not their ids
            "unmet": [str(attrs.get(f"otel_scorers.criterion.{u}.description", u))
                      for u in unmet] if isinstance(unmet, tuple) else [],
            "latency": attrs.get("otel_scorers.judge.latency_s"),
        }
    # wall clock from the run's end to its last judgement: never more than the whole judging
    # time (the scorers' own latencies overlap, and include waiting for the one local model)
    row["waited"] = (last - ended) / 1e9 if last is not None and ended is not None else None
    return row


def _cell(result: dict[str, Any] | None, *, verdict: bool = True) -> str:
    if result is None:
        return "[dim]not scored[/]"
    if not verdict:  # a judge that cannot tell them apart: its answer is no verdict
        return "[dim]not shown†[/]" if not result["error"] else \
            f"[red]error: {escape(str(result['error']))}[/]"
    if result["error"]:
        return f"[red]error: {escape(str(result['error']))}[/]"
    text = f"{result['score']:g} {escape(str(result['label']))}"
    for criterion in result["unmet"]:
        text += f"\n✗ {escape(criterion)}"
    return text


def summary_line(report: DemoReport) -> str:
    """What was scored, what failed and why, as counted by the pipeline (never a claim the
    decisions do not back)."""
    whole = sum(1 for row in report.rows if all(
        s in row and row[s]["error"] is None and row[s]["score"] is not None for s in SCORERS))
    parts = []
    for scorer in SCORERS:
        decisions = report.decisions.get(scorer, {})
        scored = decisions.get("scored", 0)
        other = []
        for decision, value in sorted(decisions.items()):
            if decision in ("selected", "scored"):
                continue
            if isinstance(value, dict):  # {reason: count}
                other += [f"{decision} {count} ({reason})" for reason, count in
                          sorted(value.items())]
            elif value:
                other.append(f"{decision} {value}")
        parts.append(f"{scorer} {scored}" + (f", not: {', '.join(other)}" if other else ""))
    return (f"{whole} of {len(report.rows)} agent runs scored by all {len(SCORERS)} scorers in "
            f"{report.seconds:.1f}s (scored: {'; '.join(parts)}); {report.evaluation_spans} "
            f"evaluation spans and {report.events} gen_ai.evaluation.result events emitted.")


def _print(console: Console, report: DemoReport) -> None:
    # Laid out for an 80-column terminal: short columns never wrap, the two text columns
    # share what is left; criteria wrap on word boundaries.
    table = Table(title="Live scores (read back from the evaluation spans)", box=box.SIMPLE_HEAD,
                  pad_edge=False)
    table.add_column("agent: task", ratio=3)
    table.add_column("meant", no_wrap=True)
    table.add_column("rubric (✗ unmet)", ratio=3)
    table.add_column("alignment", no_wrap=True)
    table.add_column("checks**", ratio=2)
    table.add_column("judged*", no_wrap=True, justify="right")
    judged = standing(report.judge_model) if report.judge_model else None
    shown = judged is None or judged.tells_apart
    for row in report.rows:
        waited = row.get("waited")
        table.add_row(f"[bold]{escape(row['agent'])}[/]: {escape(row['task'])}",
                      row["quality"], _cell(row.get("rubric"), verdict=shown),
                      _cell(row.get("prompt_alignment"), verdict=shown),
                      _cell(row.get("checks")),
                      "-" if waited is None else f"{waited:.1f}s")
    console.print(table)
    if judged is not None and not shown:
        console.print(f"[dim]† the judge cannot tell a pass from a fail: informedness (TPR + "
                      f"TNR - 1) {judged.informedness:.2f}, 95% {judged.low:.2f} to "
                      f"{judged.high:.2f}, on the {judged.cases} rubric cases of the shipped "
                      f"golden set ({judged.command}); not above {MIN_INFORMEDNESS}, so its "
                      "answers are no verdicts (they are in the telemetry, as emitted)[/]",
                      soft_wrap=True)
    # plain lines are never wrapped (soft_wrap): they read the same in any terminal width
    console.print(f"[dim]* judged after: seconds from the run's end to its last judged "
                  f"evaluation (the runs wait their turn for the judge; all were judged in "
                  f"{report.seconds:.1f}s)[/]", soft_wrap=True)
    console.print(f"[dim]** checks decided in code, no judge ({', '.join(CHECKS)}): true "
                  "with any judge or none[/]", soft_wrap=True)
    console.print("Pipeline decisions:", soft_wrap=True)
    for scorer, counts in report.stats.items():
        console.print(f"  {scorer}: " + ", ".join(f"{k}={v}" for k, v in sorted(counts.items())),
                      soft_wrap=True)
    console.print(summary_line(report), soft_wrap=True)
    for destination in report.destinations:
        console.print(f"Telemetry -> {destination}", soft_wrap=True, highlight=False)
