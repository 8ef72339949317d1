"""The framework conformance matrix (docs/frameworks.md): real agent frameworks, with the
instrumentations their users pick, scored the way a user scores them.

Each case runs the scenario of ``apps/llm.py`` three times (question -> a tool call -> a
one-sentence answer) with the agent's LLM on 127.0.0.1. Two ways:

- **live**: the app runs in the framework's own virtual environment (``.frameworks/<venv>``)
  with ``otel_scorers.install()`` in its process and the judge held here, so what the judge
  was asked is read off the judge's side; ``make test`` runs the frameworks of ``LIVE``,
  ``make test-frameworks`` (``MATRIX_FRAMEWORKS=all``) every case;
- **replay**: the telemetry a live run recorded (``recorded/<case>.jsonl.gz``, with the
  package versions that produced it in ``recorded/<case>.json``; ``make record-frameworks``
  writes them) is played into a processor here, span by span and record by record.

Both assert the same: one evaluation per interaction (three, per scorer); the judged question
is the user's question, the judged answer the final answer, the agent's instructions are passed
where the telemetry has them; a run without content is never judged, is counted with its reason,
and one warning says what to change.
"""

from __future__ import annotations

import json
import os
import runpy
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from otel_scorers import (
    ChecksScorer,
    FaithfulnessScorer,
    PromptAlignmentScorer,
    RubricScorer,
    ToolUseScorer,
    TrajectoryScorer,
)
from otel_scorers.judge.client import JudgeClient
from otel_scorers.rescore import Rescorer
from otel_scorers.testing import RecordedRequest, ScriptedJudgeServer, judge_responder
from otel_scorers.testing.replay import replay
from tests.support import Telemetry

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
HARNESS = HERE / "apps" / "harness.py"
RECORDED = HERE / "recorded"
RUBRIC = "- answers the weather question in one sentence"
Scenario = runpy.run_path(str(HERE / "apps" / "llm.py"))["Scenario"]
#: The framework environments ``make test`` builds and runs live (the others are replayed).
LIVE = ("agents", "langgraph", "llamaindex", "pydantic_ai", "smolagents")


CASES: dict[str, tuple[str, str, str]] = dict(
    runpy.run_path(str(HERE / "apps" / "cases.py"))["CASES"])
ALL_LIVE = os.environ.get("MATRIX_FRAMEWORKS") == "all"
LIVE_CASES = sorted(case for case, (venv, _, _) in CASES.items() if ALL_LIVE or venv in LIVE)
RECORDED_CASES = sorted(path.name.removesuffix(".json") for path in RECORDED.glob("*.json"))


def check(expected: dict[str, Any], requests: list[RecordedRequest], stats: dict[str, Any],
          count: Callable[[str, str], int], warnings: list[str]) -> None:
    """The matrix's assertions, for a live run and a replay alike."""
    rubric = [r for r in requests if "rubric criteria" in r.fields]
    alignment = [r for r in requests if "rubric criteria" not in r.fields]
    n = expected["interactions"]
    if not expected["content"]:
        assert requests == [], "a run without content was judged"
        for name in ("rubric", "prompt_alignment"):
            assert stats[name] == {"selected": n, "filtered": n}, stats
        assert count("filtered", expected["reason"]) == 2 * n, stats
        said = [w for w in warnings if expected["fix"] in w]
        assert len(said) == 1, f"one warning naming {expected['fix']!r} expected: {warnings}"
        return
    for name, seen in (("rubric", rubric), ("prompt_alignment", alignment)):
        assert stats[name] == {"selected": n, "scored": n}, stats
        assert len(seen) == n, f"{name}: {len(seen)} judge calls for {n} interactions"
        questions = sorted(r.fields.get("user request", "") for r in seen)
        assert questions == sorted(expected["questions"]), questions
        answers = sorted(r.fields.get("agent response", "").strip() for r in seen)
        assert answers == sorted(expected["answers"]), answers
        if expected["system"]:
            for request in seen:
                assert expected["system"] in request.fields.get("agent instructions", ""), \
                    request.fields
    assert not [w for w in warnings if "was not scored" in w], warnings


