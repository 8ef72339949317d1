"""Scale-out with real binaries: the load-balancing Collector (``otelcol-loadbalancing.yaml``)
routes traces by trace id to two ``otel-scorers serve`` gateways, which feed the main Collector
(``otelcol.yaml``) and Jaeger. Every run is scored exactly once, runs whose conversation is on an
LLM child span are assembled (their traces stay together), both gateways work. Then one gateway
stops:

- while it is down its traces wait in the load-balancing Collector's queue and are retried;
  when it is back they are delivered and scored, none lost, none twice;
- if it stays down past ``GATEWAY_RETRY_MAX_ELAPSED``, its traces are dropped, and every dropped
  span is counted in the Collector's error log (``dropped_items``): no silent loss. They are not
  re-routed to the other gateway (the static resolver keeps a fixed ring).

Sessions across the fleet: conversations whose turns are separate traces, spread over both
gateways by trace id; each gateway sends the turns it assembles to the Collector's turns
pipeline, which routes them by session to one gateway: every session is judged exactly once,
with every turn, by one gateway, and no turn record goes past the gateways.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from otel_scorers.testing import ScriptedJudgeServer, judge_responder
from tests.binaries import (
    Service,
    collector,
    eventually,
    gateway,
    get_json,
    jaeger,
    jaeger_traces,
    parent_of,
    tags,
)
from tests.support import free_port, genai_attributes

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

EVALUATION = "gen_ai.evaluation "
SCORERS = 2  # rubric and prompt alignment


def send_runs(endpoint: str, service: str, runs: int) -> dict[str, int]:
    """An application exporting over OTLP/HTTP: half of its runs carry the conversation on the
    agent span, half only on an LLM child. Returns trace id (hex) -> spans sent."""
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BatchSpanProcessor(
        OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces"), schedule_delay_millis=100))
    tracer = provider.get_tracer("app")
    sent: dict[str, int] = {}
    for i in range(runs):
        if i % 2:
            attributes = genai_attributes(prompt=f"{service}: question {i}")
            with tracer.start_as_current_span("invoke_agent support", attributes=attributes
                                              ) as agent, tracer.start_as_current_span("tool"):
                pass
        else:  # the conversation only on the LLM child: needs the whole trace in one place
            with tracer.start_as_current_span("invoke_agent nested", attributes={
                    "gen_ai.operation.name": "invoke_agent",
                    "gen_ai.agent.name": "nested"}) as agent:
                chat = genai_attributes(prompt=f"{service}: question {i}")
                chat["gen_ai.operation.name"] = "chat"
                with tracer.start_as_current_span("chat", attributes=chat):
                    pass
        sent[format(agent.get_span_context().trace_id, "032x")] = 2
    provider.shutdown()
    return sent


def scored_traces(query: str, service: str) -> dict[str, int]:
    """trace id -> evaluation spans that are children of its agent span, as Jaeger has them."""
    out: dict[str, int] = {}
    for trace in jaeger_traces(query, service):
        spans = trace["spans"]
        agents = {s["spanID"] for s in spans if s["operationName"].startswith("invoke_agent")}
        out[trace["traceID"]] = sum(1 for s in spans if s["operationName"].startswith(EVALUATION)
                                    and parent_of(s) in agents)
    return out


def decisions(gateway_service: Service) -> dict[str, int]:
    health = get_json(f"{gateway_service.addresses['http']}/health")
    rubric: dict[str, int] = health["decisions"].get("rubric", {})
    return rubric


def dropped_spans(lb: Service) -> int:
    """Spans the load-balancing Collector gave up on, from its error log: its per-gateway
    sub-exporters report no metrics in this release (they get a no-op meter provider), so the
    error line with ``dropped_items`` is where the loss is counted."""
    return sum(int(n) for n in re.findall(
        r"Exporting failed\. Dropping data\..*?\"dropped_items\": (\d+)", lb.output()))


@pytest.fixture(scope="module")
def judge() -> Iterator[ScriptedJudgeServer]:
    with ScriptedJudgeServer(judge_responder(satisfied=True)) as server:
        yield server


@pytest.fixture(scope="module")
def backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Service, Service, Path]]:
    """Jaeger and the main Collector feeding it."""
    work = tmp_path_factory.mktemp("scale-out")
    with jaeger(work) as store, collector(
            "otelcol.yaml", work, JAEGER_OTLP_ENDPOINT=store.addresses["otlp_grpc"]) as main:
        yield store, main, work


def scorers_config(work: Path, judge: ScriptedJudgeServer) -> Path:
    path = work / "scorers.yaml"
    path.write_text(json.dumps({
        "judge": {"model": judge.model, "api_base": judge.url, "api_key": "k", "timeout_s": 30},
        "scorers": [{"type": "rubric", "criteria": ["greets the user"]},
                    {"type": "prompt_alignment"}]}))
    return path


def test_two_gateways_behind_the_load_balancing_collector(
        backend: tuple[Service, Service, Path], judge: ScriptedJudgeServer) -> None:
    store, main, work = backend
    config = scorers_config(work, judge)
    grpc_ports = [free_port(), free_port()]
    with contextlib.ExitStack() as running:
        first, second = (running.enter_context(gateway(
            config, main.addresses["http"], work, name=f"gateway-{n + 1}", grpc_port=port))
            for n, port in enumerate(grpc_ports))
        lb = running.enter_context(collector(
            "otelcol-loadbalancing.yaml", work,
            SCORING_GATEWAY_1=f"127.0.0.1:{grpc_ports[0]}",
            SCORING_GATEWAY_2=f"127.0.0.1:{grpc_ports[1]}",
            COLLECTOR_OTLP_HTTP_ENDPOINT=main.addresses["http"]))

        # 1. both up: every run scored exactly once, both gateways busy, runs assembled
        sent = send_runs(lb.addresses["http"], "lb-app-1", 16)
        scored = eventually(lambda: all_scored(store, "lb-app-1", sent),
                            what="16 runs with one evaluation per scorer")
        assert set(scored) == set(sent) and set(scored.values()) == {SCORERS}
        by_gateway = [decisions(first), decisions(second)]
        assert all(d.get("scored", 0) > 0 for d in by_gateway), by_gateway
        assert sum(d.get("scored", 0) for d in by_gateway) == 16
        assert all(d.get("filtered", 0) == 0 for d in by_gateway), by_gateway

        # 2. one gateway stops; its traces wait in the queue and are retried until it is back
        before = decisions(first).get("scored", 0)
        second.stop()
        sent = send_runs(lb.addresses["http"], "lb-app-2", 16)
        partial = eventually(lambda: scored_traces(store.addresses["query"], "lb-app-2"),
                             what="the running gateway's share in Jaeger")
        assert sum(partial.get(t) == SCORERS for t in sent) < 16, partial  # the rest waits
        back = running.enter_context(gateway(config, main.addresses["http"], work,
                                             name="gateway-2-again", grpc_port=grpc_ports[1]))
        scored = eventually(lambda: all_scored(store, "lb-app-2", sent),
                            what="the stopped gateway's traces delivered once it is back")
        assert set(scored.values()) == {SCORERS}  # none lost, none scored twice
        shares = [decisions(first).get("scored", 0) - before, decisions(back).get("scored", 0)]
        assert sum(shares) == 16 and all(shares), shares
        assert dropped_spans(lb) == 0


def all_scored(store: Service, service: str, sent: dict[str, int]) -> dict[str, int] | None:
    scored = scored_traces(store.addresses["query"], service)
    return scored if all(scored.get(t) == SCORERS for t in sent) else None


def test_a_gateway_that_stays_down_loses_only_counted_spans(
        backend: tuple[Service, Service, Path], judge: ScriptedJudgeServer) -> None:
    store, main, work = backend
    config = scorers_config(work, judge)
    up, down = free_port(), free_port()  # nothing ever listens on `down`
    lb_work = work / "lb-short-retry"
    lb_work.mkdir()
    with gateway(config, main.addresses["http"], work, name="gateway-3", grpc_port=up), \
            collector("otelcol-loadbalancing.yaml", lb_work,
                      SCORING_GATEWAY_1=f"127.0.0.1:{up}", SCORING_GATEWAY_2=f"127.0.0.1:{down}",
                      COLLECTOR_OTLP_HTTP_ENDPOINT=main.addresses["http"],
                      GATEWAY_RETRY_MAX_ELAPSED="10s") as lb:
        sent = send_runs(lb.addresses["http"], "lb-app-3", 16)
        # the running gateway's share arrives; the rest is retried for 10 s, then dropped, logged
        lost_spans = eventually(lambda: dropped_spans(lb), timeout_s=120,
                                what="spans for the stopped gateway logged as dropped")

        def settled() -> dict[str, int] | None:
            scored = scored_traces(store.addresses["query"], "lb-app-3")
            complete = len(scored) * 2 + dropped_spans(lb) == sum(sent.values())
            return scored if complete and set(scored.values()) == {SCORERS} else None

        scored = eventually(settled, what="every trace either scored or logged as dropped")
        lost = [t for t in sent if t not in scored]
        assert lost and set(scored) < set(sent)  # both gateways had a share
        assert dropped_spans(lb) == sum(sent[t] for t in lost), (lost_spans, lost)
        assert set(scored.values()) == {SCORERS}  # the other gateway's share, scored once


def send_conversations(endpoint: str, service: str, sessions: int, turns: int) -> list[str]:
    """``sessions`` conversations of ``turns`` turns, each turn its own trace, the sessions
    interleaved, plus one run without a session per round; returns the session keys."""
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BatchSpanProcessor(
        OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces"), schedule_delay_millis=100))
    tracer = provider.get_tracer("app")
    keys = [f"{service}-conversation-{i}" for i in range(sessions)]
    for turn in range(1, turns + 1):
        for key in keys:
            attributes = genai_attributes(prompt=f"{key} question {turn}",
                                          answer=f"{key} answer {turn}", **{"session.id": key})
            with tracer.start_as_current_span("invoke_agent support", attributes=attributes):
                pass
        with tracer.start_as_current_span("invoke_agent support", attributes=genai_attributes(
                prompt=f"no session {turn}")):
            pass
    provider.shutdown()
    return keys


def test_sessions_spread_over_traces_and_gateways_are_each_judged_once_with_every_turn(
        backend: tuple[Service, Service, Path], judge: ScriptedJudgeServer) -> None:
    store, main, work = backend
    turns_port, grpc_ports = free_port(), [free_port(), free_port()]
    config = work / "sessions.yaml"
    config.write_text(json.dumps({
        "judge": {"model": judge.model, "api_base": judge.url, "api_key": "k", "timeout_s": 30},
        "scorers": [{"type": "multi_turn"}],
        # the fleet's turn records are signed: a gateway takes only its fleet's
        "sessions": {"idle_s": 3, "forward_endpoint": f"http://127.0.0.1:{turns_port}",
                     "turn_secret": "fleet-secret-for-the-test"}}))
    lb_work = work / "lb-sessions"
    lb_work.mkdir()
    before = len(judge.requests)
    with contextlib.ExitStack() as running:
        gateways = [running.enter_context(gateway(
            config, main.addresses["http"], work, name=f"session-gateway-{n + 1}",
            grpc_port=port)) for n, port in enumerate(grpc_ports)]
        # one Collector, both tiers: traces by trace id, turn records by session
        lb = running.enter_context(collector(
            "otelcol-loadbalancing.yaml", lb_work,
            SCORING_GATEWAY_1=f"127.0.0.1:{grpc_ports[0]}",
            SCORING_GATEWAY_2=f"127.0.0.1:{grpc_ports[1]}",
            COLLECTOR_OTLP_HTTP_ENDPOINT=main.addresses["http"],
            TURNS_HTTP_ENDPOINT=f"127.0.0.1:{turns_port}"))
        keys = send_conversations(lb.addresses["http"], "sessions-app", sessions=12, turns=3)

        def judged() -> list[int] | None:
            counts = [get_json(f"{g.addresses['http']}/health")["decisions"].get(
                "multi_turn", {}).get("scored", 0) for g in gateways]
            return counts if sum(counts) >= len(keys) else None

        per_gateway = eventually(judged, timeout_s=120, what="12 sessions judged")
        assert sum(per_gateway) == len(keys) and all(per_gateway), per_gateway

        def evaluations() -> dict[str, dict[str, object]] | None:
            found = {}
            for trace in jaeger_traces(store.addresses["query"], "sessions-app"):
                for span in trace["spans"]:
                    if span["operationName"] == "gen_ai.evaluation multi_turn":
                        found.setdefault(str(tags(span)["otel_scorers.session.id"]), []).append(
                            tags(span))
            return found if len(found) == len(keys) else None

        found = eventually(evaluations, what="the 12 session evaluations in Jaeger")
        assert set(found) == set(keys)
        for key, spans in found.items():
            assert len(spans) == 1, (key, spans)  # once
            assert (spans[0]["otel_scorers.session.turns"],
                    spans[0]["otel_scorers.session.new_turns"]) == (3, 3), spans[0]
    transcripts = [fields for request in judge.requests[before:]
                   for name, fields in request.fields.items() if name.startswith("conversation")]
    assert len(transcripts) == len(keys)  # one judge call per session
    for key in keys:
        (transcript,) = [t for t in transcripts if f"{key} question 1" in t]
        for turn in (1, 2, 3):  # every turn, in order, whichever gateway assembled it
            assert f"Turn {turn} - user: {key} question {turn}" in transcript
    events = Path(main.addresses["events"])
    lines = events.read_text().splitlines() if events.exists() else []
    names = {record.get("eventName") for line in lines
             for resource in json.loads(line)["resourceLogs"]
             for scope in resource["scopeLogs"] for record in scope["logRecords"]}
    assert "gen_ai.evaluation.result" in names  # the session evaluations' events went on
    assert "otel_scorers.session.turn" not in names  # the turn records did not
