"""Every command reads the same settings the same way: the same bad environment is the same
usage error (exit 2, one line naming the variable) everywhere, and a good one (a judge setting
given only as a variable) reaches the judge from every command that calls it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from otel_scorers.testing import ScriptedJudgeServer, judge_responder


#: Each command with arguments that make it work (given a judge), and whether it calls one.
def commands(work: Path) -> dict[str, tuple[list[str], bool]]:
    spans = work / "spans.jsonl"
    spans.write_text(json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{
        "scope": {"name": "app"}, "spans": [{
            "traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331",
            "name": "invoke_agent", "startTimeUnixNano": "1", "endTimeUnixNano": "2",
            "attributes": [
                {"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}},
                {"key": "gen_ai.input.messages", "value": {"stringValue": json.dumps(
                    [{"role": "user", "parts": [{"type": "text", "content": "Hi?"}]}])}},
                {"key": "gen_ai.output.messages", "value": {"stringValue": json.dumps(
                    [{"role": "assistant", "parts": [{"type": "text",
                                                      "content": "Hello."}]}])}}]}]}]}]}) + "\n")
    return {
        "score": (["score", "--criteria", "- greets", "--input", "Hi?", "--output", "Hello."],
                  True),
        "calibrate": (["calibrate", "--limit", "1", "--scorer", "rubric", "--no-progress"],
                      True),
        "rescore": (["rescore", str(spans), "--output", str(work / "out.jsonl"),
                     "--restart"], True),
        "check-config --ping": (["check-config", "--ping"], True),
        "serve": (["serve", "--port", "1", "--upstream", "http://127.0.0.1:9"], False),
        # (its judge is its own: not run with the one given here)
        "demo": (["demo", "--telemetry-file", str(work / "demo.jsonl")], False),
    }


def run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    base = {key: value for key, value in os.environ.items()
            if not key.startswith(("OTEL_", "COLUMNS"))}
    return subprocess.run([sys.executable, "-m", "otel_scorers", *args], env={**base, **env},
                          capture_output=True, text=True, timeout=120, cwd=cwd, check=False)


@pytest.mark.parametrize(("bad", "named"), [
    ({"OTEL_SCORERS_SAMPLE_RATE": "0.5"}, "did you mean OTEL_SCORERS_SAMPLE_RATIO"),
    ({"OTEL_SCORERS_JUDGE_TIMEOUT": "soon"}, "OTEL_SCORERS_JUDGE_TIMEOUT='soon'"),
])
def test_a_bad_environment_is_the_same_usage_error_everywhere(
        bad: dict[str, str], named: str, tmp_path: Path) -> None:
    for name, (args, _) in commands(tmp_path).items():
        done = run(args, {"OTEL_SCORERS_JUDGE_MODEL": "openai/x",
                          "OTEL_SCORERS_JUDGE_API_BASE": "http://127.0.0.1:9/v1", **bad},
                   tmp_path)
        assert done.returncode == 2, (name, done.stdout, done.stderr)
        assert named in done.stderr, (name, done.stderr)
        assert done.stdout.strip() == "", (name, done.stdout)  # said once, on stderr
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and "Traceback" not in done.stderr, (name, done.stderr)


def test_a_judge_setting_given_as_a_variable_reaches_the_judge_from_every_command(
        judge_server: ScriptedJudgeServer, tmp_path: Path) -> None:
    judge_server.responder = judge_responder()
    env = {"OTEL_SCORERS_JUDGE_MODEL": judge_server.model,
           "OTEL_SCORERS_JUDGE_API_BASE": judge_server.url,
           "OTEL_SCORERS_JUDGE_API_KEY": "k", "OTEL_SCORERS_RUBRIC": "- greets",
           "OTEL_SCORERS_JUDGE_STRUCTURED_OUTPUT": "prompt"}  # no response_format at all
    for name, (args, calls) in commands(tmp_path).items():
        if not calls:
            continue
        before = len(judge_server.requests)
        done = run(args, env, tmp_path)
        assert done.returncode == 0, (name, done.stdout, done.stderr)
        made = judge_server.requests[before:]
        assert made, f"{name} made no judge call"
        for request in made:
            assert "response_format" not in request.body, name
            assert "It must match this JSON Schema" in request.messages[0]["content"], name
