"""``rescore`` with the agent scorers, on telemetry a real framework recorded (pydantic-ai):
code scorers make no judge call, and ``--dry-run`` says so."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from otel_scorers.cli import main
from otel_scorers.testing import ScriptedJudgeServer, judge_responder

RECORDED = Path(__file__).resolve().parents[1] / "frameworks" / "recorded"


def test_rescore_scores_trajectories_checks_and_groundedness(
        judge_server: ScriptedJudgeServer, tmp_path: Path) -> None:
    judge_server.responder = judge_responder()
    config = tmp_path / "scorers.yaml"
    config.write_text(json.dumps({
        "judge": {"model": judge_server.model, "api_base": judge_server.url, "api_key": "k"},
        "scorers": [{"type": "trajectory", "expected": ["get_weather"], "max_steps": 1},
                    {"type": "checks", "checks": ["called_tool get_weather", "no_loops 2"]},
                    {"type": "faithfulness"}]}))
    source = str(RECORDED / "pydantic_ai-native-content.jsonl.gz")
    result = CliRunner().invoke(main, ["rescore", source, "--config", str(config)])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    by_scorer: dict[str, list[float]] = {}
    for line in lines:
        by_scorer.setdefault(line["scorer"], []).append(line["score"])
    assert by_scorer == {"trajectory": [1.0] * 3, "checks": [1.0] * 3,
                         "faithfulness": [1.0] * 3}
    assert len(judge_server.requests) == 3  # faithfulness only: the code scorers call no judge
    dry = CliRunner().invoke(main, ["rescore", source, "--config", str(config), "--dry-run"])
    plan = json.loads(dry.stdout[dry.stdout.index("{"):])
    assert plan["judge_calls"] == 3, plan
