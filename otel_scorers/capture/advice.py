"""What to change when an interaction has nothing to judge: the switch of the instrumentation
that recorded it.

Content capture is off by default in most GenAI instrumentations, and each has its own
switch. The instrumentation is told by the interaction span's instrumentation scope (and, for
OpenLLMetry, whose scopes look like the OpenTelemetry contrib ones, by its ``traceloop.*``
attributes).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["content_fix"]

_GENAI = ("set OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY (with "
          "OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental; EVENT_ONLY works too when "
          "the log side is installed)")
_FIXES: tuple[tuple[str, str], ...] = (
    ("pydantic-ai", "pydantic-ai records no message text with include_content=False: instrument "
                    "with InstrumentationSettings(include_content=True)"),
    ("pydantic_ai", "pydantic-ai records no message text with include_content=False: instrument "
                    "with InstrumentationSettings(include_content=True)"),
    ("gcp.vertex.agent", "Google ADK records no message content by default: " + _GENAI),
    ("strands", "strands-agents records the conversation as span events: keep them (no span "
                "event limit of 0, no processor that drops events)"),
    ("openinference", "OpenInference hides content when OPENINFERENCE_HIDE_INPUTS / "
                      "OPENINFERENCE_HIDE_OUTPUTS (or TraceConfig(hide_inputs=True)) is set: "
                      "unset them"),
    ("opentelemetry.instrumentation", _GENAI),
)
_TRACELOOP = "OpenLLMetry records no content with TRACELOOP_TRACE_CONTENT=false: set it to true"


def content_fix(scope: str | None, attrs: Mapping[str, Any]) -> str:
    """The setting that makes this instrumentation record the conversation."""
    if any(key.startswith("traceloop.") for key in attrs):
        return _TRACELOOP
    name = scope or ""
    for prefix, fix in _FIXES:
        if name.startswith(prefix):
            return fix
    return ("turn on your instrumentation's message content capture (for the OpenTelemetry "
            "GenAI instrumentations: " + _GENAI[4:] + "), or map your own attributes with "
            "capture={'input': ..., 'output': ...}")
