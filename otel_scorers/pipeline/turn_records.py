"""Turns on the wire: how a gateway fleet gets every turn of a session to one gateway.

Traces reach gateways by trace id (the Collector's load-balancing exporter, ``routing_key:
traceID``), but a session spans many traces. So a gateway that assembles an interaction of a
sampled session does not keep the turn: it sends it on as one compact OTLP log record
(:data:`TURN_EVENT`; the session key in the :data:`KEY_ATTRIBUTE` attribute, the turn in the
body) to ``sessions.forward_endpoint``: a Collector whose ``load_balancing`` exporter routes log
records by that attribute (``routing_key: attributes``) to the gateway that judges the session.
That gateway reads the record (:func:`turn_of_record`) into its session store; every turn of a
session lands on the same gateway, which judges it exactly once per idle period.

Turn records carry conversation content: a gateway never forwards them upstream (it consumes
them, or drops and counts them when it has no session scorer), and reads them with bounds
(text clipped, steps validated and cut, keys checked), like any other input.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from pydantic import ValidationError

from otel_scorers.capture.sessions import MAX_KEY_CHARS
from otel_scorers.scorers.steps import Step
from otel_scorers.scorers.turns import MAX_TURN_CHARS, Turn

__all__ = ["KEY_ATTRIBUTE", "TURN_EVENT", "ReceivedTurn", "TurnForwarder", "is_turn_record",
           "turn_of_record"]

logger = logging.getLogger(__name__)

#: The event name of a turn record, and the attribute the fleet's Collector routes it by.
TURN_EVENT = "otel_scorers.session.turn"
KEY_ATTRIBUTE = "otel_scorers.session.id"
_START = "otel_scorers.session.turn.start_ns"
_SPAN_NAME = "otel_scorers.session.turn.span_name"
_AGENT = "gen_ai.agent.name"
#: Steps read from a record, and characters of a span name or an agent name.
MAX_RECORD_STEPS = 20
MAX_NAME_CHARS = 256


@dataclass(frozen=True)
class ReceivedTurn:
    """A turn read from a record: its session, the turn, its place and span, the context."""

    key: str
    turn: Turn
    start_ns: int
    trace_id: int
    span_id: int
    span_name: str
    system: str | None


def is_turn_record(event_name: str, attributes: Mapping[str, Any]) -> bool:
    return event_name == TURN_EVENT or attributes.get("event.name") == TURN_EVENT


class TurnForwarder:
    """Sends turns as log records to ``endpoint`` (OTLP/HTTP), batched, in the background,
    through a LoggerProvider of its own (never the application's: nothing else is sent, and
    nothing here is scored)."""

    def __init__(self, endpoint: str, *, headers: Mapping[str, str] | None = None) -> None:
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
        from opentelemetry.sdk.resources import Resource

        self.endpoint, self.headers = endpoint, dict(headers or {})
        base = endpoint.rstrip("/")
        url = base if base.endswith("/v1/logs") else base + "/v1/logs"
        self._provider = LoggerProvider(resource=Resource.create(
            {"service.name": "otel-scorers-turns"}))
        self._provider.add_log_record_processor(BatchLogRecordProcessor(
            OTLPLogExporter(endpoint=url, headers=dict(headers or {})),
            schedule_delay_millis=200))
        self._logger = self._provider.get_logger("otel_scorers.sessions")

    def send(self, key: str, turn: Turn, *, start_ns: int, trace_id: int, span_id: int,
             span_name: str, system: str | None) -> None:
        body: dict[str, Any] = {"user": turn.user, "assistant": turn.assistant}
        if system:
            body["system"] = system
        if turn.steps:
            body["steps"] = [step.model_dump(exclude_defaults=True) for step in turn.steps]
        attributes: dict[str, Any] = {KEY_ATTRIBUTE: key, _START: start_ns,
                                      _SPAN_NAME: span_name[:MAX_NAME_CHARS]}
        if turn.agent:
            attributes[_AGENT] = turn.agent
        context: Context | None = None
        if trace_id and span_id:
            context = trace.set_span_in_context(NonRecordingSpan(SpanContext(
                trace_id, span_id, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))),
                Context())
        self._logger.emit(event_name=TURN_EVENT, body=body, attributes=attributes,
                          context=context, timestamp=start_ns or None)

    def fresh(self) -> TurnForwarder:
        """The same forwarder anew (a forked child cannot use the parent's thread)."""
        return TurnForwarder(self.endpoint, headers=self.headers)

    def flush(self, timeout_s: float) -> bool:
        return bool(self._provider.force_flush(int(max(0.0, timeout_s) * 1000)))

    def shutdown(self) -> None:
        self._provider.shutdown()


def turn_of_record(attributes: Mapping[str, Any], body: Any, trace_id: int,
                   span_id: int) -> ReceivedTurn | None:
    """The turn a record carries, or ``None`` when it is malformed (no key, no text)."""
    key = attributes.get(KEY_ATTRIBUTE)
    if not isinstance(key, str) or not key.strip() or not isinstance(body, Mapping):
        return None
    user, answer, system = body.get("user"), body.get("assistant"), body.get("system")
    if not isinstance(user, str) or not isinstance(answer, str) or not answer.strip():
        return None
    start = attributes.get(_START)
    name = attributes.get(_SPAN_NAME)
    agent = attributes.get(_AGENT)
    steps = []
    raw_steps = body.get("steps")
    if isinstance(raw_steps, list):
        for item in raw_steps[:MAX_RECORD_STEPS]:
            try:
                steps.append(Step.model_validate(item))
            except ValidationError:
                continue  # a step we cannot read: the rest of the turn still counts
    turn = Turn.of(0, user, answer, agent=agent[:MAX_NAME_CHARS] if isinstance(agent, str)
                   else None, steps=steps)
    return ReceivedTurn(key.strip()[:MAX_KEY_CHARS], turn,
                        start if isinstance(start, int) and start >= 0 else 0,
                        trace_id, span_id, name[:MAX_NAME_CHARS] if isinstance(name, str) else "",
                        system[:MAX_TURN_CHARS] if isinstance(system, str) and system.strip()
                        else None)
