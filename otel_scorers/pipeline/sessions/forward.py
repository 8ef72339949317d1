"""Turns sent to the fleet: a gateway that assembles an interaction of a sampled session sends
the turn, as one OTLP log record (:mod:`otel_scorers.otlp.turns`), to ``sessions.forward_endpoint``:
a Collector that routes it to the gateway judging the session. Turn records carry conversation
content: a gateway never forwards them upstream (it consumes them, or drops and counts them when
it has no session scorer). With ``sessions.turn_secret`` each record is signed, so the gateway
judging the session can tell the fleet's records from anyone else's.
"""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from otel_scorers.otlp.turns import TURN_EVENT, TurnRecord, encode_turn
from otel_scorers.scorers.turns import Turn

__all__ = ["TurnForwarder"]


class TurnForwarder:
    """Sends turns as log records to ``endpoint`` (OTLP/HTTP), batched, in the background,
    through a LoggerProvider of its own (never the application's: nothing else is sent, and
    nothing here is scored)."""

    def __init__(self, endpoint: str, *, headers: Mapping[str, str] | None = None,
                 secret: bytes | None = None) -> None:
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
        from opentelemetry.sdk.resources import Resource

        self.endpoint, self.headers = endpoint, dict(headers or {})
        self._secret = secret
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
        body, attributes = encode_turn(TurnRecord(
            key, turn.user, turn.assistant, system,
            [step.model_dump(exclude_defaults=True) for step in turn.steps], turn.agent,
            start_ns, span_name, turn.steps_dropped), self._secret)
        context: Context | None = None
        if trace_id and span_id:
            context = trace.set_span_in_context(NonRecordingSpan(SpanContext(
                trace_id, span_id, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))),
                Context())
        self._logger.emit(event_name=TURN_EVENT, body=body, attributes=attributes,
                          context=context, timestamp=start_ns or None)

    def fresh(self) -> TurnForwarder:
        """The same forwarder anew (a forked child cannot use the parent's thread)."""
        return TurnForwarder(self.endpoint, headers=self.headers, secret=self._secret)

    def flush(self, timeout_s: float) -> bool:
        return bool(self._provider.force_flush(int(max(0.0, timeout_s) * 1000)))

    def shutdown(self) -> None:
        self._provider.shutdown()
