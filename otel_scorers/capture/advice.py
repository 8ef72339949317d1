"""What to change when an interaction has nothing to judge: the switch of the instrumentation
that recorded it.

Content capture is off by default in most GenAI instrumentations, and each has its own
switch. The instrumentation is told by the interaction span's instrumentation scope (and, for
OpenLLMetry, whose scopes look like the OpenTelemetry contrib ones, by its ``traceloop.*``
attributes).

A fix names only what is true of what was seen: a switch is said to be set only when this
process's environment sets it (in the application that is the instrumentation's own; at a
gateway it is not, and the fix says what to check where the application runs). ``EVENT_ONLY``
is never advised: not every GenAI instrumentation writes log records (the OpenAI Agents SDK's
v2 instrumentation writes none), while ``SPAN_ONLY`` puts the content on the spans for all.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

__all__ = ["content_fix"]

_GENAI_MODE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_GENAI = (f"set {_GENAI_MODE}=SPAN_ONLY (with "
          "OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental) where the application runs")
_PYDANTIC = ("pydantic-ai records no message text with include_content=False: instrument "
             "with InstrumentationSettings(include_content=True)")
_FIXES: tuple[tuple[str, str | None], ...] = (
    ("pydantic-ai", _PYDANTIC),
    ("pydantic_ai", _PYDANTIC),
    ("gcp.vertex.agent", None),  # Google ADK: the GenAI content switch, off by default
    ("strands", "strands-agents records the conversation as span events: keep them (no span "
                "event limit of 0, no processor that drops events)"),
    ("openinference", "OpenInference hides content when OPENINFERENCE_HIDE_INPUTS / "
                      "OPENINFERENCE_HIDE_OUTPUTS (or TraceConfig(hide_inputs=True)) is set: "
                      "unset them"),
    ("opentelemetry.instrumentation", None),
)
_FALSE = ("false", "0", "no", "off")


def content_fix(scope: str | None, attrs: Mapping[str, Any],
                environ: Mapping[str, str] | None = None) -> str:
    """The setting that makes this instrumentation record the conversation (``environ``:
    this process's environment, :data:`os.environ` by default)."""
    env = os.environ if environ is None else environ
    if any(key.startswith("traceloop.") for key in attrs):
        return _traceloop_fix(env)
    name = scope or ""
    for prefix, fix in _FIXES:
        if name.startswith(prefix):
            return fix if fix is not None else _genai_fix(env)
    return (f"turn on your instrumentation's message content capture (for the OpenTelemetry "
            f"GenAI instrumentations: {_GENAI[4:]}), or map your own attributes with "
            "capture={'input': ..., 'output': ...}")


def _traceloop_fix(env: Mapping[str, str]) -> str:
    if env.get("TRACELOOP_TRACE_CONTENT", "").strip().lower() in _FALSE:
        return "OpenLLMetry records no content with TRACELOOP_TRACE_CONTENT=false (set here): " \
               "set it to true"
    return ("OpenLLMetry recorded no prompt or completion on these spans: where the application "
            "runs, check that TRACELOOP_TRACE_CONTENT is not false and Traceloop.init() is not "
            "given trace_content=False, and that nothing on the way removes the spans' "
            "traceloop.entity.input / gen_ai.prompt attributes")


def _genai_fix(env: Mapping[str, str]) -> str:
    mode = env.get(_GENAI_MODE, "").strip().upper()
    if mode == "EVENT_ONLY":
        return (f"{_GENAI_MODE}=EVENT_ONLY (set here) keeps the content off the spans, and no "
                "log record with it reached otel-scorers for this run: set it to SPAN_ONLY, or "
                "register otel-scorers' log side on the LoggerProvider (install() does) if "
                "this instrumentation writes log records")
    if mode in ("SPAN_ONLY", "SPAN_AND_EVENT"):
        return (f"{_GENAI_MODE}={mode} is set here, yet these spans carry no content: this "
                "instrumentation may also need "
                "OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental, or something on the "
                "way removes the gen_ai.input.messages / gen_ai.output.messages attributes")
    return _GENAI
