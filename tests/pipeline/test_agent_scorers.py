"""The agent scorers in the live pipeline: configured from the environment (zero-code), fed the
interaction's tool spans, emitting like the others; a run with nothing to judge is a counted
decision with its one warning, never a score. (Real frameworks: tests/frameworks.)"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from otel_scorers import ScoringSpanProcessor
from otel_scorers.testing import ScriptedJudgeServer, judge_responder
from tests.support import Telemetry, genai_attributes, processor_from_env


def agent_run(telemetry: Telemetry, *, result: str | None = "Paris: sunny, 21 C",
              answer: str = "It is sunny and 21 degrees in Paris.", tool: str = "get_weather",
              error: bool = False) -> None:
    tracer = telemetry.tracer()
    with tracer.start_as_current_span("invoke_agent weather", attributes=genai_attributes(
            prompt="What is the weather in Paris?", answer=answer, agent="weather")):
        attrs: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                                 "gen_ai.tool.call.arguments": json.dumps({"city": "Paris"})}
        if result is not None:
            attrs["gen_ai.tool.call.result"] = result
        if error:
            attrs["gen_ai.tool.status"] = "error"
        with tracer.start_as_current_span(f"execute_tool {tool}", attributes=attrs):
            pass


ENV = {"OTEL_SCORERS_SCORERS": "trajectory,tool_use,faithfulness",
       "OTEL_SCORERS_TRAJECTORY_EXPECTED": "get_weather",
       "OTEL_SCORERS_TOOL_BLACKLIST": "delete_all"}


@pytest.fixture
def from_env(monkeypatch: pytest.MonkeyPatch, judge_server: ScriptedJudgeServer,
             telemetry: Telemetry) -> Iterator[ScoringSpanProcessor]:
    judge_server.responder = judge_responder()
    processor = processor_from_env(monkeypatch, judge_server, telemetry, ENV)
    yield processor
    processor.shutdown()


def test_zero_code_agent_scorers_score_the_tool_run(from_env: ScoringSpanProcessor,
                                                    telemetry: Telemetry) -> None:
    agent_run(telemetry)
    assert from_env.force_flush(20_000)
    names = ("trajectory", "tool_use", "faithfulness")
    assert {name: from_env.stats()[name] for name in names} == {
        name: {"selected": 1, "scored": 1} for name in names}
    spans = {s.attributes["gen_ai.evaluation.name"]: s.attributes
             for s in telemetry.evaluation_spans()}
    trajectory = spans["trajectory"]
    assert trajectory["gen_ai.evaluation.score.value"] == 1.0
    assert trajectory["otel_scorers.criterion.accuracy.score"] == 1.0
    assert trajectory["otel_scorers.criterion.blacklist.satisfied"] is True
    assert "otel_scorers.judge.model" not in trajectory  # no judge call
    assert spans["faithfulness"]["gen_ai.evaluation.score.value"] == 1.0
    assert spans["tool_use"]["otel_scorers.criterion.get_weather.satisfied"] is True
    events = [r for r in telemetry.logs()
              if (r.log_record.attributes or {}).get("gen_ai.evaluation.name") == "trajectory"]
    assert len(events) == 1
    assert telemetry.metric_value("otel_scorers.agent.tool_calls", tool="get_weather",
                                  outcome="ok", agent="weather") == 1
    assert telemetry.metric_value("otel_scorers.criterion.verdicts", scorer="trajectory",
                                  criterion="blacklist", satisfied="true") == 1
    # claims are not criteria of the verdict metric
    assert telemetry.metric_value("otel_scorers.criterion.verdicts",
                                  scorer="faithfulness") is None


def test_a_blacklisted_tool_and_a_failed_call_show_in_the_scores(
        from_env: ScoringSpanProcessor, telemetry: Telemetry) -> None:
    agent_run(telemetry, tool="delete_all", error=True, result=None)
    assert from_env.force_flush(20_000)
    spans = {s.attributes["gen_ai.evaluation.name"]: s.attributes
             for s in telemetry.evaluation_spans()}
    assert spans["trajectory"]["gen_ai.evaluation.score.value"] == 0.0
    assert spans["trajectory"]["otel_scorers.pass"] is False
    assert telemetry.metric_value("otel_scorers.agent.tool_calls", tool="delete_all",
                                  outcome="error") == 1


def test_nothing_to_ground_on_is_a_counted_decision_said_once(
        from_env: ScoringSpanProcessor, telemetry: Telemetry,
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="otel_scorers"):
        agent_run(telemetry, result=None)
        agent_run(telemetry, result=None)
        assert from_env.force_flush(20_000)
    assert from_env.stats()["faithfulness"] == {"selected": 2, "filtered": 2}
    assert from_env.counts.count("filtered", "no_context") == 2
    said = [r.getMessage() for r in caplog.records if "no_context" in r.getMessage()]
    assert len(said) == 1 and "To fix: record tool results" in said[0]
    assert not [s for s in telemetry.evaluation_spans()
                if s.attributes["gen_ai.evaluation.name"] == "faithfulness"]


def test_an_agent_run_without_tool_spans_is_no_steps_not_a_pass(
        from_env: ScoringSpanProcessor, telemetry: Telemetry,
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="otel_scorers"), telemetry.tracer() \
            .start_as_current_span("invoke_agent", attributes=genai_attributes()):
        pass
    assert from_env.force_flush(20_000)
    assert from_env.counts.count("filtered", "no_steps") == 2  # trajectory, tool use
    assert from_env.counts.count("filtered", "no_context") == 1  # faithfulness
    assert from_env.stats()["trajectory"] == {"selected": 1, "filtered": 1}
    said = [r.getMessage() for r in caplog.records if "no_steps" in r.getMessage()]
    assert len(said) == 2 and all("trace the framework's tools" in s for s in said)
    assert telemetry.evaluation_spans() == []


def test_a_checks_scorer_from_the_environment_needs_checks(
        monkeypatch: pytest.MonkeyPatch, telemetry: Telemetry) -> None:
    monkeypatch.setenv("OTEL_SCORERS_SCORERS", "checks")
    processor = ScoringSpanProcessor(tracer_provider=telemetry.tracer_provider,
                                     meter_provider=telemetry.meter_provider)
    try:  # scoring is off, saying why: never half a setup
        assert any("needs checks" in p for p in processor.disabled_because)
    finally:
        processor.shutdown()


def test_a_per_scorer_variable_no_scorer_takes_is_a_problem() -> None:
    from otel_scorers.config.environment import env_layer
    from otel_scorers.config.settings import Settings

    _, _, problems = env_layer({"OTEL_SCORERS_TRAJECTORY_EXPECTED": "a,b"},
                               Settings().model_dump())
    assert problems and "no configured scorer takes expected" in problems[0]


def long_run(telemetry: Telemetry, harmless: int, last: str | None) -> None:
    """An agent that makes ``harmless`` lookups (each with its own arguments), then ``last``."""
    tracer = telemetry.tracer()
    with tracer.start_as_current_span("invoke_agent ops", attributes=genai_attributes(
            prompt="Tidy my account", answer="Done.", agent="ops")):
        for index in range(harmless):
            with tracer.start_as_current_span("execute_tool lookup", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
                    "gen_ai.tool.call.arguments": json.dumps({"page": index})}):
                pass
        if last is not None:
            with tracer.start_as_current_span(f"execute_tool {last}", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": last,
                    "gen_ai.tool.call.arguments": "{}"}):
                pass


def test_a_forbidden_call_after_the_200th_step_still_fails(
        make_processor: Any, telemetry: Telemetry) -> None:
    """A bound on the steps kept never turns a failing check into a pass: the calls past it
    are counted (names and counts of every tool), the last steps are kept as well as the
    first, and a check that needs what was left out is a counted steps_truncated decision."""
    from otel_scorers import ChecksScorer, TrajectoryScorer

    processor = make_processor([
        TrajectoryScorer(blacklist=["delete_account"], name="trajectory"),
        ChecksScorer(["did_not_call delete_account", "max_tool_calls 300"], name="limits"),
        ChecksScorer(["tool_order delete_account, lookup"], name="order")])
    long_run(telemetry, 250, "delete_account")
    assert processor.force_flush(30_000)
    stats = processor.stats()
    spans = {s.attributes["gen_ai.evaluation.name"]: s.attributes
             for s in telemetry.evaluation_spans()}
    assert spans["trajectory"]["otel_scorers.pass"] is False
    assert spans["trajectory"]["otel_scorers.score"] == 0.0  # blacklisted: the whole score
    assert spans["limits"]["otel_scorers.pass"] is False
    assert "otel_scorers.criterion.not_called_delete_account.satisfied" in spans["limits"]
    assert spans["limits"]["otel_scorers.criterion.not_called_delete_account.satisfied"] is False
    # an order the kept steps cannot show: not decided, counted, never a pass
    assert stats["order"] == {"selected": 1, "filtered": 1}
    assert processor.health()["scorers"]["order"]["decisions"]["filtered"] == {
        "steps_truncated": 1}
    telemetry.spans_out.clear()
    long_run(telemetry, 5_001, None)
    assert processor.force_flush(60_000)
    limits = [s.attributes for s in telemetry.evaluation_spans("limits")][-1]
    assert limits["otel_scorers.pass"] is False  # 5,001 calls is more than 300
    assert limits["otel_scorers.criterion.max_tool_calls_300.satisfied"] is False


def turns_run(telemetry: Telemetry, harmless: int, last: str) -> None:
    """An agent whose every call is under a "turn" span of its own (no attributes: a parent
    link only), ``harmless`` lookups then ``last``."""
    tracer = telemetry.tracer()
    with tracer.start_as_current_span("invoke_agent ops", attributes=genai_attributes(
            prompt="Tidy my account", answer="Done.", agent="ops")):
        for index in [*range(harmless), -1]:
            name = last if index < 0 else "lookup"
            with tracer.start_as_current_span("turn"), tracer.start_as_current_span(
                    f"execute_tool {name}", attributes={
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                        "gen_ai.tool.call.arguments": json.dumps({"page": index})}):
                pass


@pytest.mark.parametrize("shape", ["calls", "turns"])
def test_a_forbidden_call_after_5000_others_fails_past_the_links_bound(
        make_processor: Any, telemetry: Telemetry, shape: str) -> None:
    """Issue 53: past the trace buffer's bound on parent links (2,048 per trace), the last
    call's link was not kept, so it was placed under no run and did_not_call passed. A kept
    piece keeps its own link ("calls"); a piece under a span whose link was lost ("turns")
    counts for the runs of its trace. Either way the check fails, and a check that needs
    the steps themselves is not decided (steps_truncated), never a pass."""
    from otel_scorers import ChecksScorer, TrajectoryScorer

    processor = make_processor([
        TrajectoryScorer(blacklist=["delete_account"], name="trajectory"),
        ChecksScorer(["did_not_call delete_account"], name="limits"),
        ChecksScorer(["tool_order delete_account, lookup"], name="order")])
    (long_run if shape == "calls" else turns_run)(telemetry, 5_000, "delete_account")
    assert processor.force_flush(60_000)
    spans = {s.attributes["gen_ai.evaluation.name"]: s.attributes
             for s in telemetry.evaluation_spans()}
    assert spans["limits"]["otel_scorers.pass"] is False
    assert "delete_account was called 1 time(s)" in spans["limits"][
        "gen_ai.evaluation.explanation"]
    if shape == "calls":  # seen as the last step: the blacklist sees it too
        assert spans["trajectory"]["otel_scorers.pass"] is False
    else:
        assert spans.get("trajectory", {}).get("otel_scorers.pass") is not True
    assert "order" not in spans
    assert processor.health()["scorers"]["order"]["decisions"]["filtered"] == {
        "steps_truncated": 1}


@pytest.mark.parametrize("hostile", ["[" * 1024, "[" * 5000 + "]" * 5000, "{\"a\":" * 3000])
def test_one_hostile_tool_value_is_one_unreadable_step_the_run_still_scored(
        make_processor: Any, telemetry: Telemetry, hostile: str) -> None:
    """JSON nested past the interpreter's recursion limit in a tool's result and arguments
    (where json.loads raises RecursionError, not ValueError) is text that could not be read:
    every scorer of the run still judges it."""
    from otel_scorers import ChecksScorer, TrajectoryScorer

    processor = make_processor([TrajectoryScorer(["lookup"]),
                                ChecksScorer(["called_tool lookup", "no_loops 3"])])
    tracer = telemetry.tracer()
    with tracer.start_as_current_span("invoke_agent ops", attributes=genai_attributes(
            prompt="Find it", answer="Found.", agent="ops")), \
            tracer.start_as_current_span("execute_tool lookup", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
                "gen_ai.tool.call.arguments": hostile, "gen_ai.tool.call.result": hostile}):
        pass
    assert processor.force_flush(20_000)
    assert processor.stats() == {"trajectory": {"selected": 1, "scored": 1},
                                 "checks": {"selected": 1, "scored": 1}}


def test_per_agent_an_orchestrator_whose_steps_are_its_agents_is_not_told_to_fix_tracing(
        make_processor: Any, telemetry: Telemetry, caplog: pytest.LogCaptureFixture) -> None:
    """Per-agent evaluation: an orchestrator agent span with its own question and answer whose
    tool calls all ran under the agent it called has no steps of its own; that is counted
    (no_steps) but no warning claims the tool spans failed to arrive: they did, and the nested
    agent is scored on them."""
    from otel_scorers import ChecksScorer
    from otel_scorers.pipeline.selection import Selection

    processor = make_processor([ChecksScorer(["no_tool_errors"])],
                               selection=Selection(per_agent=True))
    with caplog.at_level("WARNING", logger="otel_scorers"), telemetry.tracer() \
            .start_as_current_span("invoke_agent orchestrator", attributes=genai_attributes(
                prompt="What is the weather in Paris?", answer="Sunny, 21 C.",
                agent="orchestrator")):
        agent_run(telemetry)
    assert processor.force_flush(20_000)
    assert processor.counts.count("filtered", "no_steps") == 1, processor.stats()
    assert processor.stats()["checks"] == {"selected": 2, "scored": 1, "filtered": 1}
    said = [r.getMessage() for r in caplog.records if "no_steps" in r.getMessage()]
    assert said == []
