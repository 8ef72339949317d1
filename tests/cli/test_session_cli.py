"""Sessions outside live scoring: ``score --scorer multi_turn`` on a conversation (a run file
with ``turns``, or a dataset of them), the rubric judging a conversation's last answer in its
light, and the session settings from the environment alone (zero-code)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from otel_scorers.cli import main
from otel_scorers.testing import ScriptedJudgeServer, judge_responder

CONVERSATION = {"session_id": "s-1", "system": "You book flights.", "turns": [
    {"user": "I need a flight to Paris on Friday, window seat please.",
     "assistant": "Which airport do you leave from?"},
    {"user": "From Berlin.", "assistant": "Booked: Berlin to Paris, Friday, window seat 12A."}]}


def judge_args(server: ScriptedJudgeServer) -> list[str]:
    return ["--model", server.model, "--api-base", server.url, "--api-key", "k"]


def test_score_judges_a_conversation_with_the_multi_turn_scorer(
        judge_server: ScriptedJudgeServer, tmp_path: Path) -> None:
    judge_server.responder = judge_responder(satisfied=lambda i, _t: i == 1)
    run = tmp_path / "conversation.json"
    run.write_text(json.dumps(CONVERSATION))
    result = CliRunner().invoke(main, ["score", "--scorer", "multi-turn", "--run", str(run),
                                       "--json", *judge_args(judge_server)])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    criteria = {c["id"]: c["satisfied"] for c in out["analyzeStepResult"]["criteria"]}
    assert criteria == {"goal_completion": True, "knowledge_retention": False}  # built-ins
    assert out["score"] == 0.0 and out["label"] == "fail"
    fields = judge_server.requests[-1].fields
    transcript = fields["conversation (2 turns)"]
    assert "Turn 1 - user: I need a flight to Paris" in transcript
    assert "Turn 2 - assistant: Booked: Berlin to Paris" in transcript
    assert fields["agent instructions"] == "You book flights."


def test_a_dataset_of_conversations_and_the_rubric_in_their_light(
        judge_server: ScriptedJudgeServer, tmp_path: Path) -> None:
    judge_server.responder = judge_responder()
    dataset = tmp_path / "conversations.jsonl"
    dataset.write_text(json.dumps(CONVERSATION) + "\n" + json.dumps(
        {**CONVERSATION, "session_id": "s-2"}) + "\n")
    result = CliRunner().invoke(main, ["score", "--scorer", "multi_turn", "--criteria",
                                       "- keeps the seat preference", "--dataset", str(dataset),
                                       *judge_args(judge_server)])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["score"] for line in lines] == [1.0, 1.0]
    rubric = CliRunner().invoke(main, ["score", "--criteria", "- confirms the window seat",
                                       "--run", str(_write(tmp_path, CONVERSATION)), "--json",
                                       *judge_args(judge_server)])
    assert rubric.exit_code == 0, rubric.output
    fields = judge_server.requests[-1].fields
    assert fields["user's goal (their opening turns)"].startswith("Turn 1: I need a flight")
    assert fields["agent response (turn 2)"].startswith("Booked")


def _write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "run.json"
    path.write_text(json.dumps(data))
    return path


def test_zero_code_session_scoring_from_the_environment(
        judge_server: ScriptedJudgeServer) -> None:
    """``opentelemetry-instrument`` with OTEL_SCORERS_* only: a multi-turn scorer, the session
    key read from an attribute of the application's own, judged at exit."""
    judge_server.responder = judge_responder()
    script = (
        "import json\n"
        "from opentelemetry import trace\n"
        "for turn in range(3):\n"
        "    attributes = {'gen_ai.operation.name': 'invoke_agent', 'app.chat_id': 'c-7',\n"
        "        'gen_ai.input.messages': json.dumps([{'role': 'user', 'content': f'q{turn}'}]),\n"
        "        'gen_ai.output.messages': json.dumps([{'role': 'assistant',\n"
        "                                              'content': f'a{turn}'}])}\n"
        "    with trace.get_tracer('app').start_as_current_span('invoke_agent bot',\n"
        "                                                      attributes=attributes):\n"
        "        pass\n")
    env = {**os.environ, "OTEL_SCORERS_ENABLED": "true",
           "OTEL_SCORERS_JUDGE_MODEL": judge_server.model,
           "OTEL_SCORERS_JUDGE_API_BASE": judge_server.url, "OTEL_SCORERS_JUDGE_API_KEY": "k",
           "OTEL_SCORERS_SCORERS": "multi_turn", "OTEL_SCORERS_SESSION_KEY": "app.chat_id",
           "OTEL_SCORERS_SESSION_IDLE_S": "3600", "OTEL_TRACES_EXPORTER": "console",
           "OTEL_METRICS_EXPORTER": "none", "OTEL_LOGS_EXPORTER": "none",
           "OTEL_SERVICE_NAME": "chat-app"}
    instrument = Path(sys.executable).with_name("opentelemetry-instrument")
    out = subprocess.run([str(instrument), sys.executable, "-c", script], env=env,
                         capture_output=True, text=True, timeout=180, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    assert '"name": "gen_ai.evaluation multi_turn"' in out.stdout, out.stderr[-3000:]
    assert '"otel_scorers.session.id": "c-7"' in out.stdout
    assert '"otel_scorers.session.turns": 3' in out.stdout
    assert '"otel_scorers.session.trigger": "exit"' in out.stdout
