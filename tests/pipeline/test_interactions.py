"""One interaction, one evaluation: the topmost agent, workflow or chain span of each part of a
trace is judged, once, when the trace's local root ends (or the trace goes idle, or at flush).

Hand-made spans test the rules; tests/frameworks proves them on real frameworks' spans.
"""

from __future__ import annotations

import json
import time
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from otel_scorers.capture.interactions import Candidate, resolve
from otel_scorers.capture.trace import TraceBuffer
from otel_scorers.names import Reason
from otel_scorers.testing import ScriptedJudgeServer, judge_responder
from tests.support import Telemetry

QUESTION = [{"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]}]
ANSWER = [{"role": "assistant", "parts": [{"type": "text", "content": "Sunny."}]}]


def chat(telemetry: Telemetry, answer: list[dict[str, Any]] | None = None) -> None:
    with telemetry.tracer().start_as_current_span("chat", attributes={
            "gen_ai.operation.name": "chat", "gen_ai.input.messages": json.dumps(QUESTION),
            "gen_ai.output.messages": json.dumps(answer or ANSWER)}):
        pass


def graph(telemetry: Telemetry, *, steps: int = 2) -> None:
    """A graph root (CHAIN) whose ``agent`` node is an AGENT span once per step."""
    tracer = telemetry.tracer()
    with tracer.start_as_current_span("LangGraph", attributes={
            "openinference.span.kind": "CHAIN"}):
        for _ in range(steps):
            with tracer.start_as_current_span("agent", attributes={
                    "openinference.span.kind": "AGENT"}):
                chat(telemetry)


def spans(candidates: list[tuple[str, str, str | None]]) -> tuple[list[Candidate], dict[int, Any]]:
    """Candidates from (name, kind, parent name) triples, with their parent links."""
    ids = {name: index + 1 for index, (name, _, _) in enumerate(candidates)}
    parents: dict[int, int | None] = {}
    out = []
    for name, kind, parent in candidates:
        context = SpanContext(1, ids[name], is_remote=False)
        parent_context = SpanContext(1, ids[parent], is_remote=False) if parent else None
        span = ReadableSpan(name=name, context=context, parent=parent_context,
                            start_time=ids[name], end_time=100 - ids[name])
        parents[ids[name]] = ids[parent] if parent else None
        out.append(Candidate(span, {}, kind))
    return out, parents


def test_the_topmost_candidate_is_the_interaction_and_holds_the_others() -> None:
    candidates, parents = spans([("workflow", "chain", None), ("triage", "agent", "workflow"),
                                 ("weather", "agent", "triage")])
    interactions, rest = resolve(candidates, parents, llm_spans={3})
    assert rest == [] and len(interactions) == 1
    assert interactions[0].root.span.name == "workflow"
    assert [c.span.name for c in interactions[0].inner] == ["triage", "weather"]


def test_a_chain_is_an_interaction_only_when_it_holds_an_llm_call() -> None:
    candidates, parents = spans([("prompt template", "chain", None), ("agent", "agent", None)])
    interactions, rest = resolve(candidates, parents, llm_spans=set())
    assert [i.root.span.name for i in interactions] == ["agent"]  # an agent always is
    assert [c.span.name for c in rest] == ["prompt template"]


def test_two_agent_runs_under_one_request_are_two_interactions() -> None:
    candidates, parents = spans([("POST /chat", "none", None), ("a", "agent", "POST /chat"),
                                 ("b", "agent", "POST /chat")])
    interactions, _ = resolve(candidates[1:], parents, llm_spans=set())
    assert sorted(i.root.span.name for i in interactions) == ["a", "b"]


def test_a_react_loop_is_judged_once_on_its_graph_root(
        telemetry: Telemetry, make_processor: Any, judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder()
    processor = make_processor()
    graph(telemetry, steps=2)
    assert processor.force_flush(10_000)
    for name in ("rubric", "prompt_alignment"):
        assert processor.stats()[name] == {"selected": 1, "scored": 1}
    (evaluation,) = telemetry.evaluation_spans("rubric")
    assert evaluation.attributes["otel_scorers.evaluated.span_name"] == "LangGraph"


def test_an_interaction_waits_for_its_local_root(
        telemetry: Telemetry, make_processor: Any, judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder()
    processor = make_processor(interaction_wait_s=30)
    tracer = telemetry.tracer()
    with tracer.start_as_current_span("POST /chat"):
        graph(telemetry)
        time.sleep(0.6)  # the worker has seen the graph end, not its root
        assert processor.stats()["rubric"] == {}
    assert processor.force_flush(10_000)
    assert processor.stats()["rubric"] == {"selected": 1, "scored": 1}


def test_an_interaction_whose_root_never_ends_is_decided_when_its_trace_goes_idle(
        telemetry: Telemetry, make_processor: Any, judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder()
    processor = make_processor(interaction_wait_s=0.5)
    tracer = telemetry.tracer()
    root = tracer.start_span("long-lived session")
    with trace.use_span(root):
        graph(telemetry)
    deadline = time.monotonic() + 10
    while processor.stats()["rubric"].get("scored") != 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processor.stats()["rubric"] == {"selected": 1, "scored": 1}
    root.end()


def test_a_span_with_a_remote_parent_is_its_process_root(
        telemetry: Telemetry, make_processor: Any, judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder()
    processor = make_processor(interaction_wait_s=60)
    remote = SpanContext(0xABC, 0xDEF, is_remote=True, trace_flags=TraceFlags(1))
    with trace.use_span(NonRecordingSpan(remote)):
        graph(telemetry)
    deadline = time.monotonic() + 10  # no flush: the remote parent's child is the local root
    while processor.stats()["rubric"].get("scored") != 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processor.stats()["rubric"] == {"selected": 1, "scored": 1}


def test_every_span_reaches_the_exporter_whether_or_not_it_is_an_interaction(
        telemetry: Telemetry, make_processor: Any, judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder()
    exporter = InMemorySpanExporter()
    processor = make_processor(exporter=exporter)
    graph(telemetry)  # the root is judged, its agent nodes and LLM calls are not
    with telemetry.tracer().start_as_current_span("lonely chain", attributes={
            "openinference.span.kind": "CHAIN"}):
        pass  # a topmost chain without an LLM call: no interaction
    assert processor.force_flush(10_000)
    app = [s for s in exporter.get_finished_spans()
           if not s.name.startswith("gen_ai.evaluation")]
    exported = {s.name: s for s in app}
    assert sorted(exported) == ["LangGraph", "agent", "chat", "lonely chain"]
    assert len(app) == 6
    assert "otel_scorers.rubric.score" in (exported["LangGraph"].attributes or {})


def test_candidates_of_an_evicted_trace_are_handed_back_not_lost() -> None:
    buffer = TraceBuffer(max_traces=1)
    first, _ = spans([("agent", "agent", None)])
    buffer.add_candidate(first[0])
    other = ReadableSpan(name="x", context=SpanContext(2, 9, is_remote=False))
    buffer.add_candidate(Candidate(other, {}, "agent"))  # evicts the first trace
    (evicted,) = buffer.take_evicted()
    assert evicted.reason == Reason.TRACE_LIMIT
    assert [c.span.name for c in evicted.candidates] == ["agent"]


def test_a_cleared_buffer_hands_back_every_pending_candidate_and_holds_nothing() -> None:
    """What a stopping processor does with its buffer: the candidates still pending (and
    those evicted but not yet taken) come back marked with the stop's reason, to be counted;
    nothing, content included, stays held."""
    buffer = TraceBuffer(max_traces=2)
    (first,), _ = spans([("agent", "agent", None)])
    buffer.add_candidate(first)
    for trace_id in (2, 3):  # the third trace evicts the first
        buffer.add_candidate(Candidate(ReadableSpan(
            name=f"run {trace_id}", context=SpanContext(trace_id, 9, is_remote=False)), {},
            "agent"))
    assert len(buffer) == 2 and buffer.bytes > 0
    left = buffer.clear(Reason.SHUTDOWN)
    assert sorted((p.reason, p.candidates[0].span.name) for p in left) == [
        (Reason.SHUTDOWN, "run 2"), (Reason.SHUTDOWN, "run 3"), (Reason.TRACE_LIMIT, "agent")]
    assert len(buffer) == 0 and buffer.bytes == 0 and buffer.take_evicted() == []




def test_an_app_that_flushes_right_after_a_long_run_gets_no_false_warning(
        telemetry: Telemetry, make_processor: Any, judge_server: ScriptedJudgeServer,
        caplog: Any) -> None:
    judge_server.responder = judge_responder()
    processor = make_processor()
    with caplog.at_level("WARNING", logger="otel_scorers"):
        with telemetry.tracer().start_as_current_span("LangGraph", attributes={
                "openinference.span.kind": "CHAIN"}):
            for _ in range(25):  # more LLM calls than the warning's threshold, in the run
                chat(telemetry)
        assert processor.force_flush(10_000)  # at once, as serverless handlers do
    assert processor.stats()["rubric"] == {"selected": 1, "scored": 1}
    assert not [r for r in caplog.records if "LLM-client level" in r.getMessage()]
