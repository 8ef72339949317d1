"""Turns on the wire: one turn of a session as one OTLP log record, and back.

Traces reach the gateways of a fleet by trace id, but a session spans many traces. So a gateway
that assembles an interaction of a sampled session sends the turn on as one compact log record
(:data:`TURN_EVENT`; the session key in the :data:`KEY_ATTRIBUTE` attribute, the turn in the
body) to a Collector that routes log records by that attribute to the gateway that judges the
session (docs/sessions.md). This module is the format: :func:`encode_turn` gives a record's body
and attributes, :func:`decode_turn` reads them back, with bounds (text and names clipped, at most
:data:`MAX_RECORD_STEPS` steps, types checked), as plain values; the session lane makes them a
turn (:mod:`otel_scorers.pipeline.sessions`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["KEY_ATTRIBUTE", "TURN_EVENT", "TurnRecord", "decode_turn", "encode_turn",
           "is_turn_record"]

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
class TurnRecord:
    """A turn as a record carries it: its session, both sides, the instructions, the steps (as
    mappings, validated by whoever makes them steps), the agent, its start and span name."""

    key: str
    user: str
    assistant: str
    system: str | None = None
    steps: Sequence[Mapping[str, Any]] = field(default_factory=tuple)
    agent: str | None = None
    start_ns: int = 0
    span_name: str = ""
    #: steps the sending gateway left out (a check needing them is not decided)
    steps_dropped: int = 0


def is_turn_record(event_name: str, attributes: Mapping[str, Any]) -> bool:
    return event_name == TURN_EVENT or attributes.get("event.name") == TURN_EVENT


def encode_turn(record: TurnRecord) -> tuple[dict[str, Any], dict[str, Any]]:
    """The body and attributes of a turn record."""
    body: dict[str, Any] = {"user": record.user, "assistant": record.assistant}
    if record.system:
        body["system"] = record.system
    if record.steps:
        body["steps"] = [dict(step) for step in record.steps]
    attributes: dict[str, Any] = {KEY_ATTRIBUTE: record.key, _START: record.start_ns,
                                  _SPAN_NAME: record.span_name[:MAX_NAME_CHARS]}
    if record.agent:
        attributes[_AGENT] = record.agent
    if record.steps_dropped:
        body["steps_dropped"] = record.steps_dropped
    return body, attributes


def decode_turn(attributes: Mapping[str, Any], body: Any) -> TurnRecord | None:
    """The turn a record carries, or ``None`` when it is malformed (no key, no answer)."""
    key = attributes.get(KEY_ATTRIBUTE)
    if not isinstance(key, str) or not key.strip() or not isinstance(body, Mapping):
        return None
    user, answer, system = body.get("user"), body.get("assistant"), body.get("system")
    if not isinstance(user, str) or not isinstance(answer, str) or not answer.strip():
        return None
    start = attributes.get(_START)
    name = attributes.get(_SPAN_NAME)
    agent = attributes.get(_AGENT)
    steps = body.get("steps")
    cut = body.get("steps_dropped")
    return TurnRecord(
        key=key, user=user, assistant=answer,
        system=system if isinstance(system, str) and system.strip() else None,
        steps=tuple(step for step in steps[:MAX_RECORD_STEPS] if isinstance(step, Mapping))
        if isinstance(steps, list) else (),
        agent=agent[:MAX_NAME_CHARS] if isinstance(agent, str) else None,
        start_ns=start if isinstance(start, int) and not isinstance(start, bool)
        and start >= 0 else 0,
        span_name=name[:MAX_NAME_CHARS] if isinstance(name, str) else "",
        steps_dropped=cut if isinstance(cut, int) and not isinstance(cut, bool) and cut > 0
        else 0)
