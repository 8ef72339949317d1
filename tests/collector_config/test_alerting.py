"""From an alert to its failing runs, on real parts (issues 37.1, 52): an application running
version 1.5.0 scores its runs live and sends OTLP to the real Collector (traces to the real
Jaeger, metrics to its Prometheus exporter); real Prometheus, started on a backfilled reference
week of version 1.4.0 (``tests.collector_config.history``), scrapes it with the shipped rules
(only ``for`` and the group intervals shortened) and sends its alerts to the real Alertmanager
with the shipped configuration (its webhook pointed at this test). The answers get worse
mid-run: the rubric pass rate drop fires, the webhook receives it once, grouped, with its
labels, the version it started with and the one before, its runbook link and its failing-runs
link; that link (with the version), opened on the real Jaeger, returns exactly the failing runs.
The shipped routing and inhibition, on the real Alertmanager with alerts posted to it: a
criterion spike is held back while its agent's pass rate drop fires, every judged alert while
its judge drifts."""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

from otel_scorers import RubricScorer
from otel_scorers.judge.client import JudgeClient
from otel_scorers.pipeline import ScoringSpanProcessor
from otel_scorers.testing import RecordedRequest, ScriptedJudgeServer, judge_responder
from tests.binaries import (
    CONFIG,
    alertmanager,
    collector,
    eventually,
    get_json,
    jaeger,
    prometheus,
    tags,
)
from tests.collector_config.history import backfill, short_rules
from tests.support import free_port, genai_attributes

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

SERVICE, AGENT = "support-app", "support-bot"
RUNBOOK = "https://docs.example.com/otel-scorers/runbook.md"
VERSION = "1.5.0"  # the deploy under test; its reference week ran 1.4.0


def history(work: Path, model: str) -> None:
    """The agent's reference week: version 1.4.0 passing 90% of its runs (120 an hour, its
    criterion judged with each)."""
    labels = {"job": SERVICE, "scorer": "rubric", "judge_model": model, "agent": AGENT,
              "version": "1.4.0"}
    backfill(work, [
        ("otel_scorers_evaluations_total", {**labels, "passed": "true", "label": "pass"}, 9),
        ("otel_scorers_evaluations_total", {**labels, "passed": "false", "label": "fail"}, 1),
        ("otel_scorers_criterion_verdicts_total",
         {**labels, "criterion": "greets_the_user", "satisfied": "true"}, 9),
        ("otel_scorers_criterion_verdicts_total",
         {**labels, "criterion": "greets_the_user", "satisfied": "false"}, 1)])


def short_alertmanager(work: Path, webhook: str, also: str | None = None) -> Path:
    """The shipped Alertmanager configuration, its receivers pointed at ``webhook`` (and
    ``also``) and its group timers shortened (the routing, grouping and inhibition as
    shipped)."""
    config = yaml.safe_load((CONFIG / "alertmanager" / "alertmanager.yml").read_text())
    config["route"].update(group_wait="2s", group_interval="2s", repeat_interval="1h")
    for receiver in config["receivers"]:
        hooks = receiver.get("webhook_configs", [])
        for hook in hooks:
            hook["url"] = webhook
        if also is not None and hooks:
            hooks.append({**hooks[0], "url": also})
    path = work / "alertmanager.yml"
    path.write_text(yaml.safe_dump(config))
    return path


class Webhook:
    """An Alertmanager webhook receiver: every notification's JSON body."""

    def __init__(self) -> None:
        received: list[dict[str, Any]] = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                received.append(json.loads(self.rfile.read(length)))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.received = received
        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/alerts"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextlib.contextmanager
def alert_digest(port: int, jaeger_query: str) -> Iterator[list[str]]:
    """examples/alert_digest.py on ``port``: what it prints, line by line."""
    import os
    import subprocess
    import sys

    printed: list[str] = []
    process = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve().parents[2] / "examples" /
                             "alert_digest.py"), str(port)],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "JAEGER_URL": jaeger_query})
    assert process.stdout is not None
    stream = process.stdout
    threading.Thread(target=lambda: printed.extend(iter(stream.readline, "")),
                     daemon=True).start()
    try:
        eventually(lambda: printed, timeout_s=60, what="the example listening")
        yield printed
    finally:
        process.terminate()
        process.wait(30)


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    hook = Webhook()
    yield hook
    hook.close()


