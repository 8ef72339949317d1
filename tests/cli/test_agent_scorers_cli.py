"""``otel-scorers score`` with the agent scorers: a run file or dataset records carrying the
run's steps; code scorers need no judge; options of another scorer are usage errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from otel_scorers.cli import main
from otel_scorers.testing import ScriptedJudgeServer, judge_responder

RUN = {"input": "What is the weather in Paris?", "output": "It is sunny and 21 C in Paris.",
       "steps": [{"kind": "llm", "name": "gpt", "input_tokens": 40, "output_tokens": 9},
                 {"kind": "tool", "name": "get_weather", "arguments": '{"city": "Paris"}',
                  "result": "Paris: sunny, 21 C"}],
       "tools": [{"name": "get_weather", "description": "Weather in a city"}]}


def score(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["score", *args])
    return result.exit_code, result.stdout, result.stderr


def test_trajectory_and_checks_from_a_run_file_need_no_judge(tmp_path: Path) -> None:
    run = tmp_path / "run.json"
    run.write_text(json.dumps(RUN))
    code, out, _ = score("--scorer", "trajectory", "--expected", "get_weather", "--run", str(run),
                         "--json")
    assert code == 0 and json.loads(out)["score"] == 1.0
    code, out, _ = score("--scorer", "trajectory", "--expected", "book_flight", "--run",
                         str(run), "--json", "--fail-under", "1")
    assert code == 1 and json.loads(out)["analyzeStepResult"]["missingSteps"] == ["book_flight"]
    code, out, _ = score("--scorer", "checks", "--check", "called_tool get_weather",
                         "--check", "excludes sorry", "--run", str(run), "--json")
    assert code == 0 and json.loads(out)["label"] == "pass"


def test_faithfulness_and_tool_use_from_a_dataset(judge_server: ScriptedJudgeServer,
                                                  tmp_path: Path) -> None:
    judge_server.responder = judge_responder()
    dataset = tmp_path / "runs.jsonl"
    made_up = {**RUN, "output": "It is sunny and 35 C in Paris."}
    no_tools = {"input": "Hi", "output": "Hello!", "steps": [{"kind": "llm", "name": "gpt"}]}
    dataset.write_text("\n".join(json.dumps(r) for r in (RUN, made_up, no_tools)) + "\n")
    judge = ["--model", judge_server.model, "--api-base", judge_server.url, "--api-key", "k"]
    _, out, err = score("--scorer", "faithfulness", "--dataset", str(dataset), *judge)
    lines = sorted((json.loads(line) for line in out.splitlines()), key=lambda x: x["line"])
    assert [line["score"] for line in lines] == [1.0, 0.0, None], err
    assert lines[2]["skipped"] == "no_context"
    assert "fails: It is" not in err  # claims are about one run: not summarised as criteria
    _, out, err = score("--scorer", "tool-use", "--dataset", str(dataset), *judge)
    lines = sorted((json.loads(line) for line in out.splitlines()), key=lambda x: x["line"])
    assert [line.get("skipped") for line in lines] == [None, None, "no_tools"], err
    assert "fails: get_weather" in err
    request = next(r for r in judge_server.requests if "tool calls" in r.fields)
    assert request.fields["available tools"] == "get_weather: Weather in a city"


def test_an_option_of_another_scorer_is_a_usage_error() -> None:
    code, _, err = score("--scorer", "tool_use", "--expected", "x", "--output", "a")
    assert code == 2 and "--expected: not an option of the tool_use scorer" in err
    code, _, err = score("--scorer", "checks", "--output", "a")
    assert code == 2 and "needs --check" in err
    code, _, err = score("--scorer", "checks", "--check", "fly_to_moon", "--output", "a")
    assert code == 2 and "unknown check" in err


def test_check_config_shows_each_scorer_with_its_own_options(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from otel_scorers.config import load_settings

    monkeypatch.setenv("OTEL_SCORERS_SCORERS", "trajectory,faithfulness")
    monkeypatch.setenv("OTEL_SCORERS_TRAJECTORY_EXPECTED", "lookup,refund")
    result = CliRunner().invoke(main, ["check-config"])
    assert result.exit_code == 0, result.output
    shown = load_settings().settings.model_dump(mode="json")["scorers"]
    assert shown[0]["expected"] == ["lookup", "refund"] and "context" in shown[1]
    assert not {"evaluation_mode", "criteria"} & {key for s in shown for key in s}
    monkeypatch.delenv("OTEL_SCORERS_SCORERS")
    result = CliRunner().invoke(main, ["check-config"])
    assert result.exit_code == 2 and "no configured scorer takes expected" in result.output
