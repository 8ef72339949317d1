"""Turn records at the gateway (a session fleet's wire format): taken out of ``/v1/logs``,
never forwarded upstream; kept for the session scorers (a turn delivered twice kept once), read
with bounds (huge text clipped); malformed ones dropped and counted; without a session scorer
all dropped and counted, and said once."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord

from otel_scorers.otlp.turns import KEY_ATTRIBUTE, TURN_EVENT
from otel_scorers.pipeline.sessions import TurnForwarder
from otel_scorers.scorers.turns import Turn
from otel_scorers.testing import ScriptedJudgeServer, judge_responder
from tests.gateway.test_gateway import _config, gateway, health
from tests.support import Upstream

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def record(event: str, attributes: dict[str, Any], body: AnyValue | None = None) -> LogRecord:
    made = LogRecord(event_name=event, attributes=[
        KeyValue(key=k, value=AnyValue(string_value=v) if isinstance(v, str)
                 else AnyValue(int_value=v)) for k, v in attributes.items()])
    if body is not None:
        made.body.CopyFrom(body)
    return made


def request(*records: LogRecord) -> bytes:
    body = ExportLogsServiceRequest()
    body.resource_logs.add().scope_logs.add().log_records.extend(records)
    return bytes(body.SerializeToString())


def post_logs(url: str, body: bytes) -> int:
    req = urllib.request.Request(f"{url}/v1/logs", data=body, method="POST",
                                 headers={"Content-Type": "application/x-protobuf"})
    with urllib.request.urlopen(req, timeout=10) as response:
        return int(response.status)


def map_body(**values: str) -> AnyValue:
    body = AnyValue()
    for key, value in values.items():
        body.kvlist_value.values.add(key=key, value=AnyValue(string_value=value))
    return body


async def test_turn_records_are_kept_bounded_and_never_forwarded(
        tmp_path: Path, judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder()
    config = _config(tmp_path, judge_server, scorers=[{"type": "multi_turn"}],
                     sessions={"idle_s": 1, "accept_turns": True})
    async with Upstream() as upstream:
        with gateway(config, upstream.url) as url:
            sender = TurnForwarder(url)  # the real sender, as another gateway sends
            huge = "x" * 1_000_000
            sender.send("s-1", Turn.of(0, "first question", "first answer"), start_ns=1,
                        trace_id=7, span_id=1, span_name="invoke_agent bot", system=None)
            sender.send("s-1", Turn.of(0, huge, "second answer"), start_ns=2, trace_id=8,
                        span_id=2, span_name="invoke_agent bot", system="Be brief.")
            assert sender.flush(10)
            sender.shutdown()
            again = TurnForwarder(url)  # the first turn delivered again (a retried request)
            again.send("s-1", Turn.of(0, "first question", "first answer"), start_ns=1,
                       trace_id=7, span_id=1, span_name="invoke_agent bot", system=None)
            assert again.flush(10)
            again.shutdown()
            malformed = request(
                record(TURN_EVENT, {}, map_body(user="u", assistant="a")),  # no key
                record(TURN_EVENT, {KEY_ATTRIBUTE: "s-2"}),  # no body
                record(TURN_EVENT, {KEY_ATTRIBUTE: "s-2"}, map_body(user="u")),  # no answer
                record(TURN_EVENT, {KEY_ATTRIBUTE: "s-2"}, AnyValue(string_value="text")),
                record("app.event", {"app.note": "kept"}))  # an ordinary record
            assert post_logs(url, malformed) == 200
            deadline = time.monotonic() + 30
            while not judge_server.requests and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
            state = health(url)["health"]
            await upstream.wait_for(lambda _spans: upstream.logs, timeout=10)
    assert len(judge_server.requests) == 1, state  # one session, judged once
    transcript = judge_server.requests[0].fields["conversation (2 turns)"]
    assert transcript.count("first question") == 1  # delivered twice, kept once
    assert "x" * 1_500 + " [...]" in transcript and "x" * 9_000 not in transcript
    assert state["sessions"]["invalid_records"] == 4
    forwarded = json.dumps([str(item) for item in upstream.logs])
    assert "app.note" in forwarded  # the ordinary record went on
    assert TURN_EVENT not in forwarded and "first question" not in forwarded


async def test_without_a_session_scorer_turn_records_are_dropped_counted_not_forwarded(
        tmp_path: Path, judge_server: ScriptedJudgeServer) -> None:
    config = _config(tmp_path, judge_server)
    async with Upstream() as upstream:
        with gateway(config, upstream.url) as url:
            body = request(record(TURN_EVENT, {KEY_ATTRIBUTE: "s-9"},
                                  map_body(user="secret question", assistant="answer")))
            assert post_logs(url, body) == 200
            state = health(url)
    assert state["health"]["turn_records_dropped"] == 1
    assert state["requests"].get("logs:turns") == 1
    assert "secret question" not in json.dumps([str(item) for item in upstream.logs])


async def test_turn_records_need_the_fleet_secret_a_token_or_an_explicit_yes(
        tmp_path: Path, judge_server: ScriptedJudgeServer) -> None:
    """Anyone reaching the port could add turns to any session: with a turn secret only
    records it signs are taken (a forged, tampered or unsigned one is dropped and counted);
    with neither a secret, a token nor ``accept_turns`` none is taken, and that is said."""
    judge_server.responder = judge_responder()
    secret = "fleet-secret-1"
    config = _config(tmp_path, judge_server, scorers=[{"type": "multi_turn"}],
                     sessions={"idle_s": 1, "turn_secret": secret})
    async with Upstream() as upstream:
        with gateway(config, upstream.url) as url:
            fleet = TurnForwarder(url, secret=secret.encode())
            fleet.send("s-1", Turn.of(0, "the fleet's question", "an answer"), start_ns=1,
                       trace_id=7, span_id=1, span_name="invoke_agent bot", system=None)
            assert fleet.flush(10)
            fleet.shutdown()
            for forger in (TurnForwarder(url), TurnForwarder(url, secret=b"guessed")):
                forger.send("s-1", Turn.of(0, "injected question", "injected answer"),
                            start_ns=2, trace_id=8, span_id=2, span_name="x", system=None)
                assert forger.flush(10)
                forger.shutdown()
            # a signed record with its text changed on the way
            from otel_scorers.otlp.turns import TurnRecord, encode_turn
            body, attributes = encode_turn(TurnRecord("s-1", "q", "a"), secret.encode())
            tampered = request(record(TURN_EVENT, attributes,
                                      map_body(user="q", assistant="a, and more")))
            assert post_logs(url, tampered) == 200
            deadline = time.monotonic() + 30
            while not judge_server.requests and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
            state = health(url)["health"]
    assert len(judge_server.requests) == 1, state
    transcript = judge_server.requests[0].fields["conversation (1 turns)"]
    assert "the fleet's question" in transcript and "injected" not in transcript
    assert state["sessions"]["unsigned_records"] == 3

    open_config = _config(tmp_path, judge_server, scorers=[{"type": "multi_turn"}],
                          sessions={"idle_s": 1})
    async with Upstream() as upstream:
        with gateway(open_config, upstream.url) as url:
            body = request(record(TURN_EVENT, {KEY_ATTRIBUTE: "s-3"},
                                  map_body(user="q", assistant="a")))
            assert post_logs(url, body) == 200
            state = health(url)["health"]
    assert state["sessions"]["refused_records"] == 1
    assert state["sessions"]["held"] == 0
