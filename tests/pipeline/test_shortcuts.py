"""The hot path's shortcuts are necessary conditions of the full decisions: a span the worker
would take as a candidate or a piece always passes ``on_end``'s set test (with its attributes)
and the selector's ``could_match``, for spans of every convention and every selection. A new
rule that breaks this would silently stop scoring some spans; this test fails first."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext

from otel_scorers.capture.kinds import span_kind
from otel_scorers.capture.trace import CONTENT_KEY_SET
from otel_scorers.pipeline.selection import Selection, Selector

#: The attributes conventions mark spans with, and values they use (and some they do not).
CONVENTIONS: dict[str, list[Any]] = {
    "gen_ai.operation.name": ["invoke_agent", "agent.run", "invoke_workflow", "chat",
                              "text_completion", "generate_content", "execute_tool", "handoff",
                              "retrieval", "embeddings", "create_agent", "unknown"],
    "openinference.span.kind": ["AGENT", "CHAIN", "LLM", "TOOL", "RETRIEVER", "RERANKER",
                                "EMBEDDING", "GUARDRAIL"],
    "traceloop.span.kind": ["agent", "workflow", "task", "tool", "handoff", "unknown"],
    "mastra.span.type": ["agent_run", "workflow_run", "llm_generation", "tool_call", "other"],
    "llm.request.type": ["chat", "completion", "embedding"],
    "gen_ai.agent.name": ["support", "billing", "triage"],
    "agent.name": ["support", "researcher"],
    "team": ["a", "b"],
    **{key: ["content"] for key in CONTENT_KEY_SET},
}
NOISE = ["http.method", "db.system", "service.tier", "user.id"]

attributes = st.dictionaries(
    st.sampled_from(sorted(CONVENTIONS) + NOISE),
    st.one_of(st.sampled_from(["x", 1, True]), st.just("AGENT")), max_size=6,
).flatmap(lambda keys: st.fixed_dictionaries({
    key: st.sampled_from(CONVENTIONS.get(key, ["x", 1, True])) for key in keys}))

SELECTIONS = [
    Selection(),
    Selection(per_agent=True),
    Selection(include_llm_spans=True),
    Selection(agents=["support"]),
    Selection(attributes={"team": "a"}),
    Selection(agent_conventions=False, attributes={"team": ["a", "b"]}),
    Selection(agents=["support"], per_agent=True, include_llm_spans=True),
    Selection(span_names=["invoke*"]),
]


def span(attrs: dict[str, Any], name: str = "invoke_agent x") -> ReadableSpan:
    return ReadableSpan(name=name, context=SpanContext(1, 2, is_remote=False),
                        attributes=attrs)


@settings(max_examples=400, deadline=None)
@given(attrs=attributes, index=st.integers(0, len(SELECTIONS) - 1))
def test_whatever_the_worker_would_take_passes_the_hot_path(attrs: dict[str, Any],
                                                            index: int) -> None:
    selector = Selector(SELECTIONS[index])
    watched = selector.watched  # on_end's own first test
    kind = span_kind(attrs)
    chosen = selector.kind_of(span(attrs), attrs)
    piece = kind is not None or not CONTENT_KEY_SET.isdisjoint(attrs)
    if chosen is not None or piece:
        assert not watched.isdisjoint(attrs), (attrs, SELECTIONS[index])
    if chosen is not None:
        assert selector.could_match(attrs, kind), (attrs, SELECTIONS[index])


def test_the_agents_filter_warning_quotes_and_bounds_what_the_telemetry_named() -> None:
    """The names in the filter's warning come from spans: each is quoted and cut, at most
    ten are listed, and a match silences the warning for good."""
    from otel_scorers.pipeline.selection import MAX_TURNED_AWAY, Selection

    selector = Selector(Selection(agents=["billing-bot"]))
    assert selector.filter_warning() is None
    hostile = "evil\nINFO otel-scorers: all good " + "x" * 10_000
    assert not selector.keeps({hostile}, "root")
    assert not selector.keeps(set(), "weird\r\nspan")
    for index in range(20):
        selector.keeps({f"agent-{index}"}, "root")
    line = selector.filter_warning()
    assert line is not None and "\n" not in line and "\r" not in line
    assert len(line) < 2_000 and "agent-19" not in line
    assert len(selector.turned_away) <= MAX_TURNED_AWAY + 1
    assert "no agent name: span 'weird\\r\\nspan'" in line
    assert selector.keeps({"billing-bot"}, "root")
    assert selector.filter_warning() is None
