"""A real Prometheus scrapes an application scoring runs live (its OTel Prometheus exporter):
the README's metric names are there, and every PromQL expression of the dashboard and the rules
runs against it without error, returning data where the application produced some."""

from __future__ import annotations

import contextlib
import json
import re
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
from tests.binaries import collector, eventually, prometheus
from tests.collector_config.history import short_rules
from tests.support import doc, free_port, section

from .test_configs import dashboard_exprs, prometheus_names, rule_exprs

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


@pytest.fixture(scope="module", params=["python-exporter", "collector"])
def live(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[str]:
    """Scripted judge, the application, and Prometheus scraping every second either the
    application's own Prometheus exporter or the Collector (otelcol.yaml) the application sends
    OTLP to, the way the shipped prometheus.yml does (honor_labels)."""
    work = tmp_path_factory.mktemp(request.param)
    with contextlib.ExitStack() as stack:
        judge = stack.enter_context(ScriptedJudgeServer(responder()))
        if request.param == "collector":
            main = stack.enter_context(collector(
                "otelcol.yaml", work, JAEGER_OTLP_ENDPOINT=f"127.0.0.1:{free_port()}"))
            args, target = ["otlp", main.addresses["http"]], main.addresses["prometheus"]
            job = "otel-collector"  # as in the shipped prometheus.yml
        else:
            app_port = free_port()
            args, target = ["prometheus", str(app_port)], f"127.0.0.1:{app_port}"
            job = "support-app"
        app = subprocess.Popen([sys.executable, str(HERE / "metrics_app.py"), judge.url, *args],
                               stdout=subprocess.PIPE, text=True)
        stack.callback(stop, app)
        # the shipped rules evaluated every second (their groups run every minute or hour:
        # the first evaluation could come after the test)
        rules = short_rules(work, "http://localhost:16686", interval="1s")
        base = stack.enter_context(prometheus(work, {job: target}, rules=rules,
                                              honor_labels=request.param == "collector"))
        assert app.stdout is not None
        assert app.stdout.readline().strip() == "ready", "the application did not finish"
        eventually(lambda: query(base, "otel_scorers_decisions_total")["data"]["result"],
                   what="the first scrape with data")
        time.sleep(4)  # a few more scrapes and rule evaluations (rates need two samples)
        yield base


def stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    process.wait(30)


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
                 "otel_scorers_queue_depth", "otel_scorers_agent_tool_calls_total"):
        assert name in present, name
    decisions = query(live, "sum by (decision) (otel_scorers_decisions_total)")["data"]["result"]
    seen = {r["metric"]["decision"]: float(r["value"][1]) for r in decisions}
    assert seen.get("scored", 0) > 0 and seen.get("error", 0) > 0 and seen.get("dropped", 0) > 0
    failed = query(live, 'otel_scorers_criterion_verdicts_total{satisfied="false"}')
    assert failed["data"]["result"], "the poor runs fail a criterion"


def test_every_dashboard_expression_runs(live: str) -> None:
    # no gateway in this test; the canaries' reference week ended a day ago (none yet)
    empty_ok = {"otel_scorers_gateway_requests_total", "otel_scorers:canary_agreement:ratio7d"}
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


#: Recordings that need the reference week (the 7 days that ended a day ago: a live test of
#: seconds has none; a mean's continuity correction is the reference's spread), the tests'
#: results (a drop, a low score: none in healthy traffic) and the version marks (evaluations
#: in the last 15 minutes: this application has stopped).
NEEDS_A_WEEK = re.compile(
    r"reference|baseline|drop_|recent|min_drop|paging|version_before|low_sigma|"
    r"canary_agreement:ratio|canary_tnr:ratio|version_new|version_changes|"
    r"(alignment|faithfulness|session_score):rate_cc")


def test_every_rule_expression_runs_and_recordings_have_data(live: str) -> None:
    for name, expr in rule_exprs():
        result = query(live, expr)
        assert result["status"] == "success", (name, result)
        if name.startswith("otel_scorers:") and not NEEDS_A_WEEK.search(name):
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


def test_the_service_variable_finds_the_application(live: str) -> None:
    """The dashboard's ``service`` variable is the ``job`` label: the scrape job's name on the
    direct path, the application's service.name through the Collector (honor_labels)."""
    result = query(live, "count by (job) (otel_scorers_decisions_total)")["data"]["result"]
    assert {r["metric"]["job"] for r in result} == {"support-app"}
