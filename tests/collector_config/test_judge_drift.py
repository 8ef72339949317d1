"""The judge drift alert live (issues 36.1, 52): an application's canaries judged by a scripted
judge that changes behaviour mid-run (it starts passing the failing cases), scraped by real
Prometheus started on a backfilled reference week in which the judge agreed with its labels
(``tests.collector_config.history``), with the shipped rules (only ``for`` and the group
intervals shortened): the canary agreement drops and ``OtelScorersJudgeDrift`` fires for that
scorer and judge model, not before. Its ``failing_runs`` link, opened on the real Jaeger the
application sends its spans to, returns the canary verdicts that disagree with their label, and
only those (issue 37.1)."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from otel_scorers.calibration import bundled_cases
from otel_scorers.testing import ScriptedJudgeServer
from tests.binaries import eventually, get_json, jaeger, prometheus, tags
from tests.calibration.labelled_judge import labelled_responder
from tests.collector_config.history import backfill, short_rules
from tests.support import free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

HERE = Path(__file__).parent
CASES = bundled_cases()


def history(work: Path) -> None:
    """The judge's reference week: it agreed with every canary label (36 verdicts an hour)."""
    labels = {"job": "canary-app", "scorer": "rubric", "judge_model": "openai/gpt-4o-mini"}
    backfill(work, [
        ("otel_scorers_canary_verdicts_total", {**labels, "expected": "pass", "judged": "pass"},
         1.5),
        ("otel_scorers_canary_verdicts_total", {**labels, "expected": "fail", "judged": "fail"},
         1.5)])


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
    with jaeger(tmp_path) as store:
        firing = drift(judge_server, tmp_path, port, store.addresses)
        link = firing[0]["annotations"]["failing_runs"]
        assert link.startswith(f"{store.addresses['query']}/search?")
        query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(link).query))
        assert query["service"] == "canary-app" and json.loads(query["tags"]) == {
            "otel_scorers.scorer": "rubric", "otel_scorers.canary.agrees": "false"}
        every = eventually(lambda: [s for t in get_json(
            f"{store.addresses['query']}/api/traces", service="canary-app",
            limit=1000, lookback="1h")["data"] for s in t["spans"]], timeout_s=30,
            what="the canary spans")
        found = eventually(lambda: get_json(f"{store.addresses['query']}/api/traces",
                                            **query)["data"], timeout_s=30,
                           what="the disagreeing canary verdicts in Jaeger")
    spans = [tags(s) for t in found for s in t["spans"]]
    assert spans and all(s["otel_scorers.canary.agrees"] is False and
                         s["otel_scorers.canary.judged"] != s["otel_scorers.canary.expected"]
                         for s in spans)
    # the flipped judge passes the failing cases: those are the disagreeing verdicts, each with
    # its case and the judge's reasons; the agreeing ones exist and are not linked
    assert {s["otel_scorers.canary.expected"] for s in spans} == {"fail"}
    assert all(s["otel_scorers.canary.case"] and s["otel_scorers.scorer"] == "rubric"
               for s in spans)
    assert any(tags(s)["otel_scorers.canary.agrees"] is True for s in every)
    assert {s["operationName"] for s in every} == {"otel_scorers.canary rubric"}


def drift(judge_server: ScriptedJudgeServer, tmp_path: Path, port: int,
          store: dict[str, str]) -> list[dict[str, Any]]:
    """The drift alert fired by a judge that changes, the application's spans sent to
    ``store`` (a Jaeger's addresses): the firing alerts."""
    app = subprocess.Popen([sys.executable, str(HERE / "canary_app.py"), judge_server.url,
                            str(port), store["otlp_grpc"]], stdout=subprocess.PIPE, text=True)
    try:
        assert app.stdout is not None and app.stdout.readline().strip() == "ready"
        history(tmp_path)
        with prometheus(tmp_path, {"canary-app": f"127.0.0.1:{port}"}, honor_labels=False,
                        rules=short_rules(tmp_path, store["query"])) as base:
            eventually(lambda: (agreement(base) or 0) >= 0.99, timeout_s=90,
                       what="the canaries agree with their labels")
            eventually(lambda: get_json(f"{base}/api/v1/query", query=(
                "otel_scorers:canary_agreement:baseline_total >= 100"))["data"]["result"],
                       timeout_s=60, what="the reference week")
            assert alerts(base) == []  # a judge as measured: nothing fires
            # the judge changes behind the same name: every criterion satisfied
            judge_server.responder = labelled_responder(
                CASES, flip=lambda case, i: not (case.expected.verdicts or [])[i])
            firing = eventually(lambda: alerts(base), timeout_s=120,
                                what="OtelScorersJudgeDrift firing")
            # the alert may fire on the TNR first; the agreement follows within seconds
            eventually(lambda: (agreement(base) or 1) < 0.8, timeout_s=60,
                       what="the canary agreement under 0.8")
    finally:
        app.terminate()
        app.wait(30)
    labels = firing[0]["labels"]
    assert labels["scorer"] == "rubric" and labels["judge_model"] == "openai/gpt-4o-mini"
    assert labels["job"] == "canary-app" and labels["severity"] == "warning"
    return firing
