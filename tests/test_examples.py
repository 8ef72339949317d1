"""The example scripts run as they are (against the scripted judge)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

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


@pytest.mark.slow
def test_rubric_per_agent_example(judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder(satisfied=lambda i, _text: i == 1)
    out = run_example("rubric_per_agent.py", judge_server)
    assert out.returncode == 0, out.stderr
    texts = [request.text for request in judge_server.requests]
    assert len(texts) == 4
    # each agent was judged against its own rubric, the span's own rubric winning
    assert any("Quotes the invoice number" in t and "refund deadline" in t for t in texts)
    assert any("Gives concrete steps" in t for t in texts)
    assert any("Answers the question asked" in t and "EU region" in t for t in texts)
    assert any("Says how to switch it on" in t and "dark mode" in t for t in texts)
    assert "billing-bot: fail (quotes_the_invoice_number=yes, " \
           "states_the_refund_deadline=no)" in out.stdout
    assert "sales-bot: pass (answers_the_question_asked=yes)" in out.stdout


@pytest.mark.slow
def test_custom_scorer_example(judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder()
    out = run_example("custom_scorer.py", judge_server)
    assert out.returncode == 0, out.stderr
    assert "citations: 1 pass - Cites a source" in out.stdout
    assert "citations: 0.5 fail - Does not cite a source" in out.stdout
    stats = json.loads(out.stdout.split("decisions:", 1)[1].splitlines()[0])
    assert stats["citations"] == {"selected": 2, "scored": 2}
    assert stats["rubric"] == {"selected": 2, "scored": 2}
    assert len(judge_server.requests) == 2  # only the rubric calls the judge


@pytest.mark.slow
def test_offline_scoring_example(judge_server: ScriptedJudgeServer, tmp_path: Any) -> None:
    judge_server.responder = judge_responder(user=(0.5, 0.5, 0.5, 0.5))
    out = run_example("offline_scoring.py", judge_server, "-o", str(tmp_path / "r.jsonl"))
    assert out.returncode == 0, out.stderr
    assert len(judge_server.requests) == 6  # 3 runs x 2 scorers
    assert "mean prompt_alignment: " in out.stdout and "mean rubric: 1.00 over 3 runs" in out.stdout
    lines = (tmp_path / "r.jsonl").read_text().splitlines()
    assert len(lines) == 6 and all(json.loads(line)["score"] is not None for line in lines)


@pytest.mark.slow
def test_self_correction_example(judge_server: ScriptedJudgeServer) -> None:
    # the judge holds the second criterion unmet until the answer says to deploy the new key
    judge_server.responder = lambda request: judge_responder(
        satisfied=lambda i, _t: i != 2 or "deploy it to every service" in request.text)(request)
    out = run_example("self_correction.py", judge_server)
    assert out.returncode == 0, out.stderr
    assert "step 1: fail" in out.stdout and "feedback:" in out.stdout
    assert "step 2: pass" in out.stdout
    assert "complete: True after 2 step(s)" in out.stdout
    assert len(judge_server.requests) == 2


@pytest.mark.slow
def test_compare_prompts_example(judge_server: ScriptedJudgeServer) -> None:
    def respond(request: Any) -> Any:
        concise = "Rise & Crumb" in request.text or "Remove startup apps" in request.text \
            or "that server's address" in request.text
        scores = (1.0, 1.0, 0.9, 1.0) if concise else (0.5, 0.3, 0.4, 0.6)
        return judge_responder(user=scores, system=scores)(request)
    judge_server.responder = respond
    out = run_example("compare_prompts.py", judge_server)
    assert out.returncode == 0, out.stderr
    ranking = out.stdout.split("\n\n")[-1]
    assert ranking.index("1. concise-v2") < ranking.index("2. friendly-v1")
    assert len(judge_server.requests) == 6
