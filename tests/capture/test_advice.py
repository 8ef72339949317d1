"""The fix a no-content warning names is true of what was seen: a switch is said to be set
only when it is, and no mode is advised that the instrumentation may not honour."""

from __future__ import annotations

from otel_scorers.capture.advice import content_fix

TRACELOOP = {"traceloop.span.kind": "workflow"}
GENAI_SCOPE = "opentelemetry.instrumentation.openai_agents"


def test_traceloop_false_is_named_only_when_it_is_set() -> None:
    unset = content_fix("opentelemetry.instrumentation.langchain", TRACELOOP, {})
    assert "TRACELOOP_TRACE_CONTENT=false" not in unset
    assert "check that TRACELOOP_TRACE_CONTENT is not false" in unset
    on = content_fix("opentelemetry.instrumentation.langchain", TRACELOOP,
                     {"TRACELOOP_TRACE_CONTENT": "true"})
    assert "TRACELOOP_TRACE_CONTENT=false" not in on
    off = content_fix("opentelemetry.instrumentation.langchain", TRACELOOP,
                      {"TRACELOOP_TRACE_CONTENT": "False"})
    assert "TRACELOOP_TRACE_CONTENT=false (set here)" in off


def test_the_genai_fix_never_advises_event_only_and_follows_the_mode_set() -> None:
    for scope in (GENAI_SCOPE, "gcp.vertex.agent", "my.own.scope"):
        fix = content_fix(scope, {}, {})
        assert "EVENT_ONLY" not in fix and "=SPAN_ONLY" in fix, (scope, fix)
    event_only = content_fix(GENAI_SCOPE, {}, {
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "event_only"})
    assert "=EVENT_ONLY (set here)" in event_only and "set it to SPAN_ONLY" in event_only
    span_only = content_fix("gcp.vertex.agent", {}, {
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY"})
    assert "is set here, yet these spans carry no content" in span_only
    assert "set OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY" not in span_only


def test_framework_switches_are_named_by_their_scope() -> None:
    assert "include_content=True" in content_fix("pydantic-ai", {}, {})
    assert "OPENINFERENCE_HIDE_INPUTS" in content_fix("openinference.instrumentation.x", {}, {})
    assert "span events" in content_fix("strands.telemetry.tracer", {}, {})
