"""A real Prometheus scrapes an application scoring runs live (its OTel Prometheus exporter):
the README's metric names are there, and every PromQL expression of the dashboard and the rules
runs against it without error, returning data where the application produced some."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from otel_scorers.testing import (
    RecordedRequest,
    ScriptedJudgeServer,
    garbage,
    judge_responder,
)
from tests.support import doc, free_port, section

from .test_configs import PROMETHEUS, dashboard_exprs, prometheus_names, rule_exprs

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

HERE = Path(__file__).resolve().parent


def responder() -> Any:
    good = judge_responder(satisfied=True, user=(0.9, 1.0, 0.9, 1.0), system=(1.0,) * 4)
    poor = judge_responder(satisfied=lambda i, _text: i == 1, user=(0.4, 0.5, 0.3, 0.6),
                           system=(0.5,) * 4)
    slow = judge_responder(delay_s=0.3)

    def respond(request: RecordedRequest) -> Any:
        text = request.text
        if "BROKEN" in text:
            return garbage()
        if "burst" in text:
            return slow(request)
        number = re.search(r"question (\d+)", text)
        return poor(request) if number and int(number.group(1)) % 3 == 0 else good(request)
    return respond


def query(base: str, expr: str) -> dict[str, Any]:
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as response:
        data: dict[str, Any] = json.loads(response.read())
    return data


@pytest.fixture(scope="module")
def live() -> Iterator[str]:
    """Scripted judge, the application, and Prometheus scraping it every second."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail("prometheus is missing: `make test` installs it (apt-get install prometheus)")
    with ScriptedJudgeServer(responder()) as judge:
        app_port, prom_port = free_port(), free_port()
        app = subprocess.Popen([sys.executable, str(HERE / "metrics_app.py"), judge.url,
                                str(app_port)], stdout=subprocess.PIPE, text=True)
        work = Path(f"/tmp/otel-scorers-prometheus-{prom_port}")
        work.mkdir(parents=True, exist_ok=True)
        config = work / "prometheus.yml"
        config.write_text(json.dumps({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(PROMETHEUS / "otel-scorers.rules.yml")],
            "scrape_configs": [{"job_name": "support-app",
                                "static_configs": [{"targets": [f"127.0.0.1:{app_port}"]}]}],
        }))
        prometheus = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={work / 'data'}",
             f"--web.listen-address=127.0.0.1:{prom_port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        base = f"http://127.0.0.1:{prom_port}"
        try:
            assert app.stdout is not None
            assert app.stdout.readline().strip() == "ready", "the application did not finish"
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    if query(base, "otel_scorers_decisions_total")["data"]["result"]:
                        break
                except OSError:
                    pass
                time.sleep(0.5)
            time.sleep(4)  # a few more scrapes and rule evaluations (rates need two samples)
            yield base
        finally:
            prometheus.terminate()
            app.terminate()
            prometheus.wait(30)
            app.wait(30)
            shutil.rmtree(work, ignore_errors=True)


def substitute(expr: str) -> str:
    """Grafana's template variables as a user with 'All' selected would send them."""
    for name in ("$service", "$agent", "$scorer"):
        expr = expr.replace(name, ".*")
    return (expr.replace("$__rate_interval", "1m").replace("$__interval", "1m")
            .replace("$__range", "5m"))


def test_readme_metric_names_are_in_prometheus(live: str) -> None:
    table = section(doc("telemetry.md"), "## Metrics")
    wanted = [name for name in prometheus_names() if f"`{name.split('_bucket')[0]}" in table
              or f"`{name}`" in table]
    present = {name for name in wanted
               if query(live, f'count({{__name__="{name}"}})')["data"]["result"]}
    # what this application produces: scores, verdicts, dimensions, decisions, judge metrics
    for name in ("otel_scorers_evaluation_score_bucket", "otel_scorers_evaluations_total",
                 "otel_scorers_criterion_verdicts_total", "otel_scorers_dimension_score_bucket",
                 "otel_scorers_decisions_total", "otel_scorers_judge_duration_seconds_bucket",
                 "otel_scorers_judge_tokens_total", "otel_scorers_judge_cost_total",
                 "otel_scorers_queue_depth"):
        assert name in present, name
    decisions = query(live, "sum by (decision) (otel_scorers_decisions_total)")["data"]["result"]
    seen = {r["metric"]["decision"]: float(r["value"][1]) for r in decisions}
    assert seen.get("scored", 0) > 0 and seen.get("error", 0) > 0 and seen.get("dropped", 0) > 0
    failed = query(live, 'otel_scorers_criterion_verdicts_total{satisfied="false"}')
    assert failed["data"]["result"], "the poor runs fail a criterion"


def test_every_dashboard_expression_runs(live: str) -> None:
    empty_ok = {"otel_scorers_gateway_requests_total"}  # no gateway in this test
    for panel_expr in dashboard_exprs():
        expr = panel_expr
        if expr.startswith("label_values("):  # a Grafana function: check its metric instead
            metric = re.search(r"label_values\((\w+)", expr)
            assert metric is not None
            expr = metric.group(1)
        result = query(live, substitute(expr))
        assert result["status"] == "success", (expr, result)
        if not any(name in expr for name in empty_ok):
            assert result["data"]["result"], f"no data for {expr}"


def test_every_rule_expression_runs_and_recordings_have_data(live: str) -> None:
    for name, expr in rule_exprs():
        result = query(live, expr)
        assert result["status"] == "success", (name, result)
        if name.startswith("otel_scorers:"):
            assert result["data"]["result"], f"no data for recording rule {name}"
            # and Prometheus itself evaluates and stores it
            assert query(live, name)["data"]["result"], f"{name} not recorded"
    # Prometheus evaluated every rule of the file without an error
    with urllib.request.urlopen(f"{live}/api/v1/rules", timeout=10) as response:
        groups = json.loads(response.read())["data"]["groups"]
    rules = [rule for group in groups for rule in group["rules"]]
    assert len(rules) == len(rule_exprs())
    assert all(rule["health"] == "ok" for rule in rules), [
        (rule["name"], rule.get("lastError")) for rule in rules if rule["health"] != "ok"]
