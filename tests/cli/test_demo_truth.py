"""No statement in the demo's output is false (issue 54): the whole output read on a scripted
judge that answers each criterion as the run was written to be, and on the embedded judge
(whose answers are never shown as verdicts: it cannot tell a pass from a fail). The checks,
decided in code, show a pass, a failure with its reason and a tool error; the output ends with
the one step to real verdicts and the way from a result to its cause."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from otel_scorers.demo import DEMO_TASKS, run_demo
from otel_scorers.testing import RecordedRequest, ScriptedJudgeServer, judge_responder

#: What each run was written to be: its rubric criteria met, its checks failed, its alignment.
TRUTH: list[dict[str, Any]] = [
    {"met": {"Tells the user where the reset option is", "Mentions the e-mail link"},
     "unmet": set(), "checks": "1 pass", "failed_checks": [], "aligned": True},
    {"met": set(), "unmet": {"Tells the user where the reset option is",
                             "Mentions the e-mail link"},
     "checks": "0 fail", "failed_checks": ["the answer is at least 8 words"], "aligned": False},
    {"met": {"Includes a Python code block"}, "unmet": {"The code returns the string reversed"},
     "checks": "0 fail", "failed_checks": ["no tool call fails"], "aligned": False},
]


def truthful(request: RecordedRequest) -> Any:
    """The judge a careful reviewer would be: each criterion as the run was written."""
    index = 1 if "Passwords are important" in request.text else \
        2 if "s.reverse()" in request.text else 0
    truth = TRUTH[index]
    level = 0.9 if truth["aligned"] else 0.2
    return judge_responder(satisfied=lambda _i, text: text.strip() in truth["met"],
                           user=(level,) * 4, system=(level,) * 4)(request)


def rows(output: str) -> list[str]:
    """The table's rows: from each ``agent: task`` line to the next."""
    lines = output.splitlines()
    starts = [i for i, line in enumerate(lines)
              if re.match(r"\s*(support-bot|code-helper): ", line)]
    assert len(starts) == len(DEMO_TASKS), output
    end = next(i for i, line in enumerate(lines) if line.startswith("* judged after"))
    return ["\n".join(lines[a:b]) for a, b in zip(starts, [*starts[1:], end], strict=True)]


