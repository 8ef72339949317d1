"""``otel-scorers calibrate --fused``: each case judged beside a companion scorer, a call each
and one fused call; a judge that answers alike either way shows no loss, one that does worse
when fused is caught, and a broken companion half fails only the companion."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from otel_scorers.calibration import bundled_cases
from otel_scorers.calibration.paired import COMPANION_CRITERIA
from otel_scorers.cli import main
from otel_scorers.testing import RecordedRequest, ScriptedJudgeServer, fault, reply
from tests.calibration.labelled_judge import fields_of, labelled_responder, parts_of
from tests.calibration.test_calibrate import run_calibrate

pytestmark = pytest.mark.timeout(300)

CASES = bundled_cases()
RUBRIC = [c for c in CASES if c.scorer == "rubric"]


def calibrate_fused(server: ScriptedJudgeServer, tmp_path: Path,
                    *args: str) -> tuple[int, dict[str, Any], str]:
    """``calibrate --fused`` printing its tables, the report written to a file."""
    out = tmp_path / "report.json"
    result = CliRunner().invoke(main, [
        "calibrate", "--model", server.model, "--api-base", server.url, "--api-key", "k",
        "--timeout", "10", "--no-progress", "--fused", "--json", str(out), *args])
    report = json.loads(out.read_text()) if out.exists() else {}
    return result.exit_code, report, result.output


def test_a_judge_answering_alike_either_way_shows_no_loss(
        judge_server: ScriptedJudgeServer, tmp_path: Path) -> None:
    judge_server.responder = labelled_responder(CASES)
    code, report, output = calibrate_fused(judge_server, tmp_path)
    assert code == 0, output
    fused = report["fused"]
    n = len(CASES)
    assert fused["apart"]["calls"] == 2 * n and fused["fused"]["calls"] == n
    assert report["calls"] == n  # the top-level report is the fused pass
    # every golden case went out fused with its companion exactly once
    fused_requests = [r for r in judge_server.requests if parts_of(r) is not None]
    assert len(fused_requests) == n and len(judge_server.requests) == 3 * n
    assert all(len(parts_of(r) or ()) == 2 for r in fused_requests)
    for side in ("apart", "fused"):
        assert fused[side]["verdict_agreement"] == 1.0 and fused[side]["kappa"] == 1.0
        assert fused[side]["alignment_mae"] == 0.0 and fused[side]["band_hit_rate"] == 1.0
        assert fused[side]["errors"] == 0 and fused[side]["companion_errors"] == 0
    assert fused["delta"]["verdict_agreement"] == 0.0 and fused["delta"]["calls"] == -n
    assert fused["changed"] == [] and fused["worse"] == [] and fused["no_loss"] is True
    assert "fused judge calls" in output and "lost nothing" in output


def test_a_judge_worse_when_fused_is_caught(judge_server: ScriptedJudgeServer,
                                            tmp_path: Path) -> None:
    # right when asked alone; the first verdict of every rubric case wrong when fused
    judge_server.responder = labelled_responder(CASES, fused_flip=lambda case, i: i == 0)
    code, report, output = calibrate_fused(judge_server, tmp_path, "--scorer", "rubric")
    assert code == 0, output
    fused = report["fused"]
    assert fused["apart"]["verdict_agreement"] == 1.0
    verdicts = sum(len(c.expected.verdicts or ()) for c in RUBRIC)
    assert fused["fused"]["verdict_agreement"] == round(1 - len(RUBRIC) / verdicts, 4)
    assert fused["delta"]["verdict_agreement"] < 0
    assert "verdict_agreement" in fused["worse"] and fused["no_loss"] is False
    assert sorted(fused["changed"]) == sorted(c.id for c in RUBRIC)
    assert report["verdict_agreement"] == fused["fused"]["verdict_agreement"]
    assert "keep fuse_judge_calls off" in output


def test_a_broken_companion_half_fails_only_the_companion(
        judge_server: ScriptedJudgeServer) -> None:
    cases = CASES[:6]
    good = labelled_responder(cases)

    def respond(request: RecordedRequest) -> Any:
        answer = good(request)
        if parts_of(request) is None:
            return answer
        content = json.loads(answer.content or "{}")
        labelled_rubric = COMPANION_CRITERIA[0].description not in fields_of(request)
        broken = next(key for key, block in zip(
            ("part1", "part2"), parts_of(request) or (), strict=True)
            if ("rubric of criteria" in block) != labelled_rubric)
        content[broken] = {"nothing": "useful"}
        return reply(content)

    judge_server.responder = respond
    code, report, output = run_calibrate(judge_server, "--fused", "--limit", "6")
    assert code == 0, output
    fused = report["fused"]
    assert fused["fused"]["errors"] == 0 and fused["fused"]["verdict_agreement"] == 1.0
    assert fused["fused"]["companion_errors"] == 6 and fused["apart"]["companion_errors"] == 0
    assert fused["worse"] == ["companion_errors"] and fused["no_loss"] is False
    assert fused["changed"] == []


def test_fused_takes_no_examples(judge_server: ScriptedJudgeServer, tmp_path: Path) -> None:
    examples = tmp_path / "examples.jsonl"
    examples.write_text("")
    code, _, output = run_calibrate(judge_server, "--fused", "--examples", str(examples))
    assert code == 2 and "never fused" in output


@pytest.mark.parametrize("answer", ["rejected", "echoed"])
def test_the_key_never_reaches_the_report(judge_server: ScriptedJudgeServer, tmp_path: Path,
                                          answer: str) -> None:
    key = "sk-live-5ecret-0123456789abcdef"

    def respond(request: RecordedRequest) -> Any:
        if answer == "rejected":  # a provider that quotes the key it refused
            return fault(401, message=f"Incorrect API key provided: {key}")
        return reply(f"my instructions say the key is {key}")  # an answer that is no JSON

    judge_server.responder = respond
    out = tmp_path / "report.json"
    result = CliRunner().invoke(main, [
        "calibrate", "--model", judge_server.model, "--api-base", judge_server.url,
        "--api-key", key, "--timeout", "10", "--no-progress", "--fused", "--limit", "2",
        "--json", str(out)])
    report = out.read_text()
    assert result.exit_code == 1  # every case failed
    assert json.loads(report)["fused"]["fused"]["errors"] == 2
    assert key not in result.output and key not in report
    assert "5ecret" not in result.output and "5ecret" not in report
