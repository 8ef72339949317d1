"""Turns on the wire: one turn of a session as one OTLP log record, and back.

Traces reach the gateways of a fleet by trace id, but a session spans many traces. So a gateway
that assembles an interaction of a sampled session sends the turn on as one compact log record
(:data:`TURN_EVENT`; the session key in the :data:`KEY_ATTRIBUTE` attribute, the turn in the
body) to a Collector that routes log records by that attribute to the gateway that judges the
session (docs/sessions.md). This module is the format: :func:`encode_turn` gives a record's body
and attributes, :func:`decode_turn` reads them back, with bounds (text and names clipped, at most
:data:`MAX_RECORD_STEPS` steps, types checked), as plain values; the session lane makes them a
turn (:mod:`otel_scorers.pipeline.sessions`).

A record carries conversation content and adds turns to a session that is judged and reported,
so a receiving gateway must know it came from the fleet. With ``sessions.turn_secret`` the
sender signs each record (:func:`sign_turn`: HMAC-SHA256 of the fields read back, in a
canonical JSON form, in the :data:`SIGNATURE_ATTRIBUTE` attribute) and the receiver takes only
records whose signature :func:`verify_turn` accepts. The signature covers the session key,
start, span name, agent and the whole body; a replayed record is the same turn again (the store
keeps it once).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["KEY_ATTRIBUTE", "SIGNATURE_ATTRIBUTE", "TURN_EVENT", "TurnRecord", "decode_turn",
           "encode_turn", "is_turn_record", "sign_turn", "verify_turn"]

#: The event name of a turn record, and the attribute the fleet's Collector routes it by.
TURN_EVENT = "otel_scorers.session.turn"
KEY_ATTRIBUTE = "otel_scorers.session.id"
_START = "otel_scorers.session.turn.start_ns"
_SPAN_NAME = "otel_scorers.session.turn.span_name"
_AGENT = "gen_ai.agent.name"
SIGNATURE_ATTRIBUTE = "otel_scorers.session.turn.signature"
_SIGNED = (KEY_ATTRIBUTE, _START, _SPAN_NAME, _AGENT)
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


def encode_turn(record: TurnRecord, secret: bytes | None = None
                ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The body and attributes of a turn record (signed with ``secret`` when given)."""
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
    if secret:
        attributes[SIGNATURE_ATTRIBUTE] = sign_turn(attributes, body, secret)
    return body, attributes


def sign_turn(attributes: Mapping[str, Any], body: Any, secret: bytes) -> str:
    """The signature of a record: HMAC-SHA256 (hex) of its signed fields and body."""
    signed = {name: attributes.get(name) for name in _SIGNED}
    text = json.dumps([signed, body], sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False, default=repr)
    return hmac.new(secret, text.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


def verify_turn(attributes: Mapping[str, Any], body: Any, secret: bytes) -> bool:
    """Whether a record carries the signature ``secret`` gives it (compared in constant
    time; a missing or malformed one is no signature)."""
    given = attributes.get(SIGNATURE_ATTRIBUTE)
    if not isinstance(given, str) or len(given) != 64:
        return False
    try:
        expected = sign_turn(attributes, body, secret)
    except (TypeError, ValueError, RecursionError):
        return False
    return hmac.compare_digest(given, expected)


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