class App:
    """An application scoring each agent run live, exporting over OTLP/HTTP to ``endpoint``;
    ``good`` decides whether its answers greet the user (the rubric)."""

    def __init__(self, endpoint: str, judge: ScriptedJudgeServer) -> None:
        resource = Resource.create({"service.name": SERVICE, "service.version": VERSION})
        self.tracer_provider = TracerProvider(resource=resource)
        self.meter_provider = MeterProvider(resource=resource, metric_readers=[
            PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=f"{endpoint}/v1/metrics"),
                                          export_interval_millis=500)])
        client = JudgeClient(judge.model, api_base=judge.url, api_key="k")
        self.processor = ScoringSpanProcessor(
            [RubricScorer(client, "- greets the user")], tracer_provider=self.tracer_provider,
            meter_provider=self.meter_provider, events=False,
            exporter=OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces"))
        self.tracer_provider.add_span_processor(self.processor)
        self.good = True
        self.failing: list[str] = []  # trace ids of the runs answered badly
        self.runs = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        tracer = self.tracer_provider.get_tracer("app")
        while not self._stop.is_set():
            good = self.good
            with tracer.start_as_current_span(f"invoke_agent {AGENT}", attributes=genai_attributes(
                    prompt=f"question {self.runs}", answer="Hello! Here it is." if good
                    else "No.", agent=AGENT)) as span:
                if not good:
                    self.failing.append(f"{span.get_span_context().trace_id:032x}")
            self.runs += 1
            time.sleep(0.2)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        assert self.processor.force_flush(60_000)
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


def firing(base: str, name: str) -> list[dict[str, Any]]:
    return [a for a in get_json(f"{base}/api/v1/alerts")["data"]["alerts"]
            if a["labels"]["alertname"] == name and a["state"] == "firing"]


def run_into_a_drop(app: App, base: str, webhook: Webhook) -> dict[str, set[str]]:
    """The deploy's runs pass, then get worse: the drop pages once. The exemplars of the
    score and verdict series (bucket or ``passed`` -> trace ids)."""
    try:
        eventually(lambda: get_json(f"{base}/api/v1/query", query=(
            'otel_scorers:rubric_pass:total{window="5m"} >= 20 and on (job, scorer, '
            "judge_model, agent) otel_scorers:rubric_pass:baseline_total >= 1000"))["data"][
                "result"], timeout_s=120, what="passing runs and the reference week")
        assert firing(base, "OtelScorersRubricPassRateDrop") == []  # all pass: quiet
        app.good = False  # the answers get worse
        eventually(lambda: firing(base, "OtelScorersRubricPassRateDrop"), timeout_s=120,
                   what="OtelScorersRubricPassRateDrop firing")
        eventually(lambda: webhook.received, timeout_s=60, what="the notification")
        time.sleep(6)  # three more group intervals: still one notification
    finally:
        app.stop()
    return {series["seriesLabels"].get("le", series["seriesLabels"].get("passed")):
            {e["labels"]["trace_id"] for e in series["exemplars"]}
            for series in get_json(f"{base}/api/v1/query_exemplars", query=(
                'otel_scorers_evaluation_score_bucket{le=~"0.1|1.0"} or '
                'otel_scorers_evaluations_total'), start=time.time() - 600,
                end=time.time())["data"]}


def test_an_alert_reaches_the_webhook_with_links_that_open_the_failing_runs(
        tmp_path: Path, webhook: Webhook) -> None:
    good, bad = judge_responder(satisfied=True), judge_responder(satisfied=False)

    def greets(request: RecordedRequest) -> Any:
        return good(request) if "Hello! Here it is." in request.text else bad(request)

    digests = free_port()
    with ScriptedJudgeServer(greets) as judge, jaeger(tmp_path) as store, collector(
            "otelcol.yaml", tmp_path, JAEGER_OTLP_ENDPOINT=store.addresses["otlp_grpc"]) as main, \
            alert_digest(digests, store.addresses["query"]) as printed, \
            alertmanager(tmp_path, short_alertmanager(
                tmp_path, webhook.url, f"http://127.0.0.1:{digests}/alerts")) as manager:
        history(tmp_path, judge.model)
        with prometheus(tmp_path, {"otel-collector": main.addresses["prometheus"]},
                        honor_labels=True, alertmanager=manager,
                        rules=short_rules(tmp_path, store.addresses["query"], RUNBOOK),
                        flags=("--enable-feature=exemplar-storage",)) as base:
            app = App(main.addresses["http"], judge)
            exemplars = run_into_a_drop(app, base, webhook)
        notifications = [n for n in webhook.received if n["status"] == "firing"]
        assert len(notifications) == 1, notifications
        note = notifications[0]
        assert note["receiver"] == "quality-pager"  # severity page, routed as shipped
        assert note["groupLabels"] == {"alertname": "OtelScorersRubricPassRateDrop",
                                       "job": SERVICE, "agent": AGENT, "scorer": "rubric"}
        (alert,) = note["alerts"]
        assert alert["labels"]["severity"] == "page"
        annotations = alert["annotations"]
        assert annotations["runbook_url"] == f"{RUNBOOK}#otelscorersrubricpassratedrop"
        link = annotations["failing_runs"]
        assert link.startswith(f"{store.addresses['query']}/search?")
        # the link is Jaeger's search page; its query API takes the same parameters
        query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(link).query))
        # the version the drop started with: named, compared, and in the link's search
        text = annotations["description"]
        assert re.search(rf"Started with version {re.escape(VERSION)} \(new since the "
                         r"reference week\): [\d.]+% in its last hour\.", text), text
        assert "The version before, 1.4.0: 90% in the reference week." in text
        assert "The criterion that moved most: greets_the_user" in text
        assert "Raw pass rate" in text and "False-page budget" in text
        assert query["service"] == SERVICE and json.loads(query["tags"]) == {
            "gen_ai.evaluation.name": "rubric", "gen_ai.evaluation.score.label": "fail",
            "gen_ai.agent.name": AGENT, "otel_scorers.version": VERSION}
        wanted = min(len(app.failing), int(query["limit"]))

        def failing_runs() -> list[dict[str, Any]] | None:
            data: list[dict[str, Any]] = get_json(f"{store.addresses['query']}/api/traces",
                                                  **query)["data"]
            return data if len(data) >= wanted else None

        found = eventually(failing_runs, timeout_s=60, what="the failing runs in Jaeger")
        evaluations = [span for trace in found for span in trace["spans"]
                       if span["operationName"] == "gen_ai.evaluation rubric"]
        assert evaluations and all(tags(s)["gen_ai.evaluation.score.label"] == "fail"
                                   for s in evaluations)
        found_ids = {trace["traceID"].rjust(32, "0") for trace in found}
        assert found_ids <= set(app.failing) and len(found_ids) == wanted  # those, all
        check_dashboard_link(store.addresses["query"], set(app.failing))
        check_digest(store.addresses["query"], set(app.failing), app.runs)
        # examples/alert_digest.py got the same alert and answered it with the agent's digest
        eventually(lambda: "greets_the_user" in "".join(printed), timeout_s=60,
                   what="the example's digest")
        text = "".join(printed)
        assert f"#### OtelScorersRubricPassRateDrop: {AGENT} ({SERVICE})" in text
        assert f"{store.addresses['query']}/trace/" in text
        check_exemplars(exemplars, store.addresses["query"], set(app.failing))
    assert re.search(r"otelscorersrubricpassratedrop", (
        Path(__file__).resolve().parents[2] / "docs" / "runbook.md").read_text().lower())


