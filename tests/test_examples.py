"""The example scripts run as they are (against the scripted judge)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from otel_scorers.testing import ScriptedJudgeServer, judge_responder

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run_example(name: str, server: ScriptedJudgeServer, *args: str,
                **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "OTEL_SCORERS_JUDGE_MODEL": server.model,
                "OTEL_SCORERS_JUDGE_API_BASE": server.url, "OTEL_SCORERS_JUDGE_API_KEY": "k",
                **env}
    full_env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    return subprocess.run([sys.executable, str(EXAMPLES / name), *args], capture_output=True,
                          text=True, env=full_env, timeout=180, check=False)


@pytest.mark.slow
def test_live_agent_example(judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder()
    out = run_example("live_agent.py", judge_server)
    assert out.returncode == 0, out.stderr
    assert "Q: How do I reset my password?" in out.stdout
    stats = json.loads(out.stdout.split("decisions per scorer:", 1)[1].splitlines()[0])
    assert stats == {"rubric": {"selected": 3, "scored": 3},
                     "prompt_alignment": {"selected": 3, "scored": 3}}
    assert '"name": "gen_ai.evaluation rubric"' in out.stdout  # console span exporter
    assert '"otel_scorers.evaluations"' in out.stdout or "otel_scorers.evaluations" in out.stdout
    assert len(judge_server.requests) == 6
