"""Nothing lost when a process exits: short processes that never call ``force_flush()``.

Each case is a real subprocess against the scripted judge: a plain script, an
``opentelemetry-instrument`` run (zero-code), and a script whose judge hangs (it must exit
within ``exit_timeout_s`` plus start-up, counting and logging what was cut off). The bounds on
run time are generous (start-up and litellm's first import take seconds on a busy machine);
what they rule out is waiting for the judge's own timeouts (minutes).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from otel_scorers.testing import ScriptedJudgeServer, judge_responder

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

HERE = Path(__file__).resolve().parent
AGENT_SCRIPT = """
import json
from opentelemetry import trace
attributes = {
    "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "greeter",
    "gen_ai.input.messages": json.dumps([{"role": "user", "content": "Hi"}]),
    "gen_ai.output.messages": json.dumps([{"role": "assistant", "content": "Hello!"}])}
with trace.get_tracer("app").start_as_current_span("invoke_agent greeter", attributes=attributes):
    pass
"""


def evaluation_spans(lines: str) -> list[dict[str, object]]:
    spans = [json.loads(line) for line in lines.splitlines() if line.startswith("{")]
    return [s for s in spans if str(s.get("name", "")).startswith("gen_ai.evaluation")]


def test_a_plain_script_gets_its_scores_out(tmp_path: Path,
                                            judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder(delay_s=0.5)
    spans = tmp_path / "spans.jsonl"
    out = subprocess.run([sys.executable, str(HERE / "exit_app.py"), judge_server.url,
                          str(spans)], capture_output=True, text=True, timeout=180, check=False)
    assert out.returncode == 0, out.stderr
    evaluations = evaluation_spans(spans.read_text())
    assert sorted(str(s["name"]) for s in evaluations) == [
        "gen_ai.evaluation prompt_alignment", "gen_ai.evaluation rubric"]
    assert "cannot schedule new futures" not in out.stderr
    assert "still pending" not in out.stderr


def test_an_opentelemetry_instrument_run_gets_its_scores_out(
        judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder(delay_s=0.5)
    env = {**os.environ, "OTEL_SCORERS_ENABLED": "true",
           "OTEL_SCORERS_JUDGE_MODEL": judge_server.model,
           "OTEL_SCORERS_JUDGE_API_BASE": judge_server.url, "OTEL_SCORERS_JUDGE_API_KEY": "k",
           "OTEL_SCORERS_RUBRIC": "- greets the user", "OTEL_TRACES_EXPORTER": "console",
           "OTEL_METRICS_EXPORTER": "none", "OTEL_LOGS_EXPORTER": "none",
           "OTEL_SERVICE_NAME": "exit-app"}
    instrument = Path(sys.executable).with_name("opentelemetry-instrument")
    out = subprocess.run([str(instrument), sys.executable, "-c", AGENT_SCRIPT], env=env,
                         capture_output=True, text=True, timeout=180, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    # the console exporter prints indented JSON objects; find the evaluation spans' names
    assert '"name": "gen_ai.evaluation rubric"' in out.stdout, out.stdout[-3000:]
    assert '"name": "gen_ai.evaluation prompt_alignment"' in out.stdout
    assert '"name": "invoke_agent greeter"' in out.stdout


def test_a_hung_judge_delays_exit_by_exit_timeout_only(
        tmp_path: Path, judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder(delay_s=3600)
    spans = tmp_path / "spans.jsonl"
    started = time.monotonic()
    out = subprocess.run([sys.executable, str(HERE / "exit_app.py"), judge_server.url,
                          str(spans), "2"], capture_output=True, text=True, timeout=180,
                         check=False)
    took = time.monotonic() - started
    assert out.returncode == 0, out.stderr
    assert took < 60, took  # the judge's timeouts (60 s per call, 300 s per evaluation) unused
    assert ("otel-scorers: 2 evaluation(s) were still pending when exit_timeout_s=2s ran out at "
            "exit; they were dropped") in out.stderr
    # and it says what held them: the judge, named, had not answered
    assert ("the judge (openai/scripted-judge at http://127.0.0.1" in out.stderr
            and "had not answered" in out.stderr)
    names = [json.loads(line)["name"] for line in spans.read_text().splitlines()]
    assert names == ["invoke_agent greeter"]  # the application's span still got out


def test_a_hung_result_backend_delays_exit_by_exit_timeout_only(
        tmp_path: Path, judge_server: ScriptedJudgeServer) -> None:
    """An MLflow that takes the connection and never answers (issue 35.10): the results
    waiting for it get ``exit_timeout_s`` at exit, and the shutdown after it does not wait for
    them again (it used to: up to the request timeout, after the exit timeout)."""
    import socket

    judge_server.responder = judge_responder()
    hung = socket.create_server(("127.0.0.1", 0))  # listens, never accepts: never answers
    hung.listen(64)
    env = {**os.environ, "OTEL_SCORERS_MLFLOW_TRACKING_URI":
           f"http://127.0.0.1:{hung.getsockname()[1]}", "OTEL_SCORERS_MLFLOW_EXPERIMENT": "1"}
    try:
        app = subprocess.Popen([sys.executable, str(HERE / "exit_app.py"), judge_server.url,
                                str(tmp_path / "spans.jsonl"), "1"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env)
        assert app.stdout is not None
        line = app.stdout.readline()  # the app's main is done: exit starts now
        ended = time.monotonic()
        _, stderr = app.communicate(timeout=120)
        took = time.monotonic() - ended
    finally:
        hung.close()
    assert "exiting without force_flush" in line and app.returncode == 0, stderr
    assert took < 8, (took, stderr)  # 1 s at exit (+ the loop's close), not 1 s + 10 s
    assert "1 result(s) for mlflow were still being written" in stderr, stderr
