from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from otel_scorers.cli import main
from otel_scorers.testing import ScriptedJudgeServer, alignment_answer, fault, reply, rubric_answer
from tests.support import free_port


@pytest.fixture
def cli(judge_server: ScriptedJudgeServer, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("OTEL_SCORERS_JUDGE_MODEL", judge_server.model)
    monkeypatch.setenv("OTEL_SCORERS_JUDGE_API_BASE", judge_server.url)
    monkeypatch.setenv("OTEL_SCORERS_JUDGE_API_KEY", "test-key")
    return CliRunner()


def test_score_rubric_json(cli: CliRunner, judge_server: ScriptedJudgeServer) -> None:
    judge_server.script(rubric_answer([True, False, True]))
    result = cli.invoke(main, ["score", "--criteria", "- mentions Paris\n- uses bullets",
                               "--optional", "cites a source", "--input", "Capital of France?",
                               "--output", "Paris.", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["score"] == 0.0 and data["label"] == "fail"
    criteria = data["analyzeStepResult"]["criteria"]
    assert [(c["description"], c["required"]) for c in criteria] == [
        ("mentions Paris", True), ("uses bullets", True), ("cites a source", False)]
    assert judge_server.requests[0].headers["authorization"] == "Bearer test-key"


def test_score_alignment_table(cli: CliRunner, judge_server: ScriptedJudgeServer) -> None:
    judge_server.script(alignment_answer(user=[1, 1, 0.5, 1], system=[1, 1, 1, 1]))
    result = cli.invoke(main, ["score", "--scorer", "prompt-alignment", "--scale", "10",
                               "--input", "Explain recursion", "--system", "Use Python",
                               "--output", "A function calling itself."])
    assert result.exit_code == 0, result.output
    assert "score 9.3 / 10" in result.output
    assert "user completeness" in result.output and "system intent" in result.output
    assert "Score: 9.3 out of 10 (excellent); mode both" in result.output


def test_score_from_run_file_and_at_files(cli: CliRunner, judge_server: ScriptedJudgeServer,
                                          tmp_path: Path) -> None:
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"input": [{"role": "user", "content": "q"}],
                               "output": {"role": "assistant", "text": "from file"}}))
    rubric = tmp_path / "rubric.txt"
    rubric.write_text("1. first\n2. second\n")
    judge_server.script(rubric_answer([True, True]))
    result = cli.invoke(main, ["score", "--run", str(run), "--criteria", f"@{rubric}", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["score"] == 1.0
    assert "c1: first\nc2: second" in judge_server.requests[0].text
    assert "from file" in judge_server.requests[0].text


def test_judge_failure_exits_1_with_error(cli: CliRunner,
                                          judge_server: ScriptedJudgeServer) -> None:
    judge_server.script(fault(400))
    result = cli.invoke(main, ["score", "--criteria", "x", "--input", "q", "--output", "a"])
    assert result.exit_code == 1
    assert "not scored (request_rejected)" in result.output


def test_a_rejected_key_fails_fast_and_says_what_to_set(
        cli: CliRunner, judge_server: ScriptedJudgeServer) -> None:
    judge_server.script(fault(401, message="Incorrect API key provided"))
    result = cli.invoke(main, ["score", "--criteria", "x", "--input", "q", "--output", "a"])
    assert result.exit_code == 1
    assert "not scored (auth)" in result.output
    assert "was rejected: set" in result.output and "OTEL_SCORERS_JUDGE_API_KEY" in result.output
    assert len(judge_server.requests) == 1  # not retried


def test_a_missing_key_fails_fast_without_a_call(monkeypatch: pytest.MonkeyPatch) -> None:
    from otel_scorers import RubricScorer

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    result = RubricScorer("openai/gpt-5-mini", "- x").run({"input": "q", "output": "a"})
    assert result.error is not None and result.error.type == "auth"
    assert "is missing: set OPENAI_API_KEY or OTEL_SCORERS_JUDGE_API_KEY" in result.error.message
    # once reported as "HTTP 500" after 4 calls and 12 s of backoff
    assert result.judge is not None and result.judge.calls == 1


def test_fail_under(cli: CliRunner, judge_server: ScriptedJudgeServer) -> None:
    judge_server.script(rubric_answer([False]), rubric_answer([True]))
    args = ["score", "--criteria", "x", "--output", "a", "--fail-under", "1", "--json"]
    assert cli.invoke(main, args).exit_code == 1  # below: 1, as a failed judgement
    assert cli.invoke(main, args).exit_code == 0


def test_a_skipped_evaluation_is_never_a_score(cli: CliRunner,
                                               judge_server: ScriptedJudgeServer) -> None:
    # a rubric scorer with no rubric judges nothing: no score, and --fail-under fails
    result = cli.invoke(main, ["score", "--output", "a", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert (data["score"], data["passed"], data["label"], data["skipped"]) == (
        None, None, "skipped", "no_rubric")
    result = cli.invoke(main, ["score", "--output", "a", "--fail-under", "0"])
    assert result.exit_code == 1
    assert "not scored (no_rubric)" in result.output
    assert judge_server.requests == []


@pytest.mark.parametrize(("args", "message"), [
    (["score", "--criteria", "x"], "nothing to score"),
    (["score", "--criteria", "@/no/such/file", "--output", "a"], "cannot read"),
    (["score", "--scorer", "prompt-alignment", "--criteria", "x", "--output", "a"],
     "not an option of the prompt_alignment scorer"),
    (["score", "--scale", "0", "--output", "a"], "'--scale': 0.0 is not in the range"),
    (["score", "--scale", "inf", "--output", "a"], "'--scale'"),
    (["score", "--scale", "nan", "--output", "a"], "not a finite number"),
    (["score", "--timeout", "-1", "--output", "a"], "'--timeout'"),
    (["serve", "--upstream", "http://127.0.0.1:9", "--port", "70000"], "'--port'"),
    (["serve", "--upstream", "http://127.0.0.1:9", "--forward-timeout", "0"],
     "'--forward-timeout'"),
    (["serve", "--upstream", "http://127.0.0.1:9", "--forward-timeout", "-1"],
     "'--forward-timeout'"),
    (["serve", "--upstream", "http://127.0.0.1:9", "--metric-interval", "0"],
     "'--metric-interval'"),
    (["serve", "--upstream", "http://127.0.0.1:9", "--shutdown-timeout", "nan"],
     "not a finite number"),
])
def test_user_mistakes_are_one_line_errors(cli: CliRunner, args: list[str], message: str) -> None:
    result = cli.invoke(main, args)
    assert result.exit_code == 2  # usage and configuration errors
    assert message in result.output
    assert "Traceback" not in result.output


def test_installed_entry_point(judge_server: ScriptedJudgeServer) -> None:
    judge_server.script(rubric_answer([True]))
    env = {**os.environ, "OTEL_SCORERS_JUDGE_MODEL": judge_server.model,
           "OTEL_SCORERS_JUDGE_API_BASE": judge_server.url, "OTEL_SCORERS_JUDGE_API_KEY": "k"}
    exe = Path(sys.executable).with_name("otel-scorers")
    out = subprocess.run([str(exe), "score", "--criteria", "x", "--input", "q", "--output", "a",
                          "--json"], capture_output=True, text=True, env=env, timeout=60,
                         check=False)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["score"] == 1.0


def test_check_config_ping_reports_the_judge(judge_server: ScriptedJudgeServer,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SCORERS_JUDGE_MODEL", judge_server.model)
    monkeypatch.setenv("OTEL_SCORERS_JUDGE_API_BASE", judge_server.url)
    monkeypatch.setenv("OTEL_SCORERS_JUDGE_API_KEY", "k")
    judge_server.script(reply({"ok": True}))
    result = CliRunner().invoke(main, ["check-config", "--ping", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)["ping"]
    assert report["model"] == judge_server.model and report["reachable"] and report["ok"]
    assert report["structured_output"] in ("json_schema", "json_object")
    assert report["latency_s"] >= 0
    assert "ping" in judge_server.requests[0].text
    ok = CliRunner().invoke(main, ["check-config", "--ping"])
    assert ok.exit_code == 1  # nothing scripted: the scripted judge answers 500
    assert "reached, but the call FAILED (server_error)" in ok.output
    judge_server.script(reply({"ok": True}))
    ok = CliRunner().invoke(main, ["check-config", "--ping"])
    assert ok.exit_code == 0 and "OK, it answered" in ok.output
    # its answer, under the tables (over 100 rows): the last line, left above the prompt
    assert 'it answered {"ok":true}' in ok.output
    assert ok.output.index("it answered") > ok.output.index("evaluators (as each result")
    assert "it answered" in ok.output.rstrip().splitlines()[-1]
    # in the configured structured-output mode
    monkeypatch.setenv("OTEL_SCORERS_JUDGE_STRUCTURED_OUTPUT", "prompt")
    judge_server.script(reply({"ok": True}))
    before = len(judge_server.requests)
    prompt = CliRunner().invoke(main, ["check-config", "--ping", "--json"])
    assert prompt.exit_code == 0, prompt.output
    assert json.loads(prompt.output)["ping"]["structured_output"] == "prompt"
    assert "response_format" not in judge_server.requests[before].body
    monkeypatch.delenv("OTEL_SCORERS_JUDGE_STRUCTURED_OUTPUT")
    judge_server.script(fault(401))
    failed = CliRunner().invoke(main, ["check-config", "--ping"])
    assert failed.exit_code == 1
    assert "reached, but the call FAILED (auth)" in failed.output  # a 401 is an answer
    assert "did not answer (auth)" in failed.output


def test_check_config_ping_on_a_dead_judge_exits_1(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support import free_port

    monkeypatch.setenv("OTEL_SCORERS_JUDGE_MODEL", "openai/nothing-there")
    monkeypatch.setenv("OTEL_SCORERS_JUDGE_API_BASE", f"http://127.0.0.1:{free_port()}/v1")
    monkeypatch.setenv("OTEL_SCORERS_JUDGE_API_KEY", "k")
    monkeypatch.setenv("OTEL_SCORERS_JUDGE_TIMEOUT", "2")
    result = CliRunner().invoke(main, ["check-config", "--ping"])
    assert result.exit_code == 1
    assert "NOT reached (connection_error)" in result.output


def _dataset(tmp_path: Path) -> Path:
    records = [
        {"input": "Say hi", "output": "Hello there!"},
        {"input": "Say hi", "output": "go away", "system": "Be polite."},
        {"input": [{"role": "user", "content": "Greet me"}],
         "output": {"role": "assistant", "text": "Hi!"}, "rubric": "- greets"},
    ]
    path = tmp_path / "dataset.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return path


def test_score_a_dataset(cli: CliRunner, judge_server: ScriptedJudgeServer,
                         tmp_path: Path) -> None:
    # the scripted judge fails criterion 2 ("is polite") for the rude answer only
    def respond(request: Any) -> Any:
        return reply(rubric_answer([True, "go away" not in request.text]))

    judge_server.responder = respond
    out = tmp_path / "results.jsonl"
    result = cli.invoke(main, ["score", "--dataset", str(_dataset(tmp_path)), "--criteria",
                               "- greets\n- is polite", "--results", str(out), "--progress",
                               "--fail-under", "0.5"])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(line["line"] for line in lines) == [1, 2, 3]
    by_line = {line["line"]: line for line in lines}
    assert by_line[2]["score"] == 0.0 and by_line[1]["score"] == 1.0
    assert "mean score" in result.output and "0.667 / 1" in result.output
    assert "pass rate" in result.output and "66.7%" in result.output
    assert "fails: is polite" in result.output and "33.3%" in result.output
    assert "3/3" in result.output  # the progress bar
    strict = cli.invoke(main, ["score", "--dataset", str(_dataset(tmp_path)), "--criteria",
                               "- greets\n- is polite", "--fail-under", "0.9"])
    assert strict.exit_code == 1 and "below --fail-under 0.9" in strict.output


def test_a_bad_dataset_record_is_a_one_line_error(cli: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"input": "x", "output": "y"}\n{"input": "x", "outptu": "y"}\n')
    result = cli.invoke(main, ["score", "--dataset", str(path), "--criteria", "x"])
    assert result.exit_code == 2
    assert "bad.jsonl, line 2" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("which", ["http", "grpc"])
def test_serve_on_a_port_in_use_is_one_line_and_exit_2(judge_server: ScriptedJudgeServer,
                                                       which: str) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        ports = (["--port", str(busy), "--grpc-port", "0"] if which == "http"
                 else ["--port", str(free_port()), "--grpc-port", str(busy)])
        env = {**os.environ, "OTEL_SCORERS_JUDGE_MODEL": judge_server.model,
               "OTEL_SCORERS_JUDGE_API_BASE": judge_server.url}
        out = subprocess.run([sys.executable, "-m", "otel_scorers", "serve", "--host", "127.0.0.1",
                              "--upstream", "http://127.0.0.1:9", *ports],
                             capture_output=True, text=True, env=env, timeout=120, check=False)
    assert out.returncode == 2, out.stderr
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and f"127.0.0.1:{busy}" in lines[0], out.stderr
    assert "Traceback" not in out.stderr


def test_serve_with_one_port_for_both_listeners_is_one_line_and_exit_2(
        judge_server: ScriptedJudgeServer) -> None:
    """Issue 35 (the traceback path left in ``serve``): ``--port`` and ``--grpc-port`` the
    same passed the free-port check (each was free alone) and ended in a bind traceback."""
    port = str(free_port())
    env = {**os.environ, "OTEL_SCORERS_JUDGE_MODEL": judge_server.model,
           "OTEL_SCORERS_JUDGE_API_BASE": judge_server.url}
    out = subprocess.run([sys.executable, "-m", "otel_scorers", "serve", "--host", "127.0.0.1",
                          "--upstream", "http://127.0.0.1:9", "--port", port, "--grpc-port",
                          port], capture_output=True, text=True, env=env, timeout=120,
                         check=False)
    assert out.returncode == 2, out.stderr
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "need a port each" in lines[0], out.stderr


def test_a_batch_spool_that_cannot_be_made_is_one_line_and_exit_2(
        judge_server: ScriptedJudgeServer, tmp_path: Path) -> None:
    """A batch lane whose spool directory cannot be created: a usage error naming the
    variable, from ``serve`` (not a traceback, nor a metrics callback's error at exit) and
    a ``ConfigError`` from the processor."""
    from otel_scorers import RubricScorer, ScoringSpanProcessor
    from otel_scorers.errors import ConfigError
    from otel_scorers.judge.client import JudgeClient
    from otel_scorers.pipeline import ScorerSpec

    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    env = {**os.environ, "OTEL_SCORERS_JUDGE_MODEL": "openai/gpt-4o-mini",
           "OTEL_SCORERS_JUDGE_API_BASE": judge_server.url, "OTEL_SCORERS_CANARY": "false",
           "OTEL_SCORERS_BATCH_SCORERS": "rubric",
           "OTEL_SCORERS_BATCH_DIR": str(blocked / "spool")}
    out = subprocess.run([sys.executable, "-m", "otel_scorers", "serve", "--host", "127.0.0.1",
                          "--upstream", "http://127.0.0.1:9", "--port", str(free_port()),
                          "--grpc-port", "0"], capture_output=True, text=True, env=env,
                         timeout=120, check=False)
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr and "OTEL_SCORERS_BATCH_DIR" in out.stderr, out.stderr
    judge = JudgeClient("openai/gpt-4o-mini", api_base=judge_server.url, api_key="k")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OTEL_SCORERS_BATCH_DIR", str(blocked / "spool"))
        with pytest.raises(ConfigError, match="OTEL_SCORERS_BATCH_DIR"):
            ScoringSpanProcessor([ScorerSpec(RubricScorer(judge, "- x"), lane="batch")])


def test_ping_through_the_direct_transport_never_loads_litellm(
        judge_server: ScriptedJudgeServer) -> None:
    """``--ping`` takes a judge's own time, not litellm's import (seconds)."""
    judge_server.script(reply({"ok": True}))
    code = ("import sys; from otel_scorers.cli import main; "
            "sys.argv = ['otel-scorers', 'check-config', '--ping']\n"
            "try:\n    main()\nexcept SystemExit as done:\n"
            "    print('exit', done.code, 'litellm' in sys.modules)")
    env = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    env.update(OTEL_SCORERS_JUDGE_MODEL=judge_server.model,
               OTEL_SCORERS_JUDGE_API_BASE=judge_server.url, OTEL_SCORERS_JUDGE_API_KEY="k")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.stdout.strip().splitlines()[-1] == "exit 0 False", done.stdout + done.stderr


def test_check_config_never_prints_a_url_credential(monkeypatch: pytest.MonkeyPatch) -> None:
    """Passwords in the MLflow tracking URI, the judge base URL and the session forward
    endpoint (and secrets in their query strings) are masked in the table, in --json and in
    the line that says a variable is bad."""
    secrets = ("s3cr3t-mlflow", "s3cr3t-judge", "s3cr3t-fleet", "s3cr3t-query")
    monkeypatch.setenv("OTEL_SCORERS_MLFLOW_TRACKING_URI",
                       "http://ml:s3cr3t-mlflow@127.0.0.1:5000")
    monkeypatch.setenv("OTEL_SCORERS_JUDGE_MODEL", "openai/x")
    monkeypatch.setenv("OTEL_SCORERS_JUDGE_API_BASE",
                       "http://me:s3cr3t-judge@127.0.0.1:1/v1?key=s3cr3t-query")
    monkeypatch.setenv("OTEL_SCORERS_SESSION_FORWARD",
                       "https://gw:s3cr3t-fleet@127.0.0.1:4318")
    monkeypatch.setenv("COLUMNS", "1000")  # a table row whole on one line: nothing folded
    for args in (["check-config"], ["check-config", "--json"]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, result.output
        assert "127.0.0.1:5000" in result.output and "****" in result.output
        for secret in secrets:
            assert secret not in result.output, (args, secret)
    monkeypatch.setenv("OTEL_SCORERS_SESSION_FORWARD", "ftp://gw:s3cr3t-fleet@127.0.0.1:21")
    result = CliRunner().invoke(main, ["check-config"])
    assert result.exit_code == 2 and "OTEL_SCORERS_SESSION_FORWARD" in result.output
    assert "s3cr3t-fleet" not in result.output


def test_a_dataset_piped_into_head_stops_at_once_without_a_traceback(
        judge_server: ScriptedJudgeServer, tmp_path: Path) -> None:
    """``score --dataset | head -1``: once the reader is gone, no more judge calls and no
    tracebacks; one line on stderr says why it stopped."""
    import os
    import subprocess
    import sys

    from otel_scorers.testing import judge_responder

    judge_server.responder = judge_responder(delay_s=0.05)
    dataset = tmp_path / "runs.jsonl"
    dataset.write_text("".join(json.dumps({"input": f"q{i}", "output": f"a{i}",
                                           "rubric": "- answers"}) + "\n"
                               for i in range(200)))
    errors = tmp_path / "stderr.txt"
    env = {**os.environ, "OTEL_SCORERS_JUDGE_MODEL": judge_server.model,
           "OTEL_SCORERS_JUDGE_API_BASE": judge_server.url, "OTEL_SCORERS_JUDGE_API_KEY": "k"}
    command = (f"{sys.executable} -m otel_scorers score --dataset {dataset} --concurrency 4 "
               f"2>{errors} | head -1")
    finished = subprocess.run(["bash", "-c", command], env=env, capture_output=True,
                              text=True, timeout=120, check=False)
    assert finished.stdout.count("\n") == 1 and '"line"' in finished.stdout
    said = errors.read_text()
    assert "Traceback" not in said and "Exception ignored" not in said, said
    assert "Stopped: the output was closed" in said
    assert len(judge_server.requests) <= 40, len(judge_server.requests)  # not all 200


def test_an_empty_rubric_file_is_a_usage_error_not_a_score(tmp_path: Path) -> None:
    """A rubric file that came out empty (a bad path in a script, a truncated file) is
    exit 2 before any call, never "nothing was judged, score 1" with exit 0."""
    empty = tmp_path / "rubric.md"
    empty.write_text("\n  \n")
    result = CliRunner().invoke(main, ["score", "--criteria", f"@{empty}", "--input", "Hi?",
                                       "--output", "Hello.", "--model", "openai/x",
                                       "--api-base", "http://127.0.0.1:9/v1"])
    assert result.exit_code == 2, result.output
    assert f"--criteria @{empty}: it is empty" in result.output


def test_a_demo_whose_judge_fails_says_so_and_exits_1(tmp_path: Path) -> None:
    """The summary counts what was scored and what failed, and why; the checks (decided in
    code) are true without a judge; nothing judged is exit 1, never "3 agent runs scored"."""
    from tests.support import free_port

    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update({"OTEL_SCORERS_JUDGE_MODEL": "openai/nothing-there", "COLUMNS": "1000",
                "OTEL_SCORERS_JUDGE_API_BASE": f"http://127.0.0.1:{free_port()}/v1",
                "OTEL_SCORERS_JUDGE_API_KEY": "k"})
    out = subprocess.run([sys.executable, "-m", "otel_scorers", "demo", "--telemetry-file",
                          str(tmp_path / "demo.jsonl")], capture_output=True, text=True,
                         env=env, timeout=300, check=False)
    assert out.returncode == 1, out.stdout + out.stderr
    assert ("0 of 3 agent runs scored by all 3 scorers" in out.stdout
            and "rubric 0, not: error 3 (connection_error)" in out.stdout
            and "checks 3)" in out.stdout), out.stdout
    assert "the judge scored no run" in out.stderr
    assert "Traceback" not in out.stderr