def test_the_whole_demo_output_on_a_truthful_scripted_judge(
        tmp_path: Path, judge_server: ScriptedJudgeServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    judge_server.responder = truthful
    monkeypatch.setenv("OTEL_SCORERS_JUDGE_MODEL", judge_server.model)
    monkeypatch.setenv("OTEL_SCORERS_JUDGE_API_BASE", judge_server.url)
    monkeypatch.setenv("OTEL_SCORERS_JUDGE_API_KEY", "k")
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    out = io.StringIO()
    telemetry = tmp_path / "demo.jsonl"
    report = run_demo(Console(file=out, width=240, color_system=None), telemetry_file=telemetry)
    text = out.getvalue()
    for task, row, truth, data in zip(DEMO_TASKS, rows(text), TRUTH, report.rows, strict=True):
        assert truth["checks"] in row, row
        for check in truth["failed_checks"]:
            assert f"✗ {check}" in row, row
        assert row.count("✗") == len(truth["unmet"]) + len(truth["failed_checks"]), row
        rubric = data["rubric"]
        assert set(rubric["unmet"]) == truth["unmet"], (task, rubric)
        # the rubric's verdict and the checks' in the row, as the run was written
        passes = (not truth["unmet"]) + (truth["checks"] == "1 pass")
        assert (row.count("1 pass"), row.count("0 fail")) == (passes, 2 - passes), row
        alignment = data["prompt_alignment"]["label"]
        assert (alignment in ("excellent", "good")) == truth["aligned"], (task, alignment)
    # each run's wait for its judgements is within the whole judging time (they overlap)
    waits = [row["waited"] for row in report.rows]
    assert all(w is not None and 0 <= w <= report.seconds for w in waits), (waits, report)
    assert "not shown" not in text  # a judge of the user's: its verdicts are shown as such
    assert "9/9 evaluations decided (" in text  # not a terminal: a line as they are decided
    assert f"how far to trust them: otel-scorers calibrate --model {judge_server.model}" in text
    assert text.rstrip().endswith(f"From a failure to its cause: otel-scorers report {telemetry}")
    assert "no_steps" not in text and "To fix" not in text  # no fix message about its own runs
    config = tmp_path / "demo.yaml"
    assert f"rescore {telemetry} --config {config})" in text, text
    assert_rescore_judges_as_the_demo(telemetry, config, report)


def assert_rescore_judges_as_the_demo(telemetry: Path, config: Path, report: Any) -> None:
    """The demo's suggested ``rescore`` decides every scorer on every run as the demo did
    (without its configuration the rubric was skipped: the demo's rubrics are not in the
    telemetry)."""
    from click.testing import CliRunner

    from otel_scorers.cli import main

    assert "api_key" not in config.read_text()  # never a key in the file
    results = telemetry.with_name("results.jsonl")
    out = CliRunner().invoke(main, ["rescore", str(telemetry), "--config", str(config),
                                    "--output", str(results), "--no-progress"])
    assert out.exit_code == 0, out.output
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    assert len(lines) == 3 * len(DEMO_TASKS), lines
    assert all("error" not in line and line["score"] is not None for line in lines), lines
    again = sorted((line["agent"], line["scorer"], line["passed"] if line["scorer"] != (
        "prompt_alignment") else line["label"]) for line in lines)
    live = sorted((row["agent"], scorer, row[scorer]["unmet"] == [] if scorer != (
        "prompt_alignment") else row[scorer]["label"])
        for row in report.rows for scorer in ("rubric", "prompt_alignment", "checks"))
    assert again == live, (again, live)


@pytest.mark.local_model
@pytest.mark.timeout(900)
def test_the_whole_demo_output_on_the_embedded_judge(tmp_path: Path) -> None:
    """The embedded judge's answers are emitted, never shown as a pass, a fail or a label;
    its measured informedness and the command measuring it are; the checks are as written;
    the suggested rescore gives every run the demo's scores again."""
    import os
    import subprocess
    import sys

    pytest.importorskip("llama_cpp", reason="install the 'local' extra (make test does)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["COLUMNS"] = "240"
    telemetry = tmp_path / "demo.jsonl"
    out = subprocess.run([str(Path(sys.executable).with_name("otel-scorers")), "demo",
                          "--telemetry-file", str(telemetry)], capture_output=True, text=True,
                         env=env, timeout=840, check=False)
    assert out.returncode == 0, out.stderr + out.stdout
    text = out.stdout
    for row, truth in zip(rows(text), TRUTH, strict=True):
        assert row.count("not shown†") == 2, row  # rubric and alignment: no verdict
        assert truth["checks"] in row and row.count("1 pass") + row.count("0 fail") == 1, row
        for check in truth["failed_checks"]:
            assert f"✗ {check}" in row, row
        assert row.count("✗") == len(truth["failed_checks"]), row
        assert not re.search(r"\b(excellent|very_poor|poor|fair|misaligned)\b", row), row
    assert "† the judge cannot tell a pass from a fail: informedness (TPR + TNR - 1)" in text
    assert "otel-scorers calibrate --model local/smollm2 --scorer rubric" in text
    assert "Real verdicts, one step: export OTEL_SCORERS_JUDGE_MODEL=" in text
    assert "make demo JUDGE=openai/<model> JUDGE_API_BASE=" in text
    assert text.rstrip().endswith(f"From a failure to its cause: otel-scorers report {telemetry}")
    assert "no_steps" not in text and "To fix" not in text
    assert "illustrative" not in text
    # what was scored and where it went (each scorer decided every run, nothing ignored)
    assert "It cannot tell a pass from a fail" in text and "Live scores" in text
    for scorer in ("rubric", "prompt_alignment", "checks"):
        assert f"{scorer}: scored=3, selected=3" in text, text
    assert "3 of 3 agent runs scored by all 3 scorers" in text
    assert "9 evaluation spans and 9 gen_ai.evaluation.result events" in text
    assert "Exception ignored" not in out.stderr and "Traceback" not in out.stderr
    assert f"Telemetry -> spans, events and metrics: OTLP JSON lines in {telemetry}" in text
    lines = [json.loads(line) for line in telemetry.read_text().splitlines()]
    assert {next(iter(line)) for line in lines} == {"resourceSpans", "resourceLogs",
                                                    "resourceMetrics"}
    # the suggested rescore, in another process with its calls in another order, gives each
    # run the scores the demo gave it: the embedded judge is deterministic
    demo = demo_scores(telemetry)
    results = tmp_path / "results.jsonl"
    again = subprocess.run([str(Path(sys.executable).with_name("otel-scorers")), "rescore",
                            str(telemetry), "--config", str(tmp_path / "demo.yaml"),
                            "--output", str(results), "--no-progress"], capture_output=True,
                           text=True, env=env, timeout=840, check=False)
    assert again.returncode == 0, again.stderr
    rescored = {(line["span_id"], line["scorer"]): line["score"]
                for line in map(json.loads, results.read_text().splitlines())}
    assert rescored == demo, (rescored, demo)


def demo_scores(telemetry: Path) -> dict[tuple[str, str], float]:
    """Each run's score per scorer, as the demo emitted them (evaluation spans)."""
    from otel_scorers.otlp import read_requests, spans_of

    found = {}
    for request in read_requests(telemetry):
        for span in spans_of(request):
            attrs = span.attributes or {}
            if "gen_ai.evaluation.name" in attrs and span.parent is not None:
                found[(format(span.parent.span_id, "016x"), str(attrs["gen_ai.evaluation.name"]))
                      ] = float(attrs["gen_ai.evaluation.score.value"])  # type: ignore[arg-type]
    return found


def test_a_local_openai_compatible_server_is_found_and_named(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The one step to real verdicts names a local server answering on its usual port."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from otel_scorers import demo_judge
    from tests.support import free_port

    class Models(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps({"object": "list", "data": [{"id": "qwen2.5:7b"}]}).encode()
            self.send_response(200 if self.path == "/v1/models" else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Models)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/v1"
    monkeypatch.setattr(demo_judge, "LOCAL_SERVERS", (
        ("Ollama", f"http://127.0.0.1:{free_port()}/v1"), ("vLLM", base)))
    try:
        lines = demo_judge.closing_lines("local/smollm2", "demo.jsonl")
    finally:
        server.shutdown()
        server.server_close()
    assert lines[0].startswith("Real verdicts, one step: export OTEL_SCORERS_JUDGE_MODEL=")
    assert [line for line in lines if line.startswith("  found ")] == [
        f"  found vLLM at {base}: make demo JUDGE=openai/qwen2.5:7b JUDGE_API_BASE={base}"]
    assert lines[-1] == "From a failure to its cause: otel-scorers report demo.jsonl"


def test_the_demo_configuration_never_holds_a_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    """No key is written; an API base is, for rescore, unless it carries credentials."""
    from otel_scorers.demo import CHECKS, RUBRICS
    from otel_scorers.demo_files import demo_config

    monkeypatch.setenv("OTEL_SCORERS_JUDGE_API_KEY", "sk-secret-value")
    monkeypatch.setenv("OTEL_SCORERS_JUDGE_API_BASE", "http://127.0.0.1:8080/v1")
    assert demo_config("openai/m", CHECKS, RUBRICS)["judge"] == {
        "model": "openai/m", "timeout_s": 180, "api_base": "http://127.0.0.1:8080/v1"}
    for base in ("http://user:pw@127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1?key=sk-x"):
        monkeypatch.setenv("OTEL_SCORERS_JUDGE_API_BASE", base)
        config = demo_config("openai/m", CHECKS, RUBRICS)
        assert "api_base" not in config["judge"] and "sk-" not in repr(config)


def test_a_file_name_cannot_write_the_demo_configuration(tmp_path: Path) -> None:
    """A telemetry file named with a line break stays inside the header's comment."""
    from otel_scorers.config import load_settings
    from otel_scorers.demo import CHECKS, RUBRICS
    from otel_scorers.demo_files import Exporters, config_path, demo_config

    telemetry = tmp_path / "x\nenabled: true\nq.jsonl"
    Exporters(telemetry, demo_config("openai/m", CHECKS, RUBRICS)).close()
    settings = load_settings(config=config_path(telemetry), env={}).settings
    assert settings.enabled is False and [s.type for s in settings.scorers] == [
        "rubric", "prompt_alignment", "checks"]
