"""``rescore`` judges the sessions of exported files too: each once, whole, after the files are
read (the turns of a session are in different traces, anywhere in the files); the result lines
say which turns they cover; a second run over the same output judges nothing again; a dry run
counts the session calls."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_scorers.cli import main
from otel_scorers.otlp import request_to_json
from otel_scorers.testing import ScriptedJudgeServer, judge_responder
from tests.support import genai_attributes

pytestmark = pytest.mark.timeout(180)


def _file(tmp_path: Path, sessions: dict[str, int], lonely: int = 2, *,
          interleaved: bool = True) -> Path:
    """Conversations (key -> turns), each turn its own trace (the sessions interleaved, or one
    after the other), and runs without a session, written as OTLP JSON lines, one request per
    trace."""
    provider = TracerProvider()
    exported = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exported))
    tracer = provider.get_tracer("app")
    order = ([(key, turn) for turn in range(1, max(sessions.values()) + 1)
              for key, turns in sessions.items() if turn <= turns] if interleaved else
             [(key, turn) for key, turns in sessions.items() for turn in range(1, turns + 1)])
    for key, turn in order:
        with tracer.start_as_current_span("invoke_agent", attributes=genai_attributes(
                prompt=f"{key} q{turn}", answer=f"{key} a{turn}",
                **{"gen_ai.conversation.id": key})):
            pass
    for i in range(lonely):
        with tracer.start_as_current_span("invoke_agent", attributes=genai_attributes(
                prompt=f"alone {i}")):
            pass
    path = tmp_path / "traces.jsonl"
    path.write_text("".join(request_to_json(encode_spans([span])) + "\n"
                            for span in exported.get_finished_spans()))
    return path


def _config(tmp_path: Path, server: ScriptedJudgeServer, **sessions: Any) -> Path:
    path = tmp_path / "scorers.yaml"
    path.write_text(json.dumps({
        "judge": {"model": server.model, "api_base": server.url, "api_key": "k",
                  "timeout_s": 5},
        "scorers": [{"type": "rubric", "criteria": ["greets the user"]},
                    {"type": "multi_turn", "name": "conversation"}],
        "sessions": sessions}))
    return path


def test_rescore_judges_each_session_once_whole_and_resumes(
        tmp_path: Path, judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder()
    traces = _file(tmp_path, {"a": 3, "b": 1, "c": 4})
    config = _config(tmp_path, judge_server)
    out = tmp_path / "results.jsonl"
    result = CliRunner().invoke(main, ["rescore", str(traces), "--config", str(config),
                                       "-o", str(out), "--no-progress", "--include-run"])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in out.read_text().splitlines()]
    turns = [r for r in records if r["scorer"] == "rubric"]
    sessions = {r["session"]["id"]: r for r in records if r["scorer"] == "conversation"}
    assert len(turns) == 10  # every interaction, as before
    assert set(sessions) == {"a", "b", "c"}
    assert [(sessions[k]["session"]["first_turn"], sessions[k]["session"]["last_turn"])
            for k in "abc"] == [(1, 3), (1, 1), (1, 4)]
    assert all(r["score"] == 1.0 and r["label"] == "pass" for r in sessions.values())
    transcripts = [text for request in judge_server.requests
                   for name, text in request.fields.items() if name.startswith("conversation")]
    assert len(transcripts) == 3  # one judge call per session
    (c,) = [t for t in transcripts if "c q1" in t]
    assert all(f"Turn {n} - user: c q{n}" in c for n in range(1, 5))
    # each on its session's last turn: that interaction's trace and span
    (last,) = [r for r in turns if r["run"]["input"] == "c q4"]
    assert (sessions["c"]["trace_id"], sessions["c"]["span_id"]) == (last["trace_id"],
                                                                     last["span_id"])
    assert "13 scored" in result.output
    assert "3 sessions judged whole" in " ".join(result.output.split())
    calls = len(judge_server.requests)
    again = CliRunner().invoke(main, ["rescore", str(traces), "--config", str(config),
                                      "-o", str(out), "--no-progress"])
    assert again.exit_code == 0, again.output
    assert len(judge_server.requests) == calls  # all judged: nothing again


def test_a_dry_run_counts_the_sessions_and_their_calls(
        tmp_path: Path, judge_server: ScriptedJudgeServer) -> None:
    traces = _file(tmp_path, {"a": 2, "b": 2})
    config = _config(tmp_path, judge_server)
    result = CliRunner().invoke(main, ["rescore", str(traces), "--config", str(config),
                                       "--dry-run"])
    assert result.exit_code == 0, result.output
    estimate = json.loads(result.stdout[result.stdout.index("{"):])
    assert estimate["runs"] == 6 and estimate["sessions"] == 2
    assert estimate["judge_calls"] == 6 + 2  # a rubric call per run, one per session
    assert not judge_server.requests


def test_the_bounds_apply_offline_and_a_session_making_room_is_judged_with_what_it_has(
        tmp_path: Path, judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder()
    traces = _file(tmp_path, {"a": 5, "b": 2, "c": 2}, lonely=0, interleaved=False)
    config = _config(tmp_path, judge_server, max_turns=3, max_sessions=2)
    out = tmp_path / "results.jsonl"
    result = CliRunner().invoke(main, ["rescore", str(traces), "--config", str(config),
                                       "-o", str(out), "--no-progress", "--concurrency", "1"])
    assert result.exit_code == 0, result.output
    records = {json.loads(line)["session"]["id"]: json.loads(line)["session"]
               for line in out.read_text().splitlines()
               if json.loads(line)["scorer"] == "conversation"}
    # "a" kept its first turn and its last two (max_turns 3), and made room for "c" (room
    # for two sessions): judged then, with what it had; "b" and "c" at the end
    assert records["a"] == {"id": "a", "scope": "unknown_service:python", "first_turn": 1,
                            "last_turn": 5, "turns": 3, "dropped_turns": 2}
    assert records["b"]["turns"] == records["c"]["turns"] == 2
    assert len(judge_server.requests) == 9 + 3  # a rubric call per run, one per session
