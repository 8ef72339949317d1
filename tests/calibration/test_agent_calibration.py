"""``otel-scorers calibrate --cases agents``: the golden set of the tool-use and faithfulness
scorers. A judge answering as labelled agrees completely, one answering the opposite agrees
with nothing; the labels hold to the scorers' formulas."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from click.testing import CliRunner

from otel_scorers.calibration import agent_cases
from otel_scorers.cli import main
from otel_scorers.scorers.cases import LabelledCase, check_case
from otel_scorers.testing import Answer, RecordedRequest, ScriptedJudgeServer, reply
from otel_scorers.testing.answers import faithfulness_answer, tool_use_answer

CASES = agent_cases()


def claims_for(score: float, *, invert: bool) -> list[tuple[str, str]]:
    """Claims whose supported share rounds to ``score`` (the fewest that can)."""
    for count in range(1, 11):
        for supported in range(count + 1):
            if round(supported / count, 2) == score:
                verdicts = ["yes"] * supported + ["no"] * (count - supported)
                if invert:
                    verdicts = ["no" if v == "yes" else "yes" for v in verdicts]
                return [(f"claim {i}", v) for i, v in enumerate(verdicts)]
    raise AssertionError(score)


def labelled(cases: list[LabelledCase], *, invert: bool = False) -> Any:
    def respond(request: RecordedRequest) -> Answer:
        fields = request.fields
        kind = "tool_use" if "tool calls" in fields else "faithfulness"
        (case,) = [c for c in cases if c.scorer == kind
                   and c.run.output == fields["agent response"]
                   and c.run.input == fields.get("user request")]
        if kind == "tool_use":
            return reply(tool_use_answer([(v != invert, True) for v in case.expected.verdicts
                                          or ()]))
        assert case.expected.score is not None
        return reply(faithfulness_answer(claims_for(case.expected.score, invert=invert)))
    return respond


def run(server: ScriptedJudgeServer, *args: str) -> tuple[int, dict[str, Any], str]:
    result = CliRunner().invoke(main, [
        "calibrate", "--model", server.model, "--api-base", server.url, "--api-key", "k",
        "--timeout", "10", "--json", "-", "--no-progress", "--cases", "agents", *args])
    return result.exit_code, json.loads(result.stdout or "{}"), result.output


def test_the_agent_golden_set_is_valid_and_covers_both_scorers() -> None:
    assert {c.id: check_case(c) for c in CASES if check_case(c)} == {}
    kinds = Counter(c.scorer for c in CASES)
    assert kinds["tool_use"] >= 6 and kinds["faithfulness"] >= 8
    assert {c.expected.label for c in CASES} == {"pass", "fail"}
    assert {c.expected.band for c in CASES if c.scorer == "faithfulness"} == {"low", "mid",
                                                                              "high"}
    assert sum(1 for c in CASES if (c.source or "").startswith("mastra:")) >= 4
    # context given, and context taken from the run's own tool results
    assert any(c.options.context for c in CASES) and any(
        c.scorer == "faithfulness" and not c.options.context and c.run.steps for c in CASES)


def test_a_judge_answering_as_labelled_agrees_completely(
        judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = labelled(CASES)
    code, report, output = run(judge_server, "--fail-under", "0.99")
    assert code == 0, output
    assert report["cases"] == len(CASES) == len(judge_server.requests)
    assert report["errors"] == 0
    assert report["verdict_agreement"] == 1.0 and report["pass_agreement"] == 1.0
    assert report["alignment_mae"] == 0.0 and report["band_hit_rate"] == 1.0
    assert any(key.startswith("tool_use:") for key in report["per_criterion"])


def test_a_judge_answering_the_opposite_agrees_with_nothing(
        judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = labelled(CASES, invert=True)
    _, report, _ = run(judge_server, "--scorer", "tool_use")
    assert report["cases"] == sum(c.scorer == "tool_use" for c in CASES)
    assert report["verdict_agreement"] == 0.0
    _, report, _ = run(judge_server, "--scorer", "faithfulness")
    assert report["alignment_mae"] is not None and report["alignment_mae"] > 0.3
    assert report["pass_agreement"] < 1.0