@pytest.fixture
def scripted(judge_server: ScriptedJudgeServer) -> Iterator[ScriptedJudgeServer]:
    judge_server.responder = judge_responder()
    yield judge_server


@pytest.mark.parametrize("case", LIVE_CASES)
def test_live(case: str, scripted: ScriptedJudgeServer, tmp_path: Path) -> None:
    venv = CASES[case][0]
    python = ROOT / ".frameworks" / venv / "bin" / "python"
    assert python.exists(), f"{python} is missing: `make test` (or `make frameworks`) builds it"
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("OTEL_", "TRACELOOP_", "OPENINFERENCE_"))}
    env.update(MATRIX_JUDGE_URL=scripted.url, LITELLM_LOCAL_MODEL_COST_MAP="True",
               LITELLM_OFFLINE_MODE="true", HF_HUB_OFFLINE="1", OTEL_SDK_DISABLED="false")
    done = subprocess.run([str(python), str(HARNESS), case, str(tmp_path)], env=env, check=False,
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["flushed"], "force_flush() did not settle every run"
    decisions = result["decisions"]

    def count(decision: str, reason: str) -> int:
        return sum(row[-1] for row in decisions if row[1] == decision and row[2] == reason)

    check(result["expected"], scripted.requests, result["stats"], count, result["warnings"])


@pytest.mark.parametrize("case", RECORDED_CASES)
def test_replay(case: str, scripted: ScriptedJudgeServer, judge: JudgeClient,
                make_processor: Any, telemetry: Telemetry,
                caplog: pytest.LogCaptureFixture) -> None:
    recorded = json.loads((RECORDED / f"{case}.json").read_text())
    processor = make_processor([RubricScorer(judge, RUBRIC), PromptAlignmentScorer(judge)],
                               install=False)
    processor.log_processor()  # the log side, as install() wires it
    telemetry.tracer_provider.add_span_processor(SimpleSpanProcessor(telemetry.spans_out))
    with caplog.at_level("WARNING", logger="otel_scorers"):
        spans, _records = replay(processor, RECORDED / f"{case}.jsonl.gz")
        assert spans > 0
        assert processor.force_flush(30_000)
    warnings = [r.getMessage() for r in caplog.records]
    check(recorded["expected"], scripted.requests, processor.stats(), processor.counts.count,
          warnings)
    # docs/frameworks.md says on which span the evaluation is and where it was read from
    row = next(line for line in (ROOT / "docs" / "frameworks.md").read_text().splitlines()
               if line.startswith(f"| `{case}` |"))
    for evaluation in telemetry.evaluation_spans():
        attributes = evaluation.attributes or {}
        assert f"`{attributes['otel_scorers.evaluated.span_name']}`" in row, row
        assert f"`{attributes['otel_scorers.capture.source']}`" in row, row


CONTENT_CASES = [case for case in RECORDED_CASES
                 if json.loads((RECORDED / f"{case}.json").read_text())["expected"]["content"]]


@pytest.mark.parametrize("case", CONTENT_CASES)
def test_rescore_reads_the_same_interactions_with_their_steps(
        case: str, scripted: ScriptedJudgeServer, judge: JudgeClient, make_processor: Any
) -> None:
    recorded = json.loads((RECORDED / f"{case}.json").read_text())
    processor = make_processor([RubricScorer(judge, RUBRIC), PromptAlignmentScorer(judge)],
                               install=False)
    lines: list[dict[str, Any]] = []
    plan = Rescorer(processor, include_run=True).run([RECORDED / f"{case}.jsonl.gz"],
                                                     on_result=lines.append)
    assert plan.runs == recorded["expected"]["interactions"]
    check(recorded["expected"], scripted.requests, processor.stats(), processor.counts.count,
          [])
    scenario = Scenario()
    calls = recorded["llm_requests"] // plan.runs
    for line in lines:
        steps = line["run"]["steps"]
        question = line["run"]["input"]
        city = scenario.cities[scenario.questions.index(question)]
        tools = [s for s in steps if s["kind"] == "tool" and s["name"] == "get_weather"]
        assert len(tools) == 1, steps
        # the arguments the model asked for, out of the framework's envelope (Traceloop's
        # input wrapper, smolagents' and LlamaIndex's call records)
        assert json.loads(tools[0]["arguments"]) == {"city": city}, tools[0]["arguments"]
        assert scenario.tool_result(city) in tools[0]["result"]
        # smolagents' final_answer is the answer, not a step
        assert not [s for s in steps if s["name"] == "final_answer"], steps
        if "handoff" in case:  # triage hands to weather, which calls the tool
            handoffs = [s for s in steps if s["kind"] == "handoff"]
            assert [(h["name"], h.get("agent")) for h in handoffs] == [("weather", "triage")]
            assert tools[0].get("agent") == "weather", tools[0]
        assert len([s for s in steps if s["kind"] == "llm"]) == calls, steps
        assert [s["start_ns"] for s in steps] == sorted(s["start_ns"] for s in steps)


#: Two frameworks with tools, scored live by the agent scorers configured from the environment.
AGENT_LIVE = [case for case in ("agents_sdk-openinference-single",
                                "langgraph-openinference-create_agent") if case in LIVE_CASES]
AGENT_ENV = {"MATRIX_SCORERS": "env", "OTEL_SCORERS_SCORERS": "trajectory,tool_use,faithfulness",
             "OTEL_SCORERS_TRAJECTORY_EXPECTED": "get_weather",
             "OTEL_SCORERS_TOOL_BLACKLIST": "delete_all",
             "OTEL_SCORERS_JUDGE_MODEL": "openai/scripted-judge",
             "OTEL_SCORERS_JUDGE_API_KEY": "test-key"}
AGENT_SCORERS = ("trajectory", "tool_use", "faithfulness")


def check_agent_scorers(requests: list[RecordedRequest], stats: dict[str, Any],
                        scores: dict[str, list[float]] | None = None) -> None:
    """Three interactions judged by each agent scorer: each tool call judged with its city,
    each answer grounded on its own tool result (the scripted judge checks the numbers)."""
    for name in AGENT_SCORERS:
        assert stats[name] == {"selected": 3, "scored": 3}, stats
    scenario = Scenario()
    tool_use = [r for r in requests if "tool calls" in r.fields]
    faithful = [r for r in requests if "context" in r.fields]
    assert len(tool_use) == 3 and len(faithful) == 3, [sorted(r.fields) for r in requests]
    for request in tool_use:
        city = scenario.cities[scenario.questions.index(request.fields["user request"])]
        calls = request.fields["tool calls"]
        assert "tool get_weather" in calls and city in calls, calls
        assert scenario.tool_result(city) in calls
    for request in faithful:
        city = scenario.cities[scenario.questions.index(request.fields["user request"])]
        assert scenario.tool_result(city) in request.fields["context"], request.fields
    if scores is not None:
        assert scores["trajectory"] == [1.0] * 3 and scores["faithfulness"] == [1.0] * 3, scores


@pytest.mark.parametrize("case", AGENT_LIVE)
def test_live_agent_scorers(case: str, scripted: ScriptedJudgeServer, tmp_path: Path) -> None:
    python = ROOT / ".frameworks" / CASES[case][0] / "bin" / "python"
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("OTEL_", "TRACELOOP_", "OPENINFERENCE_"))}
    env.update(AGENT_ENV, MATRIX_JUDGE_URL=scripted.url, OTEL_SCORERS_JUDGE_API_BASE=scripted.url,
               LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_OFFLINE_MODE="true",
               HF_HUB_OFFLINE="1", OTEL_SDK_DISABLED="false")
    done = subprocess.run([str(python), str(HARNESS), case, str(tmp_path)], env=env, check=False,
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["flushed"], "force_flush() did not settle every run"
    check_agent_scorers(scripted.requests, result["stats"])
    assert not [w for w in result["warnings"] if "judged nothing" in w], result["warnings"]


TOOL_CASES = [case for case in CONTENT_CASES if "handoff" not in case]


@pytest.mark.parametrize("case", TOOL_CASES)
def test_replay_agent_scorers(case: str, scripted: ScriptedJudgeServer, judge: JudgeClient,
                              make_processor: Any, telemetry: Telemetry) -> None:
    processor = make_processor([
        TrajectoryScorer([{"name": "get_weather"}], blacklist=["delete_all"]),
        ToolUseScorer(judge), FaithfulnessScorer(judge),
        ChecksScorer(["called_tool get_weather", "no_tool_errors", "no_loops 2"])],
        install=False)
    processor.log_processor()
    telemetry.tracer_provider.add_span_processor(SimpleSpanProcessor(telemetry.spans_out))
    replay(processor, RECORDED / f"{case}.jsonl.gz")
    assert processor.force_flush(30_000)
    stats = processor.stats()
    assert stats["checks"] == {"selected": 3, "scored": 3}, stats
    scores: dict[str, list[float]] = {}
    for span in telemetry.evaluation_spans():
        attributes = span.attributes or {}
        scores.setdefault(str(attributes["gen_ai.evaluation.name"]), []).append(
            float(attributes["gen_ai.evaluation.score.value"]))
    assert scores["checks"] == [1.0] * 3
    check_agent_scorers(scripted.requests, stats, scores)
    assert telemetry.metric_value("otel_scorers.agent.tool_calls", tool="get_weather",
                                  outcome="ok") == 3
    # smolagents answers through a final_answer tool: the answer, not a tool call
    assert {attrs["tool"] for attrs, _ in telemetry.metrics()["otel_scorers.agent.tool_calls"]} \
        == {"get_weather"}


def test_every_case_is_recorded_and_documented() -> None:
    assert sorted(CASES) == RECORDED_CASES, "make record-frameworks records every case"
    matrix = (ROOT / "docs" / "frameworks.md").read_text()
    for case in CASES:
        assert f"`{case}`" in matrix, f"docs/frameworks.md has no row for {case}"


@pytest.mark.parametrize("case", [c for c in CONTENT_CASES if "handoff" in c])
def test_per_agent_never_judges_a_repr_as_an_answer(
        case: str, scripted: ScriptedJudgeServer, judge: JudgeClient, make_processor: Any,
        caplog: pytest.LogCaptureFixture) -> None:
    """Per-agent evaluation of a handoff: the agent that hands off has no text answer (the
    OTel GenAI v2 instrumentation writes its tool call's repr as the output text): it is not
    judged, and says so; the agent that answers is judged on its answer."""
    from otel_scorers.pipeline.selection import Selection

    processor = make_processor([RubricScorer(judge, RUBRIC)], install=False,
                               selection=Selection(per_agent=True))
    processor.log_processor()
    with caplog.at_level("WARNING", logger="otel_scorers"):
        replay(processor, RECORDED / f"{case}.jsonl.gz")
        assert processor.force_flush(30_000)
    answers = [r.fields.get("agent response", "") for r in scripted.requests]
    assert answers and not [a for a in answers if "ToolCall(" in a or "Handoff" in a], answers
    scenario = Scenario()
    assert all(any(a in text for a in scenario.answers) for text in answers), answers


@pytest.mark.parametrize("case", CONTENT_CASES)
def test_including_llm_spans_still_judges_every_interaction(
        case: str, scripted: ScriptedJudgeServer, judge: JudgeClient, make_processor: Any,
        caplog: pytest.LogCaptureFixture) -> None:
    """``include_llm_spans`` only adds LLM calls outside interactions: the agents' own
    interactions are judged exactly as without it (their LLM calls are their pieces)."""
    from otel_scorers.pipeline.selection import Selection

    recorded = json.loads((RECORDED / f"{case}.json").read_text())
    processor = make_processor([RubricScorer(judge, RUBRIC), PromptAlignmentScorer(judge)],
                               install=False, selection=Selection(include_llm_spans=True))
    processor.log_processor()
    with caplog.at_level("WARNING", logger="otel_scorers"):
        replay(processor, RECORDED / f"{case}.jsonl.gz")
        assert processor.force_flush(30_000)
    check(recorded["expected"], scripted.requests, processor.stats(), processor.counts.count,
          [r.getMessage() for r in caplog.records])


#: The cases whose apps name their agent ``weather_bot`` and whose telemetry carries the name
#: (LlamaIndex's OpenInference spans carry it only inside a repr of a step's output: not read).
NAMED_CASES = [c for c in CONTENT_CASES if c.startswith(("langgraph-", "smolagents-"))]


@pytest.mark.parametrize("case", [*NAMED_CASES, "llamaindex-openinference-function_agent"])
def test_an_agents_filter_keeps_the_named_agent_or_says_what_it_saw(
        case: str, scripted: ScriptedJudgeServer, judge: JudgeClient, make_processor: Any,
        caplog: pytest.LogCaptureFixture) -> None:
    """``OTEL_SCORERS_AGENTS=weather_bot`` keeps the interactions of the agent the app named
    so; where the telemetry does not carry the name, one warning says the filter kept nothing
    and which agents it saw (never silence)."""
    from otel_scorers.pipeline.selection import Selection

    name = Scenario().agent_name
    processor = make_processor([RubricScorer(judge, RUBRIC)], install=False,
                               selection=Selection(agents=[name]))
    processor.log_processor()
    with caplog.at_level("WARNING", logger="otel_scorers"):
        replay(processor, RECORDED / f"{case}.jsonl.gz")
        assert processor.force_flush(30_000)
    said = [r.getMessage() for r in caplog.records if "agents filter" in r.getMessage()]
    if case in NAMED_CASES:
        assert processor.stats()["rubric"] == {"selected": 3, "scored": 3}, processor.stats()
        assert not said, said
    else:
        assert processor.stats()["rubric"].get("scored", 0) == 0
        assert len(said) == 1 and "has kept no interaction" in said[0], said
        assert "no agent name: span 'FunctionAgent.run'" in said[0], said


#: The recordings whose runs are workflow or chain spans with no agent span under them.
CHAIN_ONLY_CASES = ("langgraph-openinference-create_agent",
                    "llamaindex-openinference-function_agent")


@pytest.mark.parametrize("case", CONTENT_CASES)
def test_per_agent_steps_warnings_name_only_a_real_cause(
        case: str, make_processor: Any, caplog: pytest.LogCaptureFixture) -> None:
    """Per-agent evaluation with an agent scorer: an agent span whose steps all belong to
    the agents nested in it is right to have none of its own; no warning tells the user that
    the tool spans failed to arrive (they did, and are judged on the nested agents)."""
    from otel_scorers.pipeline.selection import Selection

    processor = make_processor([ChecksScorer(["no_tool_errors"])], install=False,
                               selection=Selection(per_agent=True))
    processor.log_processor()
    with caplog.at_level("WARNING", logger="otel_scorers"):
        replay(processor, RECORDED / f"{case}.jsonl.gz")
        assert processor.force_flush(30_000)
    messages = [r.getMessage() for r in caplog.records]
    said = [m for m in messages if "no_steps" in m]
    assert not said, (said, processor.stats())
    if case in CHAIN_ONLY_CASES:
        # no agent span at all: the warning says per_agent is why, not client-level tracing
        assert processor.stats()["checks"].get("scored", 0) == 0, processor.stats()
        warned = [m for m in messages if "LLM calls" in m]
        assert len(warned) == 1 and "per_agent=True judges agent spans only" in warned[0], \
            warned
        assert "LLM-client level" not in warned[0]
    else:
        assert processor.stats()["checks"].get("scored", 0) >= 1, processor.stats()


#: The recordings whose apps ask for a structured answer (a WeatherReport's JSON schema): the
#: Agents SDK's ``output_type`` (Responses ``text.format``) and pydantic-ai's ``NativeOutput``
#: (``response_format``).
STRUCTURED_CASES = ("agents_sdk-openinference-structured", "pydantic_ai-native-structured")
#: The recordings whose instrumentation records no parameters schema for the tools (the OTel
#: GenAI Agents SDK instrumentation 0.1.0 records no tool definitions, strands only names).
NO_TOOL_SCHEMAS = ("agents_sdk-otel_v2-single", "strands-native-events",
                   "strands-native-operation_details")


def verdicts_of(telemetry: Telemetry, scorer: str) -> list[dict[str, Any]]:
    return [dict(span.attributes or {}) for span in telemetry.evaluation_spans(scorer)]


@pytest.mark.parametrize("case", STRUCTURED_CASES)
def test_replay_structured_output_checks(case: str, make_processor: Any,
                                         telemetry: Telemetry) -> None:
    """The answer is JSON and fits the schema the app declared (read from the LLM span), the
    tool call fits its tool's declared parameters, and the run's latency, tokens and LLM calls
    are within bounds; a schema the answer does not fit and a 1 ms budget fail, named."""
    processor = make_processor([
        ChecksScorer(["json", "json_schema declared", "tool_args_valid", "max_duration 30s",
                      "max_llm_calls 2", "max_tokens 200"], name="structure"),
        ChecksScorer(['json_schema {"type": "object", "required": ["humidity"]}',
                      "max_duration 1ms"], name="strict")], install=False)
    telemetry.tracer_provider.add_span_processor(SimpleSpanProcessor(telemetry.spans_out))
    replay(processor, RECORDED / f"{case}.jsonl.gz")
    assert processor.force_flush(30_000)
    stats = processor.stats()
    assert stats["structure"] == {"selected": 3, "scored": 3}, stats
    assert stats["strict"] == {"selected": 3, "scored": 3}, stats
    for attributes in verdicts_of(telemetry, "structure"):
        assert attributes["gen_ai.evaluation.score.label"] == "pass", attributes
    strict = verdicts_of(telemetry, "strict")
    assert [a["gen_ai.evaluation.score.label"] for a in strict] == ["fail"] * 3
    for attributes in strict:
        reason = str(attributes["gen_ai.evaluation.explanation"])
        assert "required 'humidity'" in reason and "the run took" in reason, reason
    for criterion in ("json", "json_schema_declared", "tool_args_valid", "max_duration_30s",
                      "max_llm_calls_2", "max_tokens_200"):
        assert telemetry.metric_value("otel_scorers.criterion.verdicts", scorer="structure",
                                      criterion=criterion, satisfied="true") == 3, criterion
    assert telemetry.metric_value("otel_scorers.criterion.verdicts", scorer="strict",
                                  criterion="max_duration_0_001s", satisfied="false") == 3


@pytest.mark.parametrize("case", TOOL_CASES)
def test_replay_tool_arguments_against_their_declared_schemas(
        case: str, make_processor: Any, telemetry: Telemetry) -> None:
    """Each framework's tool call against the parameters schema its instrumentation recorded
    (GenAI ``gen_ai.tool.definitions``, OpenInference ``llm.tools``, Traceloop
    ``llm.request.functions``); where none is recorded, an ``invalid_input`` decision that
    says so, never a pass."""
    processor = make_processor([ChecksScorer(["tool_args_valid", "max_duration 60s",
                                              "max_llm_calls 2"], name="args")],
                               install=False)
    telemetry.tracer_provider.add_span_processor(SimpleSpanProcessor(telemetry.spans_out))
    replay(processor, RECORDED / f"{case}.jsonl.gz")
    assert processor.force_flush(30_000)
    stats = processor.stats()["args"]
    if case in NO_TOOL_SCHEMAS:
        assert stats == {"selected": 3, "filtered": 3}, stats
        assert processor.counts.count("filtered", "invalid_input") == 3
        return
    assert stats == {"selected": 3, "scored": 3}, stats
    for attributes in verdicts_of(telemetry, "args"):
        reason = str(attributes["gen_ai.evaluation.explanation"])
        assert attributes["gen_ai.evaluation.score.label"] == "pass", reason
        assert "1 call(s) fit their tool's schema" in reason, reason
