"""The span processor end to end with real OTel providers and the scripted judge over HTTP."""

from __future__ import annotations

import json
import os
import time
from typing import Any

import pytest
from opentelemetry.trace import StatusCode

from otel_scorers import ConfigError, RubricScorer
from otel_scorers.judge.client import JudgeClient
from otel_scorers.names import Decision
from otel_scorers.pipeline import Sampling, ScorerSpec, Selection
from otel_scorers.testing import ScriptedJudgeServer, fault, hang, judge_responder
from tests.support import Telemetry, end_agent_span, genai_attributes

TERMINAL = Decision.TERMINAL


def assert_identity(stats: dict[str, dict[str, int]]) -> None:
    for scorer, counts in stats.items():
        terminal = sum(counts.get(d, 0) for d in TERMINAL)
        assert counts.get("selected", 0) == terminal, (scorer, counts)


def test_scores_an_agent_run(telemetry: Telemetry, make_processor: Any,
                             judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder(satisfied=lambda i, t: i == 1,
                                             user=(1, 1, 0.5, 1), system=(1, 1, 1, 1))
    processor = make_processor()
    agent = end_agent_span(telemetry)
    assert processor.force_flush(10_000)
    evaluations = telemetry.evaluation_spans()
    assert sorted(s.name for s in evaluations) == [
        "gen_ai.evaluation prompt_alignment", "gen_ai.evaluation rubric"]
    for span in evaluations:
        assert span.parent is not None and span.parent.span_id == agent.context.span_id
        assert span.context.trace_id == agent.context.trace_id
        assert span.attributes["gen_ai.operation.name"] == "evaluation"
        assert span.attributes["otel_scorers.agent.name"] == "support-bot"
        assert span.attributes["otel_scorers.capture.source"] == "genai"
        assert span.attributes["otel_scorers.judge.model"] == "openai/scripted-judge"
        assert span.attributes["otel_scorers.judge.input_tokens"] == 100
    rubric = telemetry.evaluation_spans("rubric")[0].attributes
    assert rubric["gen_ai.evaluation.score.value"] == 0.0
    assert rubric["gen_ai.evaluation.score.label"] == "fail"
    assert rubric["otel_scorers.pass"] is False
    assert rubric["otel_scorers.criterion.greets_the_user.satisfied"] is True
    assert rubric["otel_scorers.criterion.is_polite.satisfied"] is False
    assert rubric["otel_scorers.criterion.is_polite.required"] is True
    assert rubric["otel_scorers.criteria.unmet"] == ("is_polite",)
    assert "Rubric not satisfied" in rubric["gen_ai.evaluation.explanation"]
    alignment = telemetry.evaluation_spans("prompt_alignment")[0].attributes
    assert alignment["gen_ai.evaluation.score.value"] == 0.93  # 0.7 x 0.9 + 0.3 x 1
    assert alignment["otel_scorers.mode"] == "both"
    assert alignment["otel_scorers.dimension.user.completeness.score"] == 0.5
    assert alignment["otel_scorers.dimension.system.intent.score"] == 1.0
    assert processor.stats() == {"rubric": {"selected": 1, "scored": 1},
                                 "prompt_alignment": {"selected": 1, "scored": 1}}
    # exactly one judge call per scorer, and what the judge saw came from the span
    assert len(judge_server.requests) == 2
    assert all("Hello, who are you?" in r.text for r in judge_server.requests)


def test_log_events_carry_the_evaluated_span_ids(telemetry: Telemetry, make_processor: Any,
                                                 judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder()
    processor = make_processor()
    agent = end_agent_span(telemetry)
    processor.force_flush(10_000)
    logs = telemetry.logs()
    assert len(logs) == 2
    for record in logs:
        log = record.log_record
        assert log.event_name == "gen_ai.evaluation.result"
        assert log.trace_id == agent.context.trace_id
        assert log.span_id == agent.context.span_id
        assert log.attributes["gen_ai.evaluation.name"] in ("rubric", "prompt_alignment")
        assert log.attributes["gen_ai.evaluation.score.value"] == 1.0


def test_metrics(telemetry: Telemetry, make_processor: Any,
                 judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder(satisfied=lambda i, t: i == 1)
    processor = make_processor()
    for i in range(3):  # three distinct runs (identical ones would share one judge call)
        end_agent_span(telemetry, prompt=f"Hello, who are you? ({i})")
    processor.force_flush(10_000)
    value = telemetry.metric_value
    assert value("otel_scorers.decisions", scorer="rubric", decision="selected") == 3
    assert value("otel_scorers.decisions", scorer="rubric", decision="scored") == 3
    assert value("otel_scorers.evaluations", scorer="rubric", label="fail", passed="false") == 3
    assert value("otel_scorers.evaluations", scorer="prompt_alignment", label="excellent") == 3
    assert value("otel_scorers.criterion.verdicts", criterion="greets_the_user",
                 satisfied="true") == 3
    assert value("otel_scorers.criterion.verdicts", criterion="is_polite", satisfied="false") == 3
    assert value("otel_scorers.evaluation.score", scorer="rubric") == 3  # histogram count
    assert value("otel_scorers.dimension.score", side="system", dimension="intent") == 3
    assert value("otel_scorers.judge.tokens", scorer="rubric", token_type="input") == 300
    assert value("otel_scorers.judge.duration", scorer="rubric", outcome="ok") == 3
    assert value("otel_scorers.queue.depth") == 0
    for name, points in telemetry.metrics().items():
        for attrs, _ in points:
            for key, val in attrs.items():  # low cardinality: no ids, no free text
                assert key in {"scorer", "label", "passed", "agent", "judge_model", "criterion",
                               "judge_fingerprint", "truncated", "version",
                               "satisfied", "required", "dimension", "side", "decision",
                               "reason", "error_type", "outcome", "token_type",
                               "service_tier"}, (name, key)
                assert len(str(val)) <= 64


def test_only_agent_runs_are_selected_by_default(telemetry: Telemetry, make_processor: Any,
                                                 judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder()
    processor = make_processor()
    tracer = telemetry.tracer()
    with tracer.start_as_current_span("plain"), tracer.start_as_current_span(
            "chat gpt", attributes={"gen_ai.operation.name": "chat",
                                    "gen_ai.input.messages": "[]"}):
        pass
    processor.force_flush(5_000)
    assert judge_server.requests == [] and processor.stats()["rubric"] == {}


@pytest.mark.parametrize(("attrs", "selected"), [
    ({"openinference.span.kind": "AGENT", "input.value": "q", "output.value": "a"}, True),
    # a workflow (or chain) is an interaction only when it holds an LLM call
    ({"traceloop.span.kind": "workflow", "traceloop.entity.input": "q",
      "traceloop.entity.output": "a"}, False),
    ({"traceloop.span.kind": "task"}, False),
    ({"mastra.span.type": "agent_run", "input": "q", "output": "a"}, True),
    ({"gen_ai.operation.name": "chat"}, False),
    ({"openinference.span.kind": "LLM"}, False),
])
def test_default_conventions(telemetry: Telemetry, make_processor: Any,
                             judge_server: ScriptedJudgeServer, attrs: dict[str, str],
                             selected: bool) -> None:
    judge_server.responder = judge_responder()
    processor = make_processor([RubricScorer(JudgeClient(
        judge_server.model, api_base=judge_server.url, api_key="k"), "- x")])
    with telemetry.tracer().start_as_current_span("run", attributes=attrs):
        pass
    processor.force_flush(5_000)
    assert processor.stats()["rubric"].get("selected", 0) == (1 if selected else 0)


def test_selection_options(telemetry: Telemetry, make_processor: Any,
                           judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder()
    processor = make_processor(selection=Selection(
        agent_conventions=False, include_llm_spans=True, span_names=["custom.*"],
        attributes={"team": ["a", "b"]}, agents=["bot"],
        predicate=lambda span: span.name == "by-callable"))
    tracer = telemetry.tracer()
    base = json.loads(json.dumps({"gen_ai.agent.name": "bot", "input.value": "q",
                                  "output.value": "a"}))
    cases = {
        "llm": {"gen_ai.operation.name": "chat", **base},
        "custom.thing": dict(base),
        "attr": {"team": "b", **base},
        "by-callable": dict(base),
        "other agent": {"gen_ai.operation.name": "chat", **base, "gen_ai.agent.name": "x"},
        "nothing": dict(base),
        "agent convention off": {"gen_ai.operation.name": "invoke_agent", **base},
    }
    for name, attrs in cases.items():
        with tracer.start_as_current_span(name, attributes=attrs):
            pass
    processor.force_flush(5_000)
    assert processor.stats()["rubric"]["selected"] == 4


def test_selection_runs_on_the_worker_in_the_order_spans_ended(
        telemetry: Telemetry, make_processor: Any, judge_server: ScriptedJudgeServer) -> None:
    """on_end only hands a possible run to the worker's intake: a selection predicate (which
    may be slow) runs on the worker's thread, in the order the spans ended."""
    import threading

    judge_server.responder = judge_responder()
    seen: list[tuple[str, int]] = []

    def predicate(span: Any) -> bool:
        seen.append((span.name, threading.get_ident()))
        return span.name.startswith("run")

    processor = make_processor(selection=Selection(agent_conventions=False, predicate=predicate))
    tracer = telemetry.tracer()
    names = [f"run {index}" if index % 2 else f"other {index}" for index in range(10)]
    for name in names:
        with tracer.start_as_current_span(name, attributes=genai_attributes(prompt=name)):
            pass
    assert processor.force_flush(20_000)
    assert [name for name, _ in seen] == names
    assert threading.get_ident() not in {thread for _, thread in seen}
    assert processor.stats()["rubric"]["selected"] == 5
    assert processor.stats()["rubric"]["scored"] == 5


@pytest.mark.parametrize("selection", [
    Selection(span_names="agent*"),  # type: ignore[arg-type]
    Selection(attributes={"k": {"nested": 1}}),
    Selection(agents=[""]),
    Selection(agent_conventions=False),
    Selection(predicate="not callable"),  # type: ignore[arg-type]
])
def test_bad_selection_fails_at_construction(make_processor: Any, selection: Selection) -> None:
    with pytest.raises(ConfigError):
        make_processor(selection=selection, install=False)


def test_bad_processor_arguments(make_processor: Any, judge: JudgeClient) -> None:
    with pytest.raises(ConfigError):
        make_processor([], install=False)
    with pytest.raises(ConfigError, match="distinct names"):
        make_processor([RubricScorer(judge), RubricScorer(judge)], install=False)
    with pytest.raises(ConfigError, match="must match"):
        make_processor([RubricScorer(judge, name="bad name!")], install=False)
    with pytest.raises(ConfigError):
        make_processor(queue_size=0, install=False)
    with pytest.raises(ConfigError):
        make_processor(reasons="some", install=False)


def test_evaluation_spans_are_never_scored(telemetry: Telemetry, make_processor: Any,
                                           judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder()
    processor = make_processor(selection=Selection(span_names=["*"]))  # selects everything
    end_agent_span(telemetry)
    processor.force_flush(10_000)
    time.sleep(0.3)
    processor.force_flush(10_000)
    assert len(telemetry.evaluation_spans()) == 2
    assert len(judge_server.requests) == 2  # the evaluation spans were not judged in turn


# -- failures ------------------------------------------------------------------------------
def test_judge_failure_is_an_error_not_a_score(telemetry: Telemetry, make_processor: Any,
                                               judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = lambda request: fault(500)
    processor = make_processor()
    agent = end_agent_span(telemetry)
    processor.force_flush(20_000)
    assert [s.name for s in telemetry.app_spans()] == [agent.name]
    for span in telemetry.evaluation_spans():
        attrs = span.attributes
        assert attrs["error.type"] == "server_error"
        assert "gen_ai.evaluation.score.value" not in attrs
        assert "otel_scorers.score" not in attrs and "otel_scorers.pass" not in attrs
        assert span.status.status_code is StatusCode.ERROR
    assert processor.stats()["rubric"] == {"selected": 1, "error": 1}
    assert telemetry.metric_value("otel_scorers.decisions", decision="error",
                                  error_type="server_error") == 2
    assert telemetry.metric_value("otel_scorers.evaluations") is None
    assert telemetry.metric_value("otel_scorers.judge.duration", outcome="error") == 2


def test_missing_content_is_filtered_with_a_reason(telemetry: Telemetry, make_processor: Any,
                                                   judge_server: ScriptedJudgeServer) -> None:
    processor = make_processor()
    tracer = telemetry.tracer()
    with tracer.start_as_current_span("empty", attributes={
            "gen_ai.operation.name": "invoke_agent"}):
        pass
    with tracer.start_as_current_span("broken", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.input.messages": "[{oops",
            "gen_ai.output.messages": "[]"}):
        pass
    processor.force_flush(5_000)
    snapshot = processor.counts.snapshot()
    reasons = {key.reason for key in snapshot if key.decision == "filtered"}
    assert reasons == {"no_content", "malformed"}
    assert judge_server.requests == []
    assert_identity(processor.stats())


def test_scorer_input_error_counts_as_filtered(telemetry: Telemetry, make_processor: Any,
                                               judge: JudgeClient,
                                               judge_server: ScriptedJudgeServer) -> None:
    from otel_scorers import PromptAlignmentScorer
    processor = make_processor([PromptAlignmentScorer(judge, evaluation_mode="system")])
    end_agent_span(telemetry, system=None)
    processor.force_flush(5_000)
    assert processor.counts.snapshot() == {
        ("prompt_alignment", "selected", None, None): 1,
        ("prompt_alignment", "filtered", "invalid_input", None): 1}
    assert telemetry.evaluation_spans() == []


def test_queue_overflow_drops_and_counts(telemetry: Telemetry, make_processor: Any,
                                         judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder(delay_s=0.3)
    processor = make_processor(queue_size=2, concurrency=1, cache_ttl_s=0)
    started = time.perf_counter()
    for index in range(10):
        end_agent_span(telemetry, prompt=f"question {index}")
    assert time.perf_counter() - started < 1.0  # the application was never slowed
    assert len(telemetry.app_spans()) == 10      # and lost nothing
    processor.force_flush(20_000)
    stats = processor.stats()
    assert stats["rubric"]["dropped"] >= 6
    assert stats["rubric"]["scored"] + stats["rubric"]["dropped"] == 10
    assert_identity(stats)
    assert telemetry.metric_value("otel_scorers.decisions", decision="dropped",
                                  reason="queue_full") == 2 * stats["rubric"]["dropped"]


def test_runs_dropped_for_a_full_queue_leave_nothing_buffered(
        telemetry: Telemetry, make_processor: Any, judge_server: ScriptedJudgeServer) -> None:
    """Issue 35.13: under a burst with a judge that never answers, the runs the full queue
    drops are counted and let go at once: a run that is its whole trace is decided on the
    application thread without entering the trace buffer, and a dropped run's trace leaves it
    (it used to stay until swept, minutes later, so every later span took the slow path and
    the buffer filled with runs nobody would judge). Every application span is exported."""
    judge_server.responder = lambda request: hang(30)
    processor = make_processor(queue_size=2, concurrency=1, cache_ttl_s=0,
                               shutdown_timeout_s=0.5)
    for index in range(60):
        end_agent_span(telemetry, prompt=f"question {index}")
    processor.force_flush(500)  # (False: the judge hangs) the last runs offered are decided
    deadline = time.monotonic() + 30
    while processor.stats()["rubric"].get("dropped", 0) < 55 or \
            processor.stats()["rubric"]["selected"] < 60:
        assert time.monotonic() < deadline, processor.stats()
        time.sleep(0.05)
    stats = processor.stats()["rubric"]
    assert stats["selected"] == 60 and stats["dropped"] >= 55, stats
    assert telemetry.metric_value("otel_scorers.decisions", decision="dropped",
                                  reason="queue_full") == 2 * stats["dropped"]
    # what is judged or waits (one in flight, two queued) may hold its trace; nothing else
    assert len(processor._buffer.traces) <= 60 - stats["dropped"], len(processor._buffer.traces)
    assert len(telemetry.app_spans()) == 60


def test_hung_judge_times_out_without_blocking(telemetry: Telemetry, make_processor: Any,
                                               judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = lambda request: hang(30)
    scorer = RubricScorer(JudgeClient(judge_server.model, api_base=judge_server.url,
                                      api_key="k", timeout_s=30), "- x")
    processor = make_processor([scorer], evaluation_timeout_s=0.5)
    started = time.perf_counter()
    end_agent_span(telemetry)
    assert time.perf_counter() - started < 0.1
    processor.force_flush(10_000)
    assert processor.stats()["rubric"] == {"selected": 1, "error": 1}
    assert telemetry.evaluation_spans()[0].attributes["error.type"] == "timeout"


# -- sampling, rate limit, budget, cache ------------------------------------------------------
def test_sampling_ratio_zero_and_error_boost(telemetry: Telemetry, make_processor: Any,
                                             judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder()
    processor = make_processor(sampling=Sampling(ratio=0.0, error_ratio=1.0))
    end_agent_span(telemetry)
    end_agent_span(telemetry, error=True)
    processor.force_flush(10_000)
    assert processor.stats()["rubric"] == {"selected": 2, "sampled_out": 1, "scored": 1}


def test_per_scorer_sampling(telemetry: Telemetry, make_processor: Any, judge: JudgeClient,
                             judge_server: ScriptedJudgeServer) -> None:
    from otel_scorers import PromptAlignmentScorer
    judge_server.responder = judge_responder()
    processor = make_processor([RubricScorer(judge, "- x"),
                                ScorerSpec(PromptAlignmentScorer(judge), Sampling(ratio=0.0))])
    end_agent_span(telemetry)
    processor.force_flush(10_000)
    assert processor.stats() == {"rubric": {"selected": 1, "scored": 1},
                                 "prompt_alignment": {"selected": 1, "sampled_out": 1}}


def test_rate_limit(telemetry: Telemetry, make_processor: Any, judge: JudgeClient,
                    judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder()
    processor = make_processor([RubricScorer(judge, "- x")], sampling=Sampling(rate_limit=1.0))
    for index in range(5):
        end_agent_span(telemetry, prompt=f"q{index}")
    processor.force_flush(10_000)
    assert processor.stats()["rubric"] == {"selected": 5, "scored": 1, "rate_limited": 4}


def test_budget_exhaustion(telemetry: Telemetry, make_processor: Any, judge: JudgeClient,
                           judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder()  # 150 tokens per call
    processor = make_processor([RubricScorer(judge, "- x")], concurrency=1,
                               sampling=Sampling(budget_tokens_per_hour=300, pace_budget=False))
    for index in range(4):
        end_agent_span(telemetry, prompt=f"q{index}")
        processor.force_flush(10_000)
    assert processor.stats()["rubric"] == {"selected": 4, "scored": 2, "budget_exhausted": 2}
    assert len(judge_server.requests) == 2


def test_the_budget_counts_a_judge_that_reports_no_usage(
        telemetry: Telemetry, make_processor: Any, judge: JudgeClient,
        judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder(prompt_tokens=0, completion_tokens=0)
    processor = make_processor([RubricScorer(judge, "- x")], concurrency=1,
                               sampling=Sampling(budget_tokens_per_hour=600, pace_budget=False))
    for index in range(8):
        end_agent_span(telemetry, prompt=f"q{index}")
        processor.force_flush(10_000)
    stats = processor.stats()["rubric"]
    assert stats.get("budget_exhausted", 0) >= 4 and stats["scored"] <= 4, stats
    (first, *_) = telemetry.evaluation_spans("rubric")
    assert first.attributes["otel_scorers.judge.input_tokens"] > 50  # estimated from sizes
    assert first.attributes["otel_scorers.judge.tokens_estimated"] is True


def test_cache_serves_identical_runs(telemetry: Telemetry, make_processor: Any,
                                     judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder()
    processor = make_processor(concurrency=1)
    end_agent_span(telemetry)
    processor.force_flush(10_000)
    end_agent_span(telemetry)
    end_agent_span(telemetry, prompt="a different question")
    processor.force_flush(10_000)
    assert len(judge_server.requests) == 4
    assert processor.stats()["rubric"] == {"selected": 3, "scored": 2, "cached": 1}
    cached = [s for s in telemetry.evaluation_spans("rubric")
              if s.attributes.get("otel_scorers.cached")]
    assert len(cached) == 1 and cached[0].attributes["gen_ai.evaluation.score.value"] == 1.0
    assert cached[0].attributes["otel_scorers.judge.calls"] == 1  # the original call's usage


def test_failures_are_not_cached(telemetry: Telemetry, make_processor: Any, judge: JudgeClient,
                                 judge_server: ScriptedJudgeServer) -> None:
    judge_server.script(fault(400))
    judge_server.responder = judge_responder()
    processor = make_processor([RubricScorer(judge, "- greets")], concurrency=1)
    end_agent_span(telemetry)
    processor.force_flush(10_000)
    end_agent_span(telemetry)
    processor.force_flush(10_000)
    assert processor.stats()["rubric"] == {"selected": 2, "error": 1, "scored": 1}


# -- rubrics from spans and configuration --------------------------------------------------------
def test_rubric_from_span_attribute_and_per_agent(telemetry: Telemetry, make_processor: Any,
                                                  judge: JudgeClient,
                                                  judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder()
    processor = make_processor([RubricScorer(judge)], concurrency=1,
                               rubrics={"billing": "- mentions the invoice", "*": "- is brief"})
    end_agent_span(telemetry, agent="billing")
    end_agent_span(telemetry, agent="other")
    end_agent_span(telemetry, agent="billing", **{"otel_scorers.rubric": "- from the span"})
    end_agent_span(telemetry, agent="json", **{"otel_scorers.rubric": '["one", "two"]'})
    processor.force_flush(10_000)
    rubrics = sorted(r.text.split("BEGIN rubric criteria>>>\n")[1].split("\n<<<")[0]
                     for r in judge_server.requests)
    assert rubrics == ["c1: from the span", "c1: is brief", "c1: mentions the invoice",
                       "c1: one\nc2: two"]


# -- content switch ------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["none", "truncate"])
def test_reasons_switch(telemetry: Telemetry, make_processor: Any,
                        judge_server: ScriptedJudgeServer, mode: str) -> None:
    judge_server.responder = judge_responder()
    processor = make_processor(reasons=mode, max_reason_chars=20)
    end_agent_span(telemetry)
    processor.force_flush(10_000)
    for span in telemetry.evaluation_spans():
        attrs = span.attributes
        text_keys = [k for k in attrs if k.endswith(("reasoning", "reason", "explanation",
                                                      "assessment", "description",
                                                      "primary_intent"))]
        if mode == "none":
            assert text_keys == []
        else:
            assert text_keys and all(len(attrs[k]) <= 20 for k in text_keys)
        assert "gen_ai.evaluation.score.value" in attrs
    for record in telemetry.logs():
        explanation = record.log_record.attributes.get("gen_ai.evaluation.explanation")
        assert (explanation is None) if mode == "none" else len(explanation) <= 20


# -- lifecycle -----------------------------------------------------------------------------
def test_shutdown_drains_and_is_idempotent(telemetry: Telemetry, make_processor: Any,
                                           judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder(delay_s=0.1)
    processor = make_processor(concurrency=2)
    for index in range(4):
        end_agent_span(telemetry, prompt=f"q{index}")
    processor.shutdown()
    assert processor.stats()["rubric"] == {"selected": 4, "scored": 4}
    processor.shutdown()
    end_agent_span(telemetry)  # after shutdown: passed over, nothing breaks
    assert processor.stats()["rubric"] == {"selected": 4, "scored": 4}


def test_shutdown_lets_go_of_every_buffered_trace(telemetry: Telemetry, make_processor: Any,
                                                  judge_server: ScriptedJudgeServer) -> None:
    """A stopped processor outlives its use (the SDK's exit hook keeps its provider, and so
    the processor, until exit): shutdown empties the trace buffer, spans and content, at
    once (no sweep comes after a stop: they used to stay until exit). A trace whose runs were
    read (judged, the root ended) goes at once; one still open is what shutdown lets go."""
    judge_server.responder = judge_responder()
    processor = make_processor(shutdown_timeout_s=0.5)
    tracer = telemetry.tracer()
    for index in range(3):
        with tracer.start_as_current_span("request"), tracer.start_as_current_span(
                "invoke_agent", attributes=genai_attributes(prompt=f"q{index}")):
            end_agent_span(telemetry, name="chat", prompt=f"q{index}",  # a piece, buffered
                           **{"gen_ai.operation.name": "chat"})
    assert processor.force_flush(10_000)
    assert processor.stats()["rubric"] == {"selected": 3, "scored": 3}
    assert len(processor._buffer) == 0 and processor._buffer.bytes == 0  # read: gone
    with tracer.start_as_current_span("request"):  # a trace still open at shutdown
        end_agent_span(telemetry, name="chat", prompt="q3", **{"gen_ai.operation.name": "chat"})
        deadline = time.monotonic() + 10  # (spans are decided on the worker, in order)
        while len(processor._buffer) != 1:
            assert time.monotonic() < deadline, len(processor._buffer)
            time.sleep(0.02)
        assert processor._buffer.bytes > 0
        processor.shutdown()
        assert len(processor._buffer) == 0 and processor._buffer.bytes == 0
    assert processor.stats()["rubric"] == {"selected": 3, "scored": 3}
    assert len(telemetry.app_spans()) == 11


def test_shutdown_deadline_with_hung_judge(telemetry: Telemetry, make_processor: Any,
                                           judge: JudgeClient,
                                           judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = lambda request: hang(60)
    scorer = RubricScorer(JudgeClient(judge_server.model, api_base=judge_server.url,
                                      api_key="k", timeout_s=60), "- x")
    processor = make_processor([scorer], concurrency=1, shutdown_timeout_s=0.5)
    for index in range(3):
        end_agent_span(telemetry, prompt=f"q{index}")
    time.sleep(0.2)
    started = time.monotonic()
    processor.shutdown()
    assert time.monotonic() - started < 4
    stats = processor.stats()["rubric"]
    assert stats == {"selected": 3, "dropped": 3}
    assert_identity(processor.stats())
    assert len(telemetry.app_spans()) == 3


def test_force_flush_times_out_honestly(telemetry: Telemetry, make_processor: Any,
                                        judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder(delay_s=1.0)
    processor = make_processor()
    end_agent_span(telemetry)
    assert processor.force_flush(100) is False
    assert processor.force_flush(10_000) is True


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_fork_gives_the_child_fresh_workers(telemetry: Telemetry, make_processor: Any,
                                            judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder()
    processor = make_processor()
    end_agent_span(telemetry)  # the parent's worker thread is now running
    processor.force_flush(10_000)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        try:
            os.close(read)
            end_agent_span(telemetry, prompt="from the child")
            ok = processor.force_flush(20_000)
            stats = processor.stats()["rubric"]
            os.write(write, json.dumps({"ok": ok, "stats": stats}).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child = json.loads(pipe.read() or "{}")
    os.waitpid(pid, 0)
    assert child["ok"] is True
    # the child counts its own runs only (the parent reports its own; nothing twice)
    assert child["stats"] == {"selected": 1, "scored": 1}
    assert any("from the child" in r.text for r in judge_server.requests)


def test_accounting_identity_under_mixed_conditions(telemetry: Telemetry, make_processor: Any,
                                                    judge: JudgeClient,
                                                    judge_server: ScriptedJudgeServer) -> None:
    calls = {"n": 0}

    def flaky(request: Any) -> Any:
        calls["n"] += 1
        return fault(400) if calls["n"] % 3 == 0 else judge_responder(delay_s=0.05)(request)

    judge_server.responder = flaky
    processor = make_processor(queue_size=4, concurrency=2,
                               sampling=Sampling(ratio=0.7, rate_limit=50.0))
    tracer = telemetry.tracer()
    for index in range(60):
        if index % 7 == 0:
            with tracer.start_as_current_span("empty", attributes={
                    "gen_ai.operation.name": "invoke_agent"}):
                pass
        else:
            end_agent_span(telemetry, prompt=f"q{index % 11}")
    processor.force_flush(30_000)
    stats = processor.stats()
    assert_identity(stats)
    assert stats["rubric"]["selected"] == 60


def test_two_processors_on_one_meter_provider_both_report(
        telemetry: Telemetry, make_processor: Any, judge: JudgeClient,
        judge_server: ScriptedJudgeServer) -> None:
    """Observable instruments are shared per meter: the second processor's decisions and
    queue gauge are not lost (the SDK keeps only the first instrument of a name)."""
    judge_server.responder = judge_responder()
    first = make_processor([RubricScorer(judge, "- greets", name="first")])
    second = make_processor([RubricScorer(judge, "- greets", name="second")], install=False)
    telemetry.tracer_provider.add_span_processor(second)
    end_agent_span(telemetry)
    assert first.force_flush(10_000) and second.force_flush(10_000)
    assert telemetry.metric_value("otel_scorers.decisions", scorer="first",
                                  decision="scored") == 1
    assert telemetry.metric_value("otel_scorers.decisions", scorer="second",
                                  decision="scored") == 1
    assert telemetry.metric_value("otel_scorers.queue.depth") == 0


def test_concurrent_identical_runs_share_one_judge_call(
        telemetry: Telemetry, make_processor: Any, judge_server: ScriptedJudgeServer) -> None:
    # single flight: the second to fifth runs arrive while the first is still being judged
    judge_server.responder = judge_responder(delay_s=1.0)
    processor = make_processor()
    for _ in range(5):
        end_agent_span(telemetry)
    assert processor.force_flush(20_000)
    assert len(judge_server.requests) == 2  # one per scorer, not ten
    for name in ("rubric", "prompt_alignment"):
        assert processor.stats()[name] == {"selected": 5, "scored": 1, "cached": 4}
    scores = {s.attributes["otel_scorers.score"] for s in telemetry.evaluation_spans("rubric")}
    assert len(telemetry.evaluation_spans("rubric")) == 5 and len(scores) == 1


def test_llm_level_tracing_says_why_nothing_is_scored(
        telemetry: Telemetry, make_processor: Any, judge_server: ScriptedJudgeServer,
        caplog: pytest.LogCaptureFixture) -> None:
    processor = make_processor()
    with caplog.at_level("WARNING", logger="otel_scorers"):
        for _ in range(3):  # chat spans with content, no agent span above them
            with telemetry.tracer().start_as_current_span("chat gpt-4o", attributes={
                    **genai_attributes(), "gen_ai.operation.name": "chat"}):
                pass
        processor.force_flush(5_000)
    assert judge_server.requests == [] and processor.stats()["rubric"] == {}
    warnings = [r.getMessage() for r in caplog.records
                if "no agent run, workflow or chain span" in r.getMessage()]
    assert len(warnings) == 1
    assert "3 LLM calls" in warnings[0] and "'chat gpt-4o'" in warnings[0]
    assert "include_llm_spans=True" in warnings[0]
    assert "OTEL_SCORERS_INCLUDE_LLM_SPANS=true" in warnings[0]


def test_a_run_without_rubric_is_never_a_score_even_when_repeated(
        telemetry: Telemetry, make_processor: Any, judge: JudgeClient,
        judge_server: ScriptedJudgeServer) -> None:
    # the cache once served the second, identical run as a passing score (1.0, pass=true)
    processor = make_processor([RubricScorer(judge)])  # no criteria, no rubric for the run
    for _ in range(3):
        end_agent_span(telemetry)
        assert processor.force_flush(10_000)
    assert processor.stats()["rubric"] == {"selected": 3, "filtered": 3}
    assert processor.counts.count("filtered", "no_rubric") == 3
    assert telemetry.evaluation_spans() == []
    assert telemetry.metric_value("otel_scorers.evaluations") is None
    assert telemetry.metric_value("otel_scorers.evaluation.score") is None
    assert judge_server.requests == []


@pytest.mark.parametrize("config", ["plain", "sampled", "agents", "sessions", "enriched"])
def test_a_run_shed_under_a_full_queue_counts_as_its_dropped_jobs(
        config: str, telemetry: Telemetry, judge: JudgeClient,
        caplog: pytest.LogCaptureFixture) -> None:
    """Issue 35.13: the lean path of an overloaded application thread (``Decider.shed``: a
    run that is its whole trace, decided without the trace buffer, a resolution or a job)
    decides exactly as buffering the run, resolving its trace and dropping its jobs does: the
    same decisions and reasons counted, the same spans let go, the same markers and log lines,
    nothing left buffered."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from otel_scorers import MultiTurnScorer, PromptAlignmentScorer
    from otel_scorers.pipeline import ScoringSpanProcessor, SessionPolicy

    scorers: list[Any] = [RubricScorer(judge, "- x"), PromptAlignmentScorer(judge)]
    kwargs: dict[str, Any] = {}
    if config == "sampled":
        kwargs["sampling"] = Sampling(ratio=0.5)
    elif config == "agents":
        kwargs["selection"] = Selection(agents=["billing-bot"])
    elif config == "sessions":
        scorers.append(MultiTurnScorer(judge))
        kwargs["sessions"] = SessionPolicy(idle_s=3600)
    spans = [end_agent_span(telemetry, prompt=f"question {index}",
                            agent="support-bot" if index % 3 else "billing-bot",
                            **{"gen_ai.conversation.id": f"c{index % 4}"})
             for index in range(30)]
    outcomes = []
    for lean in (False, True):
        caplog.clear()
        provider, out = TracerProvider(), InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(out))
        enriched = InMemorySpanExporter() if config == "enriched" else None
        processor = ScoringSpanProcessor(scorers, tracer_provider=provider,
                                         meter_provider=telemetry.meter_provider,
                                         exporter=enriched, **kwargs)
        decider = processor._flow.decider
        for span in spans:
            if lean:
                assert decider.shed(span, dict(span.attributes or {}))
            else:
                for job in decider.decide((span, dict(span.attributes or {}))):
                    decider.dropped(job)
        outcomes.append({
            "counts": processor.counts.snapshot(),
            "buffered": len(processor._buffer.traces),
            "let go": sorted(s.name + str(s.context.span_id) for s in
                             (enriched.get_finished_spans() if enriched else ())),
            "marks": sorted(str(sorted((s.attributes or {}).items()))
                            for s in out.get_finished_spans()),
            "said": sorted(r.getMessage() for r in caplog.records)})
        processor.shutdown()
    assert outcomes[0] == outcomes[1]
    dropped = sum(v for k, v in outcomes[1]["counts"].items() if k.decision == Decision.DROPPED)
    assert dropped > 0, outcomes[1]
    assert len(outcomes[1]["marks"]) == 2  # an unjudged marker per scorer (one per minute)
    assert outcomes[1]["buffered"] == 0  # (sampled out or turned away: no trace held either)


def test_a_failure_while_shedding_passes_the_span_on(
        telemetry: Telemetry, judge: JudgeClient, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The lean path runs on the application thread and in the pump: a failure there is what
    it is in ``decide`` (the span passed on unscored, said once), never an exception out of
    ``on_end`` or a dead pump."""
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from otel_scorers.pipeline import ScoringSpanProcessor

    enriched = InMemorySpanExporter()
    processor = ScoringSpanProcessor([RubricScorer(judge, "- x")],
                                     tracer_provider=telemetry.tracer_provider,
                                     meter_provider=telemetry.meter_provider, exporter=enriched)
    decider = processor._flow.decider

    def broken(span: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(decider, "_choose", broken)
    span = end_agent_span(telemetry)
    assert decider.shed(span, dict(span.attributes or {}))
    assert "could not process a span" in caplog.text
    processor.shutdown()  # (enriched export batches: what was passed on is out now)
    assert [s.name for s in enriched.get_finished_spans()] == [span.name]
