"""The judge drift alert live (issue 36.1): an application's canaries judged by a scripted
judge that changes behaviour mid-run (it starts passing the failing cases), scraped by real
Prometheus with the shipped rules, their windows shortened for a test that lasts a minute
(6 h -> 15 s, 7 d -> 10 min, ``for: 30m`` -> 0 s, 16 verdicts -> 8): the canary agreement
drops and ``OtelScorersJudgeDrift`` fires for that scorer and judge model, not before."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from otel_scorers.calibration import bundled_cases
from otel_scorers.testing import ScriptedJudgeServer
from tests.binaries import CONFIG, eventually, get_json, prometheus
from tests.calibration.labelled_judge import labelled_responder
from tests.support import free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

HERE = Path(__file__).parent
CASES = bundled_cases()


def short_rules(work: Path) -> Path:
    text = (CONFIG / "prometheus" / "otel-scorers.rules.yml").read_text()
    for long, short in (("[6h]", "[15s]"), ("[7d]", "[10m]"),
                        ("canary_verdicts:increase6h >= 16", "canary_verdicts:increase6h >= 8")):
        assert long in text, long
        text = text.replace(long, short)
    drift = text.index("alert: OtelScorersJudgeDrift")
    cut = text.index("for: 30m", drift)
    text = text[:cut] + "for: 0s" + text[cut + len("for: 30m"):]
    path = work / "rules.yml"
    path.write_text(text)
    return path


def alerts(base: str) -> list[dict[str, Any]]:
    return [a for a in get_json(f"{base}/api/v1/alerts")["data"]["alerts"]
            if a["labels"]["alertname"] == "OtelScorersJudgeDrift" and a["state"] == "firing"]


def agreement(base: str) -> float | None:
    result = get_json(f"{base}/api/v1/query", query="otel_scorers:canary_agreement:ratio6h")
    values = [float(r["value"][1]) for r in result["data"]["result"]]
    return values[0] if values else None


def test_a_judge_that_changes_makes_the_drift_alert_fire(
        judge_server: ScriptedJudgeServer, tmp_path: Path) -> None:
    judge_server.responder = labelled_responder(CASES)  # the judge as measured
    port = free_port()
    app = subprocess.Popen([sys.executable, str(HERE / "canary_app.py"), judge_server.url,
                            str(port)], stdout=subprocess.PIPE, text=True)
    try:
        assert app.stdout is not None and app.stdout.readline().strip() == "ready"
        with prometheus(tmp_path, {"canary-app": f"127.0.0.1:{port}"}, honor_labels=False,
                        rules=short_rules(tmp_path)) as base:
            eventually(lambda: (agreement(base) or 0) >= 0.99, timeout_s=90,
                       what="the canaries agree with their labels")
            time.sleep(15)  # a baseline: a quarter of a minute of agreeing verdicts
            assert alerts(base) == []  # a judge as measured: nothing fires
            # the judge changes behind the same name: every criterion satisfied
            judge_server.responder = labelled_responder(
                CASES, flip=lambda case, i: not (case.expected.verdicts or [])[i])
            firing = eventually(lambda: alerts(base), timeout_s=120,
                                what="OtelScorersJudgeDrift firing")
            assert (agreement(base) or 1) < 0.8
    finally:
        app.terminate()
        app.wait(30)
    labels = firing[0]["labels"]
    assert labels["scorer"] == "rubric" and labels["judge_model"] == "openai/gpt-4o-mini"
    assert labels["job"] == "canary-app" and labels["severity"] == "warning"
