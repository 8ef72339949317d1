"""``otel-scorers report`` (issue 37.4): the failure digest read back from exported OTLP files
of a live scored application, compared with the window before, with near-identical reasons
counted together; Jaeger unreachable or answering garbage is one line and exit 1. (Against the
real Jaeger: tests/collector_config/test_alerting.py.)"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from otel_scorers import RubricScorer
from otel_scorers.cli import main
from otel_scorers.judge.client import JudgeClient
from otel_scorers.otlp.json_lines import JsonLinesFile, JsonLinesSpanExporter
from otel_scorers.pipeline import ScoringSpanProcessor
from otel_scorers.report import group_reasons
from otel_scorers.testing import (
    RecordedRequest,
    ScriptedJudgeServer,
    judge_responder,
    reply,
    rubric_answer,
)
from tests.support import free_port, genai_attributes


def test_near_identical_reasons_count_together() -> None:
    grouped = group_reasons([
        "The answer does not greet the user (run 12).",
        "the answer does not greet the user (run 345)",
        "The answer does not greet the user at all.",
        "It cites no source.", "", "It cites no source"])
    assert grouped == [("The answer does not greet the user (run 12).", 3),
                       ("It cites no source.", 2)]


def scored_app(path: Path, judge_server: ScriptedJudgeServer, runs: int) -> list[str]:
    """A live application whose odd runs do not greet the user, exporting every span to a
    JSON-lines file (as the Collector's file exporter would); returns the failing trace ids."""
    good = judge_responder(satisfied=True)
    calls = iter(range(1000))

    def respond(request: RecordedRequest) -> Any:
        if "Hello there" in request.text:
            return good(request)
        return reply(rubric_answer([False, True], reasoning=[
            f"The answer does not greet the user (call {next(calls)})", "It cites a source."]))

    judge_server.responder = respond
    provider = TracerProvider(resource=Resource.create({"service.name": "support-app"}))
    failing = []
    with path.open("w") as stream:
        exporter = JsonLinesSpanExporter(JsonLinesFile(stream))
        judge = JudgeClient(judge_server.model, api_base=judge_server.url, api_key="k")
        processor = ScoringSpanProcessor(
            [RubricScorer(judge, "- greets the user\n- cites a source")],
            tracer_provider=provider, events=False)
        provider.add_span_processor(processor)
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        for i in range(runs):
            answer = "Hello there, see the docs." if i % 2 == 0 else "See the docs."
            with provider.get_tracer("app").start_as_current_span(
                    "invoke_agent support-bot", attributes=genai_attributes(
                        prompt=f"question {i}", answer=answer)) as span:
                if i % 2:
                    failing.append(f"{span.get_span_context().trace_id:032x}")
        assert processor.force_flush(60_000)
        provider.shutdown()
    return failing


def test_the_digest_of_a_live_apps_exported_file(tmp_path: Path,
                                                 judge_server: ScriptedJudgeServer) -> None:
    path = tmp_path / "traces.jsonl"
    failing = scored_app(path, judge_server, runs=8)
    result = CliRunner().invoke(main, ["report", str(path), "--json"])
    assert result.exit_code == 0, result.output
    digest = json.loads(result.stdout)
    (rate,) = digest["rates"]
    assert (rate["agent"], rate["scorer"], rate["runs"], rate["failures"]) == (
        "support-bot", "rubric", 8, 4)
    assert rate["pass_rate"] == 0.5 and rate["previous_pass_rate"] is None
    (group,) = digest["groups"]
    assert (group["scorer"], group["criterion"], group["failures"]) == (
        "rubric", "greets_the_user", 4)
    # four reasons that differ only in a number: one line, counted 4
    assert [r["count"] for r in group["reasons"]] == [4]
    assert group["reasons"][0]["text"].startswith("The answer does not greet the user")
    assert {e["trace_id"] for e in group["examples"]} <= set(failing)
    assert len(group["examples"]) == 3
    markdown = CliRunner().invoke(main, ["report", str(path), "--markdown"])
    assert markdown.exit_code == 0, markdown.output
    assert "| support-bot | rubric | 8 | 4 | 50% | - | - |" in markdown.stdout
    assert "**support-bot · rubric · greets_the_user**: 4 failure(s)" in markdown.stdout
    assert "- 4× The answer does not greet the user" in markdown.stdout
    terminal = CliRunner().invoke(main, ["report", str(path), "--agent", "support-bot",
                                         "--scorer", "rubric"])
    assert terminal.exit_code == 0 and "greets_the_user" in terminal.stdout
    other = CliRunner().invoke(main, ["report", str(path), "--agent", "nobody", "--json"])
    assert json.loads(other.stdout)["groups"] == []


def test_the_window_before_is_the_comparison(tmp_path: Path) -> None:
    """Evaluation spans an hour old (all passing) against this hour's (half failing)."""
    path = tmp_path / "traces.jsonl"
    provider = TracerProvider(resource=Resource.create({"service.name": "support-app"}))
    now = time.time_ns()
    with path.open("w") as stream:
        provider.add_span_processor(SimpleSpanProcessor(JsonLinesSpanExporter(
            JsonLinesFile(stream))))
        tracer = provider.get_tracer("otel_scorers")
        for index, (age_s, passed) in enumerate(
                [(5400, True)] * 4 + [(600, True), (600, False), (300, True), (300, False)]):
            at = now - int(age_s * 1e9)
            span = tracer.start_span("gen_ai.evaluation rubric", start_time=at, attributes={
                "gen_ai.evaluation.name": "rubric", "gen_ai.agent.name": "support-bot",
                "gen_ai.evaluation.score.value": 1.0 if passed else 0.0,
                "gen_ai.evaluation.score.label": "pass" if passed else "fail",
                "otel_scorers.pass": passed,
                "gen_ai.evaluation.explanation": f"Run {index} is {'fine' if passed else 'off'}"})
            span.end(end_time=at + 1000)
        provider.shutdown()
    result = CliRunner().invoke(main, ["report", str(path), "--window", "1h", "--json"])
    assert result.exit_code == 0, result.output
    (rate,) = json.loads(result.stdout)["rates"]
    assert (rate["runs"], rate["previous_runs"], rate["pass_rate"],
            rate["previous_pass_rate"], rate["change"]) == (4, 4, 0.5, 1.0, -0.5)
    markdown = CliRunner().invoke(main, ["report", str(path), "--markdown"]).stdout
    assert "| 50% | 100% | -50 pts |" in markdown


def test_a_source_that_cannot_be_read_is_one_line(tmp_path: Path) -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    down = CliRunner().invoke(main, ["report", "--jaeger", f"http://127.0.0.1:{free_port()}",
                                     "--service", "support-app"])
    assert down.exit_code == 1 and "unreachable" in down.output, down.output
    assert "Traceback" not in down.output and len(down.output.strip().splitlines()) == 1

    class Garbage(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"[" * 100_000 if "operations" in self.path else b"{}"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Garbage)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        hostile = CliRunner().invoke(main, [
            "report", "--jaeger", f"http://127.0.0.1:{server.server_address[1]}",
            "--service", "support-app"])
    finally:
        server.shutdown()
        server.server_close()
    assert hostile.exit_code == 1 and "not JSON" in hostile.output, hostile.output
    assert len(hostile.output.strip().splitlines()) == 1
    usage = CliRunner().invoke(main, ["report"])
    assert usage.exit_code == 2 and "FILES, --jaeger URL" in usage.output
    bad = CliRunner().invoke(main, ["report", str(tmp_path), "--window", "soon"])
    assert bad.exit_code == 2
