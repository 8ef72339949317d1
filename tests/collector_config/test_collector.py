"""The documented path with real binaries: an application (and, separately, the ``serve``
gateway) sends OTLP to the Collector built from ``builder-config.yaml`` running the shipped
``otelcol.yaml``, which feeds Jaeger v2 (``jaeger.yaml``) and a JSON-lines file. The evaluation
spans are read back through Jaeger's query API as children of the evaluated agent spans, enriched
agent spans carry their scores, and the ``gen_ai.evaluation.result`` records are in the file."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from otel_scorers import PromptAlignmentScorer, RubricScorer
from otel_scorers.judge.client import JudgeClient
from otel_scorers.pipeline import ScoringSpanProcessor
from otel_scorers.testing import ScriptedJudgeServer, judge_responder
from tests.binaries import (
    COLLECTOR,
    CONFIG,
    JAEGER,
    Service,
    binary,
    collector,
    eventually,
    gateway,
    jaeger,
    jaeger_traces,
    parent_of,
    tags,
)
from tests.support import genai_attributes

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

EVALUATION = "gen_ai.evaluation "


# -- the build and the shipped files -----------------------------------------------------------
@pytest.mark.parametrize("config", ["otelcol.yaml", "otelcol-loadbalancing.yaml"])
def test_the_built_collector_validates_the_shipped_configs(config: str) -> None:
    result = subprocess.run([binary(COLLECTOR), "validate", "--config", str(CONFIG / config)],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_jaeger_validates_its_config() -> None:
    result = subprocess.run([binary(JAEGER), "validate", "--config", str(CONFIG / "jaeger.yaml")],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_collector_has_exactly_the_manifest_components_at_one_release() -> None:
    manifest = yaml.safe_load((CONFIG / "builder-config.yaml").read_text())
    result = subprocess.run([binary(COLLECTOR), "components"], capture_output=True, text=True,
                            timeout=60, check=True)
    built = yaml.safe_load(result.stdout)
    modules = {c["module"] for kind in ("receivers", "processors", "exporters", "extensions")
               for c in built[kind]}
    wanted = {entry["gomod"] for kind in ("receivers", "processors", "exporters", "extensions")
              for entry in manifest[kind]}
    assert modules == wanted
    releases = {module.rsplit(" ", 1)[1] for module in modules}
    assert releases == {f"v{manifest['dist']['version']}"}, releases


def test_compose_images_are_the_versions_tested() -> None:
    compose = yaml.safe_load((CONFIG / "docker-compose.yml").read_text())["services"]
    release = yaml.safe_load((CONFIG / "builder-config.yaml").read_text())["dist"]["version"]
    assert compose["otel-collector"]["image"] == f"otel/opentelemetry-collector-contrib:{release}"
    build = (CONFIG / "build-stack.sh").read_text()
    module = re.search(r"JAEGER_MODULE_VERSION=(v[\d.]+)", build)
    assert module is not None and module.group(1) == "v1.76.0"
    # Jaeger tags each release twice: module v1.76.0 is Jaeger v2.13.0
    assert compose["jaeger"]["image"] == "jaegertracing/jaeger:2.13.0"
    version = subprocess.run(["prometheus-alertmanager", "--version"], capture_output=True,
                             text=True, timeout=30, check=False)
    tested = re.search(r"version (\d+\.\d+\.\d+)", version.stdout + version.stderr)
    assert tested is not None
    assert compose["alertmanager"]["image"] == f"prom/alertmanager:v{tested.group(1)}"
    version = subprocess.run(["prometheus", "--version"], capture_output=True, text=True,
                             timeout=30, check=False).stdout + ""
    tested = re.search(r"version (\d+\.\d+\.\d+)", version)
    assert tested is not None
    assert compose["prometheus"]["image"] == f"prom/prometheus:v{tested.group(1)}"


# -- app -> Collector -> Jaeger ---------------------------------------------------------------
@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Service, Service]]:
    """Jaeger, and the Collector of otelcol.yaml feeding it."""
    work = tmp_path_factory.mktemp("stack")
    with jaeger(work) as store, collector(
            "otelcol.yaml", work, JAEGER_OTLP_ENDPOINT=store.addresses["otlp_grpc"]) as main:
        yield store, main
        log = main.output()
    assert "deprecated" not in log, log  # the configs use this release's component names


@pytest.fixture(scope="module")
def judge() -> Iterator[ScriptedJudgeServer]:
    with ScriptedJudgeServer(judge_responder(satisfied=True, user=(0.9, 0.9, 0.8, 1.0))) as s:
        yield s


def scored_app(endpoint: str, service: str, judge: ScriptedJudgeServer, runs: int) -> None:
    """An application scoring its agent runs in process, exporting everything over OTLP/HTTP:
    enriched agent spans and evaluation spans, metrics, and evaluation events."""
    resource = Resource.create({"service.name": service})
    tracer_provider = TracerProvider(resource=resource)
    meter_provider = MeterProvider(resource=resource, metric_readers=[
        PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=f"{endpoint}/v1/metrics"),
                                      export_interval_millis=500)])
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(
        BatchLogRecordProcessor(OTLPLogExporter(endpoint=f"{endpoint}/v1/logs")))
    client = JudgeClient(judge.model, api_base=judge.url, api_key="k")
    processor = ScoringSpanProcessor(
        [RubricScorer(client, "- greets the user"), PromptAlignmentScorer(client)],
        tracer_provider=tracer_provider, meter_provider=meter_provider,
        logger_provider=logger_provider,
        exporter=OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces"))
    tracer_provider.add_span_processor(processor)
    tracer = tracer_provider.get_tracer("app")
    for i in range(runs):
        with tracer.start_as_current_span("invoke_agent support", attributes=genai_attributes(
                prompt=f"question {i}")), tracer.start_as_current_span("tool lookup"):
            pass
    assert processor.force_flush(60_000)
    tracer_provider.shutdown()
    meter_provider.shutdown()
    logger_provider.shutdown()


def evaluations_by_parent(traces: list[dict[str, Any]]) -> tuple[
        dict[str, dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    spans = [span for trace in traces for span in trace["spans"]]
    agents = {s["spanID"]: s for s in spans if s["operationName"].startswith("invoke_agent")}
    children: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        if span["operationName"].startswith(EVALUATION):
            children.setdefault(parent_of(span) or "", []).append(span)
    return agents, children


def test_app_scores_reach_jaeger_as_children_of_the_enriched_agent_spans(
        stack: tuple[Service, Service], judge: ScriptedJudgeServer) -> None:
    store, main = stack
    runs = 4
    scored_app(main.addresses["http"], "stack-app", judge, runs)

    def complete() -> Any:
        agents, children = evaluations_by_parent(
            jaeger_traces(store.addresses["query"], "stack-app"))
        done = len(agents) == runs and all(len(children.get(a, [])) == 2 for a in agents)
        return (agents, children) if done else None

    agents, children = eventually(complete, what="4 agent spans with 2 evaluations each")
    for span_id, agent in agents.items():
        evaluations = {tags(e)["gen_ai.evaluation.name"]: tags(e) for e in children[span_id]}
        assert set(evaluations) == {"rubric", "prompt_alignment"}
        assert evaluations["rubric"]["gen_ai.evaluation.score.value"] == 1.0
        assert evaluations["rubric"]["gen_ai.evaluation.score.label"] == "pass"
        assert evaluations["rubric"]["otel_scorers.criterion.greets_the_user.satisfied"] is True
        assert 0 < evaluations["prompt_alignment"]["gen_ai.evaluation.score.value"] <= 1
        enriched = tags(agent)  # the agent span itself went out with its scores
        assert enriched["otel_scorers.rubric.score"] == 1.0
        assert enriched["otel_scorers.rubric.label"] == "pass"
        assert "otel_scorers.prompt_alignment.score" in enriched


def test_gateway_scores_reach_jaeger(stack: tuple[Service, Service], judge: ScriptedJudgeServer,
                                     tmp_path: Path) -> None:
    store, main = stack
    scorers = tmp_path / "scorers.yaml"
    scorers.write_text(json.dumps({
        "judge": {"model": judge.model, "api_base": judge.url, "api_key": "k"},
        "scorers": [{"type": "rubric", "criteria": ["greets the user"]}]}))
    runs = 3
    with gateway(scorers, main.addresses["http"], tmp_path, name="gateway") as scoring:
        provider = TracerProvider(resource=Resource.create({"service.name": "gateway-app"}))
        provider.add_span_processor(BatchSpanProcessor(
            OTLPSpanExporter(endpoint=f"{scoring.addresses['http']}/v1/traces"),
            schedule_delay_millis=100))
        tracer = provider.get_tracer("app")
        for i in range(runs):
            with tracer.start_as_current_span("invoke_agent support",
                                              attributes=genai_attributes(prompt=f"q {i}")):
                pass
        provider.shutdown()

        def complete() -> Any:
            agents, children = evaluations_by_parent(
                jaeger_traces(store.addresses["query"], "gateway-app"))
            done = len(agents) == runs and all(len(children.get(a, [])) == 1 for a in agents)
            return (agents, children) if done else None

        agents, children = eventually(complete, what="3 agent spans scored by the gateway")
    for span_id in agents:
        (evaluation,) = children[span_id]
        assert tags(evaluation)["gen_ai.evaluation.score.label"] == "pass"


def test_evaluation_events_reach_the_file_exporter_as_json(
        stack: tuple[Service, Service], judge: ScriptedJudgeServer) -> None:
    _, main = stack
    scored_app(main.addresses["http"], "events-app", judge, 2)
    path = Path(main.addresses["events"])

    def events() -> list[dict[str, Any]]:
        found = []
        for line in path.read_text().splitlines() if path.exists() else []:
            for resource in json.loads(line).get("resourceLogs", []):
                service = {a["key"]: a["value"] for a in resource["resource"]["attributes"]}
                if service["service.name"] != {"stringValue": "events-app"}:
                    continue
                for scope in resource["scopeLogs"]:
                    found += [r for r in scope["logRecords"]
                              if r.get("eventName") == "gen_ai.evaluation.result"]
        return found if len(found) >= 4 else []

    records = eventually(events, what="4 gen_ai.evaluation.result records in the file")
    assert len(records) == 4
    for record in records:
        attributes = {a["key"]: a["value"] for a in record["attributes"]}
        assert attributes["gen_ai.evaluation.name"]["stringValue"] in {"rubric",
                                                                      "prompt_alignment"}
        assert "doubleValue" in attributes["gen_ai.evaluation.score.value"]
        assert len(record["traceId"]) == 32 and len(record["spanId"]) == 16
