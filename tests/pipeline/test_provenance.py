"""Provenance on every result (issue 36.3): the evaluation span, the ``gen_ai.evaluation.result``
event and the metrics say which evaluator produced a result (id and type as the OTel GenAI
proposal names them, the judge model, a fingerprint of the instructions, rubric and judge
settings, the score's range); the fingerprint changes with the rubric or the judge, not with
the process; check-config prints the fingerprint the live results carry. (Phoenix annotations
and MLflow assessments: tests/collector_config/test_phoenix_sink.py, test_mlflow_sink.py.)"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from click.testing import CliRunner

from otel_scorers import ChecksScorer, PromptAlignmentScorer, RubricScorer
from otel_scorers.cli import main
from otel_scorers.judge.client import JudgeClient
from otel_scorers.scorers.provenance import fingerprint_of
from otel_scorers.testing import ScriptedJudgeServer, judge_responder
from tests.support import Telemetry, genai_attributes, processor_from_env


def agent_span(telemetry: Telemetry, agent: str = "support") -> None:
    with telemetry.tracer().start_as_current_span("invoke_agent", attributes=genai_attributes(
            prompt="How do I reset my password?", answer="Hello! Settings > Security.",
            agent=agent)):
        pass


def by_scorer(telemetry: Telemetry) -> dict[str, Any]:
    return {s.attributes["gen_ai.evaluation.name"]: s.attributes
            for s in telemetry.evaluation_spans()}


def test_spans_events_and_metrics_name_their_evaluator(
        telemetry: Telemetry, judge: JudgeClient, judge_server: ScriptedJudgeServer,
        make_processor: Any) -> None:
    judge_server.responder = judge_responder()
    rubric = RubricScorer(judge, "- greets the user", scale=10)
    alignment = PromptAlignmentScorer(judge)
    checks = ChecksScorer(["includes Settings"])
    processor = make_processor([rubric, alignment, checks])
    agent_span(telemetry)
    assert processor.force_flush(20_000)
    spans = by_scorer(telemetry)
    assert set(spans) == {"rubric", "prompt_alignment", "checks"}
    for scorer, kind in ((rubric, "llm"), (alignment, "llm"), (checks, "code")):
        attrs = spans[scorer.name]
        assert attrs["gen_ai.evaluation.evaluator.id"] == scorer.name
        assert attrs["gen_ai.evaluation.evaluator.type"] == kind
        assert attrs["otel_scorers.evaluator.fingerprint"] == fingerprint_of(scorer)
        assert len(attrs["otel_scorers.evaluator.fingerprint"]) == 12
        assert attrs["otel_scorers.score.min"] == 0.0
    assert spans["rubric"]["otel_scorers.scale"] == 10.0
    assert spans["rubric"]["otel_scorers.judge.model"] == judge.model
    assert "otel_scorers.judge.model" not in spans["checks"]
    assert len({a["otel_scorers.evaluator.fingerprint"] for a in spans.values()}) == 3
    events = {r.log_record.attributes["gen_ai.evaluation.name"]: r.log_record.attributes
              for r in telemetry.logs()
              if "gen_ai.evaluation.name" in (r.log_record.attributes or {})}
    assert events["rubric"]["gen_ai.evaluation.evaluator.id"] == "rubric"
    assert events["rubric"]["otel_scorers.evaluator.fingerprint"] == fingerprint_of(rubric)
    assert events["rubric"]["otel_scorers.judge.model"] == judge.model
    assert events["rubric"]["otel_scorers.scale"] == 10.0
    assert events["checks"]["gen_ai.evaluation.evaluator.type"] == "code"
    # metrics: the judge model and the fingerprint label every score
    assert telemetry.metric_value("otel_scorers.evaluations", scorer="rubric",
                                  judge_model=judge.model,
                                  judge_fingerprint=fingerprint_of(rubric)) == 1
    assert telemetry.metric_value("otel_scorers.evaluation.score", scorer="checks",
                                  judge_model="none",
                                  judge_fingerprint=fingerprint_of(checks)) == 1


def test_the_fingerprint_follows_the_rubric_and_the_judge(
        telemetry: Telemetry, judge: JudgeClient, judge_server: ScriptedJudgeServer,
        make_processor: Any) -> None:
    """Per-agent rubrics: each agent's results carry the fingerprint of its rubric; another
    rubric text or another judge model is another fingerprint; the same configuration is the
    same fingerprint in another process."""
    judge_server.responder = judge_responder()
    processor = make_processor([RubricScorer(judge)], rubrics={
        "support": "- greets the user", "billing": "- names the invoice"})
    agent_span(telemetry, "support")
    agent_span(telemetry, "billing")
    assert processor.force_flush(20_000)
    prints = {s.attributes["otel_scorers.agent.name"]:
              s.attributes["otel_scorers.evaluator.fingerprint"]
              for s in telemetry.evaluation_spans()}
    assert set(prints) == {"support", "billing"} and prints["support"] != prints["billing"]
    assert fingerprint_of(RubricScorer(judge, "- a")) != fingerprint_of(
        RubricScorer(judge, "- b"))
    other = JudgeClient("openai/other-model", api_base=judge_server.url, api_key="k")
    assert fingerprint_of(RubricScorer(judge, "- a")) != fingerprint_of(RubricScorer(other, "- a"))
    code = ("from otel_scorers import RubricScorer\n"
            "from otel_scorers.judge.client import JudgeClient\n"
            "from otel_scorers.scorers.provenance import fingerprint_of\n"
            f"j = JudgeClient({judge.model!r}, api_base={judge_server.url!r})\n"
            "print(fingerprint_of(RubricScorer(j, '- a')))")
    elsewhere = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               check=True, timeout=120).stdout.strip()
    here = JudgeClient(judge.model, api_base=judge_server.url)
    assert elsewhere == fingerprint_of(RubricScorer(here, "- a"))


def test_check_config_prints_the_fingerprint_live_results_carry(
        monkeypatch: pytest.MonkeyPatch, telemetry: Telemetry,
        judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder()
    processor = processor_from_env(monkeypatch, judge_server, telemetry, {
        "OTEL_SCORERS_RUBRIC": "- greets the user\n- cites a source"})
    try:
        agent_span(telemetry)
        assert processor.force_flush(20_000)
    finally:
        processor.shutdown()
    live = {name: attrs["otel_scorers.evaluator.fingerprint"]
            for name, attrs in by_scorer(telemetry).items()}
    assert set(live) == {"rubric", "prompt_alignment"}
    printed = CliRunner().invoke(main, ["check-config"])
    assert printed.exit_code == 0, printed.output
    assert "evaluators" in printed.output
    for fingerprint in live.values():
        assert fingerprint in printed.output, (live, printed.output)


def test_an_evaluator_is_made_once_per_configuration_and_follows_every_change(
        judge: JudgeClient) -> None:
    """evaluator_of keeps one Evaluator per scorer and criteria (results share it), and it is
    never stale: an option replaced on the same scorer object (its old value freed, so an id
    could be reused), another rubric resolved for a run, or another judge each give the
    fingerprint a fresh scorer would have."""
    import gc

    from otel_scorers.scorers.provenance import evaluator_of

    scorer = PromptAlignmentScorer(judge, pass_threshold=0.5)
    first = evaluator_of(scorer)
    assert evaluator_of(scorer) is first
    assert first.fingerprint == fingerprint_of(scorer)
    for threshold in (0.6, 0.7, 0.8):  # each old float freed before the next is made
        scorer.pass_threshold = float(str(threshold))
        gc.collect()
        evaluator = evaluator_of(scorer)
        assert evaluator.fingerprint == fingerprint_of(PromptAlignmentScorer(
            judge, pass_threshold=threshold)), threshold
        assert evaluator.fingerprint != first.fingerprint
    rubric = RubricScorer(judge, "- greets")
    assert evaluator_of(rubric).fingerprint == fingerprint_of(RubricScorer(judge, "- greets"))
    rubric.judge = JudgeClient("openai/other-model", api_base=judge.api_base, api_key="k")
    assert evaluator_of(rubric).fingerprint == fingerprint_of(RubricScorer(
        rubric.judge, "- greets")) != fingerprint_of(RubricScorer(judge, "- greets"))
    from otel_scorers.scorers.run import ScorerRun

    dynamic = RubricScorer(judge)  # no rubric of its own: each run brings one
    prints = [evaluator_of(dynamic, ScorerRun(request_context={"rubric": text})).fingerprint
              for text in ("- greets", "- names the invoice", "- greets")]
    assert prints[0] == prints[2] != prints[1]
    assert prints[0] == fingerprint_of(dynamic, ScorerRun(request_context={"rubric": "- greets"}))