def post_alerts(manager: str, *alerts: dict[str, str]) -> None:
    import urllib.request

    body = json.dumps([{"labels": labels, "annotations": {"summary": labels["alertname"]}}
                       for labels in alerts]).encode()
    request = urllib.request.Request(f"http://{manager}/api/v2/alerts", data=body,
                                     method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as reply:
        assert reply.status == 200


def test_the_shipped_routing_pages_apart_and_inhibits_the_criterion_spike(
        tmp_path: Path, webhook: Webhook) -> None:
    drop = {"alertname": "OtelScorersRubricPassRateDrop", "severity": "page", "job": SERVICE,
            "agent": AGENT}
    spike = {"alertname": "OtelScorersCriterionFailureSpike", "severity": "warning",
             "job": SERVICE, "agent": AGENT, "criterion": "greets_the_user"}
    other = {**spike, "agent": "billing-bot"}  # another agent's spike: not explained
    with alertmanager(tmp_path, short_alertmanager(tmp_path, webhook.url)) as manager:
        post_alerts(manager, drop)
        eventually(lambda: webhook.received, timeout_s=30, what="the page")
        post_alerts(manager, drop, spike, other)
        eventually(lambda: any(a["labels"]["agent"] == "billing-bot" for n in webhook.received
                               for a in n["alerts"]), timeout_s=30, what="the other spike")
        time.sleep(5)  # more group intervals: the inhibited spike stays held back
        inhibited = get_json(f"http://{manager}/api/v2/alerts", inhibited="true",
                             active="false", silenced="false")
    delivered = [(n["receiver"], a["labels"]["alertname"], a["labels"]["agent"])
                 for n in webhook.received for a in n["alerts"]]
    assert ("quality-pager", "OtelScorersRubricPassRateDrop", AGENT) in delivered
    assert ("quality-chat", "OtelScorersCriterionFailureSpike", "billing-bot") in delivered
    assert ("quality-chat", "OtelScorersCriterionFailureSpike", AGENT) not in delivered
    assert [(a["labels"]["alertname"], a["labels"]["agent"]) for a in inhibited] == [
        ("OtelScorersCriterionFailureSpike", AGENT)]


#: Every quality alert a judge's verdicts make (the drift inhibition must cover each).
JUDGED = ("OtelScorersRubricPassRateDrop", "OtelScorersPassRateDrop",
          "OtelScorersAlignmentDrop", "OtelScorersAlignmentLow", "OtelScorersFaithfulnessDrop",
          "OtelScorersSessionGoalCompletionDrop", "OtelScorersSessionScoreDrop",
          "OtelScorersCriterionFailureSpike")


def test_a_drifting_judge_holds_back_every_quality_alert_it_judged(
        tmp_path: Path, webhook: Webhook) -> None:
    """Issue 52.4, on the real Alertmanager: while OtelScorersJudgeDrift fires for a judge
    model, every quality alert of that job and judge model is inhibited; the same alerts from
    another judge model, and tool errors (not judged), still notify."""
    rules = yaml.safe_load((CONFIG / "prometheus" / "otel-scorers.rules.yml").read_text())
    shipped = {r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r}
    assert set(JUDGED) | {"OtelScorersToolErrorSpike", "OtelScorersJudgeDrift"} <= shipped
    drift = {"alertname": "OtelScorersJudgeDrift", "severity": "warning", "job": SERVICE,
             "scorer": "rubric", "judge_model": "m1"}
    # each its own agent: the rubric drop holds back its own agent's criterion spike
    judged = [{"alertname": name, "severity": "page", "job": SERVICE, "judge_model": model,
               "agent": f"bot-{i}", "scorer": "rubric", "criterion": "cites_sources"}
              for i, name in enumerate(JUDGED) for model in ("m1", "m2")]
    tools = {"alertname": "OtelScorersToolErrorSpike", "severity": "warning", "job": SERVICE,
             "agent": "billing-bot", "tool": "search"}
    with alertmanager(tmp_path, short_alertmanager(tmp_path, webhook.url)) as manager:
        post_alerts(manager, drift)
        eventually(lambda: webhook.received, timeout_s=30, what="the drift")
        post_alerts(manager, drift, tools, *judged)
        eventually(lambda: sum(len(n["alerts"]) for n in webhook.received) >= 2 + len(JUDGED),
                   timeout_s=30, what="the alerts not held back")
        time.sleep(5)  # more group intervals: the inhibited ones stay held back
        inhibited = get_json(f"http://{manager}/api/v2/alerts", inhibited="true",
                             active="false", silenced="false")
    delivered = {(a["labels"]["alertname"], a["labels"].get("judge_model"))
                 for n in webhook.received for a in n["alerts"]}
    assert {(name, "m2") for name in JUDGED} <= delivered
    assert ("OtelScorersToolErrorSpike", None) in delivered
    assert not {(name, "m1") for name in JUDGED} & delivered
    assert sorted(a["labels"]["alertname"] for a in inhibited) == sorted(JUDGED)


def test_amtool_validates_the_shipped_configuration() -> None:
    import shutil
    import subprocess

    amtool = shutil.which("amtool")
    assert amtool is not None, "`make test` installs prometheus-alertmanager (amtool with it)"
    result = subprocess.run([amtool, "check-config",
                             str(CONFIG / "alertmanager" / "alertmanager.yml")],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0 and "SUCCESS" in result.stdout, result.stdout + result.stderr


def check_dashboard_link(jaeger_query: str, failing: set[str]) -> None:
    """The dashboard's pass-rate panel links each agent's series to its failing runs (37.3)."""
    board = json.loads((CONFIG / "grafana" / "dashboards" / "otel-scorers.json").read_text())
    (panel,) = [p for p in board["panels"] if p["title"] == "Rubric pass rate"]
    data_link = panel["fieldConfig"]["defaults"]["links"][0]["url"]
    for name, value in (("${jaeger}", jaeger_query),
                        ("${__field.labels.job:percentencode}", urllib.parse.quote(SERVICE)),
                        ("${__field.labels.agent:percentencode}", urllib.parse.quote(AGENT))):
        data_link = data_link.replace(name, value)
    linked = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(data_link).query))
    by_panel = get_json(f"{jaeger_query}/api/traces", **linked)["data"]
    assert by_panel and {t["traceID"].rjust(32, "0") for t in by_panel} <= failing


