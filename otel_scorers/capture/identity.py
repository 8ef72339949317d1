"""Who and what a span's run is: the agent's name and the version of what was evaluated.

:class:`CaptureMapping` names the attributes of a convention of your own; without one the
conventions' keys (and the resource's ``service.version``) are read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from otel_scorers import names as n
from otel_scorers.capture.conventions import AGENT_NAME_KEYS, agent_from_span_name

__all__ = ["MAX_VERSION_CHARS", "CaptureMapping", "agent_name", "version_of"]


@dataclass(frozen=True)
class CaptureMapping:
    """Attribute names of your own convention (each optional; others fall back to the defaults)."""

    input: str | None = None
    output: str | None = None
    system: str | None = None
    agent: str | None = None
    #: the version of what was evaluated (an agent or prompt version): read from the span's
    #: attributes, then its resource's; unset: the resource's ``service.version``
    version: str | None = None



def agent_name(span: ReadableSpan, mapping: CaptureMapping | None = None, *,
               attributes: Mapping[str, Any] | None = None,
               span_name: str | None = None) -> str | None:
    """The agent name a span carries (the mapping's key, then the conventions' keys), else
    the one its name gives: OpenInference's smolagents names an agent span
    ``<agent name>.run`` (``ToolCallingAgent.run`` when the agent has no name: none)."""
    attrs = attributes if attributes is not None else (span.attributes or {})
    keys = ((mapping.agent,) if mapping and mapping.agent else ()) + AGENT_NAME_KEYS
    for key in keys:
        value = attrs.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()[:128]
    return agent_from_span_name(attrs, span.name if span_name is None else span_name)


#: The longest version string kept (a version is a label value, never free text).
MAX_VERSION_CHARS = 64


def version_of(span: ReadableSpan, mapping: CaptureMapping | None = None, *,
               attributes: Mapping[str, Any] | None = None) -> str | None:
    """The version of what ``span`` ran: the mapping's ``version`` key on the span, then on
    its resource; without one, the resource's ``service.version``. Text only, stripped and
    bounded (:data:`MAX_VERSION_CHARS`): a number or a list is no version."""
    resource = getattr(getattr(span, "resource", None), "attributes", None) or {}
    if mapping is not None and mapping.version:
        attrs = attributes if attributes is not None else (span.attributes or {})
        places: tuple[Mapping[str, Any], ...] = (attrs, resource)
        key = mapping.version
    else:
        places, key = (resource,), n.SERVICE_VERSION
    for place in places:
        value = place.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()[:MAX_VERSION_CHARS]
    return None
