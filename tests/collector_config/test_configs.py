"""The shipped configuration is valid: collector YAML wired end to end, Prometheus config and
rules accepted by promtool, rule unit tests (firing and non-firing) passing, Grafana provisioning
consistent, and every metric name in dashboards and rules one the code emits."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from otel_scorers import names

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "collector-config"
PROMETHEUS = CONFIG / "prometheus"
DASHBOARD = CONFIG / "grafana" / "dashboards" / "otel-scorers.json"

# Component types of the Collector release the configs are written for (builder-config.yaml);
# the built Collector validates them for real in test_collector.py.
KNOWN = {
    "receivers": {"otlp"},
    "processors": {"batch", "memory_limiter"},
    "exporters": {"otlp_grpc", "otlp_http", "prometheus", "file", "debug", "load_balancing"},
    "extensions": {"health_check"},
}


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool is missing: `make test` installs it (apt-get install prometheus)")
    return path


def prometheus_names() -> dict[str, str]:
    """Every series name the code's metrics become in Prometheus -> its instrument name (the
    OTel -> Prometheus translation: dots to underscores, unit suffix, _total on counters)."""
    kinds = {
        names.METRIC_SCORE: ("histogram", ""), names.METRIC_DIMENSION_SCORE: ("histogram", ""),
        names.METRIC_JUDGE_DURATION: ("histogram", "_seconds"),
        names.METRIC_GATEWAY_FORWARD_DURATION: ("histogram", "_seconds"),
        names.METRIC_QUEUE_DEPTH: ("gauge", ""), names.METRIC_HELD_SPANS: ("gauge", ""),
        names.METRIC_SESSION_SCORE: ("histogram", ""),
        names.METRIC_SESSION_TURNS: ("histogram", ""),
        names.METRIC_SESSIONS_OPEN: ("gauge", ""), names.METRIC_SESSIONS_HELD: ("gauge", ""),
        names.METRIC_JUDGE_TPR: ("gauge", ""), names.METRIC_JUDGE_TNR: ("gauge", ""),
        names.METRIC_EFFECTIVE_RATIO: ("gauge", ""),
        **{value: ("gauge", "") for key, value in vars(names).items()
           if key.startswith("METRIC_CALIBRATION_")},
    }
    out: dict[str, str] = {}
    for key, value in vars(names).items():
        if not key.startswith("METRIC_"):
            continue
        kind, unit = kinds.get(value, ("counter", ""))
        base = value.replace(".", "_") + unit
        if kind == "histogram":
            for suffix in ("_bucket", "_sum", "_count"):
                out[base + suffix] = value
        elif kind == "counter":
            out[base + "_total"] = value
        else:
            out[base] = value
    return out


def dashboard_exprs() -> list[str]:
    data = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in data["panels"] for t in p.get("targets", [])]
    exprs += [v["query"]["query"] for v in data["templating"]["list"] if v["type"] == "query"]
    return exprs


def rule_exprs() -> list[tuple[str, str]]:
    rules = yaml.safe_load((PROMETHEUS / "otel-scorers.rules.yml").read_text())
    return [(rule.get("record") or rule["alert"], rule["expr"])
            for group in rules["groups"] for rule in group["rules"]]


def metric_names(expr: str) -> set[str]:
    """Raw metric names an expression reads (recording-rule names have colons; skip those)."""
    return {m for m in re.findall(r"(?<![:\w])(otel_scorers_[a-zA-Z0-9_]+)", expr)}


# -- collector ------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["otelcol.yaml", "otelcol-loadbalancing.yaml"])
def test_collector_config_is_wired(name: str) -> None:
    config: dict[str, Any] = yaml.safe_load((CONFIG / name).read_text())
    service = config["service"]
    used: dict[str, set[str]] = {kind: set() for kind in KNOWN}
    signals = {pipeline.split("/")[0] for pipeline in service["pipelines"]}
    assert signals == {"traces", "metrics", "logs"}, "every signal is wired"
    for pipeline_name, pipeline in service["pipelines"].items():
        assert pipeline.get("receivers") and pipeline.get("exporters"), pipeline_name
        for kind in ("receivers", "processors", "exporters"):
            for component in pipeline.get(kind, []):
                assert component in config.get(kind, {}), f"{pipeline_name}: {component} undefined"
                used[kind].add(component)
        if pipeline.get("processors"):
            assert pipeline["processors"][0] == "memory_limiter", "memory_limiter goes first"
    for component in service.get("extensions", []):
        assert component in config.get("extensions", {})
        used["extensions"].add(component)
    for kind, known in KNOWN.items():
        for component in config.get(kind, {}):
            assert component.split("/")[0] in known, f"unknown {kind[:-1]} type {component}"
            assert component in used[kind], f"{component} is defined but used by no pipeline"
    for value in re.findall(r"\$\{([^}]*)\}", (CONFIG / name).read_text()):
        assert value.startswith("env:"), f"endpoints come from ${{env:...}}, not {value}"


def test_loadbalancing_routes_traces_by_trace_id() -> None:
    config = yaml.safe_load((CONFIG / "otelcol-loadbalancing.yaml").read_text())
    exporter = config["exporters"]["load_balancing"]
    assert exporter["routing_key"] == "traceID"
    assert "otlp" in exporter["protocol"]  # OTLP/gRPC: the gateways' --grpc-port
    assert config["service"]["pipelines"]["traces"]["exporters"] == ["load_balancing"]
    assert len(exporter["resolver"]["static"]["hostnames"]) >= 2


def test_loadbalancing_routes_turn_records_by_session_to_the_same_gateways() -> None:
    from otel_scorers.otlp.turns import KEY_ATTRIBUTE

    config = yaml.safe_load((CONFIG / "otelcol-loadbalancing.yaml").read_text())
    sessions = config["exporters"]["load_balancing/sessions"]
    assert sessions["routing_key"] == "attributes"
    assert sessions["routing_attributes"] == [KEY_ATTRIBUTE]
    assert sessions["resolver"] == config["exporters"]["load_balancing"]["resolver"]
    turns = config["service"]["pipelines"]["logs/turns"]
    assert turns["receivers"] == ["otlp/turns"] and turns["exporters"] == [
        "load_balancing/sessions"]
    # the application's own logs never take the turns' route
    assert "otlp/turns" not in config["service"]["pipelines"]["logs"]["receivers"]


def test_the_local_prometheus_config_differs_only_in_its_targets() -> None:
    compose = yaml.safe_load((PROMETHEUS / "prometheus.yml").read_text())
    local = yaml.safe_load((PROMETHEUS / "prometheus-local.yml").read_text())
    for config in (compose, local):
        for job in config["scrape_configs"] + config["alerting"]["alertmanagers"]:
            job.pop("static_configs")
    assert compose == local


def test_docker_compose_uses_the_shipped_files_on_loopback() -> None:
    compose = yaml.safe_load((CONFIG / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"otel-collector", "jaeger", "prometheus", "grafana", "alertmanager"} <= set(services)
    for service in services.values():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), port
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (CONFIG / source).exists(), source


# -- Prometheus -----------------------------------------------------------------------------
def test_promtool_check_config_and_rules() -> None:
    for args in (["check", "config", "prometheus.yml"],
                 ["check", "config", "prometheus-local.yml"],
                 ["check", "rules", "otel-scorers.rules.yml"]):
        result = subprocess.run([promtool(), *args], cwd=PROMETHEUS, capture_output=True,
                                text=True, timeout=60, check=False)
        assert result.returncode == 0, result.stdout + result.stderr


TEST_FILES = ("otel-scorers.rules.test.yml", "quality.rules.test.yml")


@pytest.mark.parametrize("name", TEST_FILES)
def test_promtool_rule_unit_tests_pass(name: str) -> None:
    result = subprocess.run([promtool(), "test", "rules", f"tests/{name}"],
                            cwd=PROMETHEUS, capture_output=True, text=True, timeout=900,
                            check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_has_firing_and_non_firing_cases() -> None:
    alerts = {name for name, _ in rule_exprs() if not name.startswith("otel_scorers:")}
    firing: set[str] = set()
    for name in TEST_FILES:
        tests = yaml.safe_load((PROMETHEUS / "tests" / name).read_text())
        for case in tests["tests"]:
            for check in case.get("alert_rule_test", []):
                if check["exp_alerts"]:
                    firing.add(check["alertname"])
                    # non-firing: the group has series that must not fire (exp_alerts lists
                    # exactly what fires, so extra series are the quiet cases)
                    fired = {tuple(sorted(a["exp_labels"].items()))
                             for a in check["exp_alerts"]}
                    series = {s["series"] for s in case["input_series"]}
                    assert len(series) > len(fired), f"{check['alertname']}: no quiet cases"
    assert firing == alerts


def test_every_quality_alert_fires_stays_open_and_resolves() -> None:
    """Issue 52: each drop alert's story is checked before the drop (quiet), early in it
    (firing), late in it (still firing: the reference is held) and after the recovery
    (resolved); the rubric page names the version the drop started with."""
    tests = yaml.safe_load((PROMETHEUS / "tests" / "quality.rules.test.yml").read_text())
    (case,) = tests["tests"]
    story: dict[str, dict[str, bool]] = {}
    for check in case["alert_rule_test"]:
        story.setdefault(check["alertname"], {})[check["eval_time"]] = bool(check["exp_alerts"])
    drops = {name for name, _ in rule_exprs() if name.startswith("OtelScorers")} - {
        "OtelScorersJudgeErrors", "OtelScorersEvaluationsDropped",
        "OtelScorersJudgeBudgetExhausted", "OtelScorersAlignmentLow"}
    for name in drops:
        assert story[name] == {"47h55m": False, "49h30m": True, "53h55m": True,
                               "59h55m": False}, name
    pages = [a for c in case["alert_rule_test"] if c["alertname"] ==
             "OtelScorersRubricPassRateDrop" for a in c["exp_alerts"]]
    assert pages and all("Started with version 1.5.0" in a["exp_annotations"]["description"]
                         and "The version before, 1.4.0" in a["exp_annotations"]["description"]
                         and "%22otel_scorers.version%22%3A%221.5.0%22" in
                         a["exp_annotations"]["failing_runs"] for a in pages)


@pytest.mark.parametrize("script,output", [
    ("rules.py", "otel-scorers.rules.yml"),
    ("tests/quality_tests.py", "tests/quality.rules.test.yml")])
def test_the_rules_and_their_tests_are_the_generators_output(script: str, output: str) -> None:
    import sys

    result = subprocess.run([sys.executable, str(PROMETHEUS / script)], capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout == (PROMETHEUS / output).read_text(), (
        f"collector-config/prometheus/{output} is not the output of {script}: run "
        f".venv/bin/python collector-config/prometheus/{script} > "
        f"collector-config/prometheus/{output}")


def test_a_wrong_expectation_fails(tmp_path: Path) -> None:
    """promtool really checks: flip one expectation and the suite fails."""
    tests = (PROMETHEUS / "tests" / "otel-scorers.rules.test.yml").read_text()
    broken = tests.replace("value: 0.7272727272727273", "value: 0.8", 1)
    assert broken != tests
    path = PROMETHEUS / "tests" / "broken.test.yml"
    try:
        path.write_text(broken)
        result = subprocess.run([promtool(), "test", "rules", "tests/broken.test.yml"],
                                cwd=PROMETHEUS, capture_output=True, text=True, timeout=120,
                                check=False)
    finally:
        path.unlink()
    assert result.returncode != 0


# -- Grafana ---------------------------------------------------------------------------------
def test_grafana_provisioning_and_dashboard() -> None:
    datasources = yaml.safe_load(
        (CONFIG / "grafana/provisioning/datasources/datasources.yaml").read_text())
    uids = {d["uid"] for d in datasources["datasources"]}
    assert {"otel-scorers-prometheus", "otel-scorers-jaeger"} <= uids
    providers = yaml.safe_load(
        (CONFIG / "grafana/provisioning/dashboards/dashboards.yaml").read_text())
    assert providers["providers"][0]["options"]["path"] == "/var/lib/grafana/dashboards"
    data = json.loads(DASHBOARD.read_text())
    assert data["uid"] == "otel-scorers"
    variables = {v["name"]: v for v in data["templating"]["list"]}
    assert set(variables) == {"service", "agent", "scorer", "jaeger"}
    for panel in data["panels"]:
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] in uids
        assert panel["targets"], panel["title"]
    titles = " ".join(p["title"] for p in data["panels"]).lower()
    for topic in ("score distribution", "pass rate", "criterion", "alignment dimensions",
                  "decisions", "latency", "tokens", "cost", "trajectory", "faithfulness",
                  "tool errors", "session goal completion", "session scores",
                  "turns per session"):
        assert topic in titles, topic
    assert "16686" in variables["jaeger"]["query"]  # the Jaeger UI, one constant
    assert any(link["url"].startswith("${jaeger}/search") for link in data["links"])


def test_the_dashboard_is_the_generators_output() -> None:
    """The JSON is generated from code (grafana-foundation-sdk); regenerating gives it back."""
    import subprocess
    import sys

    result = subprocess.run([sys.executable, str(CONFIG / "grafana" / "dashboard.py")],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == json.loads(DASHBOARD.read_text()), (
        "collector-config/grafana/dashboards/otel-scorers.json is not the generator's output: "
        "run .venv/bin/python collector-config/grafana/dashboard.py > "
        "collector-config/grafana/dashboards/otel-scorers.json")


def test_every_per_agent_panel_links_to_its_failing_runs() -> None:
    data = json.loads(DASHBOARD.read_text())
    for panel in data["panels"]:
        legends = " ".join(t.get("legendFormat", "") for t in panel.get("targets", []))
        if "{{agent}}" not in legends or panel["type"] != "timeseries":
            continue
        links = panel["fieldConfig"]["defaults"].get("links") or []
        assert len(links) == 1, panel["title"]
        url = links[0]["url"]
        assert url.startswith("${jaeger}/search?service=${__field.labels.job:percentencode}")
        assert "${__field.labels.agent:percentencode}" in url or "tool" in url, url
        for target in panel["targets"]:  # the link's labels are in every series
            expr = target["expr"]
            assert expr.startswith("otel_scorers:") or "job" in expr.split(")")[0], expr


def test_metric_names_in_dashboards_and_rules_are_emitted() -> None:
    emitted = prometheus_names()
    used: set[str] = set()
    for expr in dashboard_exprs():
        used |= metric_names(expr)
    for _, expr in rule_exprs():
        used |= metric_names(expr)
    assert used, "no metric found: the pattern is broken"
    unknown = sorted(used - set(emitted))
    assert unknown == [], unknown


def test_documented_prometheus_column_matches_the_translation() -> None:
    readme = (ROOT / "docs" / "telemetry.md").read_text()
    emitted = prometheus_names()
    for prometheus_name, instrument in emitted.items():
        base = prometheus_name.removesuffix("_bucket").removesuffix("_sum").removesuffix(
            "_count")
        assert f"| `{instrument}` | `{base}" in readme, (instrument, prometheus_name)