def check_exemplars(exemplars: dict[str, set[str]], jaeger_query: str, failing: set[str]) -> None:
    """Issue 37.2: the low-score bucket and the failure counter name failing runs only, and
    Jaeger has each of them with its failing evaluation."""
    low, failed = exemplars.get("0.1", set()), exemplars.get("false", set())
    assert low and failed, exemplars
    assert low | failed <= failing, (low | failed) - failing
    assert exemplars.get("true", set()).isdisjoint(failing)  # passing ones: passing runs
    for trace_id in sorted(low)[:3]:  # (the last runs may still be on their way: 404)
        url = f"{jaeger_query}/api/traces/{trace_id}"
        (trace,) = eventually(lambda url=url: get_json(url)["data"], timeout_s=30,
                              what=f"trace {trace_id} in Jaeger")
        assert any(s["operationName"] == "gen_ai.evaluation rubric" and tags(s)[
            "gen_ai.evaluation.score.label"] == "fail" for s in trace["spans"])


def check_digest(jaeger_query: str, failing: set[str], runs: int) -> None:
    """Issue 37.4: ``otel-scorers report`` reads the evaluations back from the real Jaeger: the
    failures grouped by agent, scorer and criterion, linked to failing traces."""
    from click.testing import CliRunner

    from otel_scorers.cli import main

    def digest() -> dict[str, Any] | None:
        result = CliRunner().invoke(main, ["report", "--jaeger", jaeger_query, "--service",
                                           SERVICE, "--window", "10m", "--json"])
        assert result.exit_code == 0, result.output
        found: dict[str, Any] = json.loads(result.stdout)
        rates = found["rates"]
        return found if rates and rates[0]["runs"] >= runs else None

    found = eventually(digest, timeout_s=60, what="every evaluation in Jaeger")
    (rate,) = found["rates"]
    assert (rate["agent"], rate["scorer"], rate["failures"]) == (AGENT, "rubric", len(failing))
    (group,) = found["groups"]
    assert (group["criterion"], group["failures"]) == ("greets_the_user", len(failing))
    assert group["reasons"] and group["examples"]
    for example in group["examples"]:
        assert example["trace_id"] in failing
        assert example["link"] == f"{jaeger_query}/trace/{example['trace_id']}"
