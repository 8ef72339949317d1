from __future__ import annotations

import json

import pytest

from otel_scorers import ConfigError, Criterion, RubricScorer, create_rubric_scorer, parse_rubric
from otel_scorers.judge.client import JudgeClient
from otel_scorers.testing import ScriptedJudgeServer, rubric_answer

RUN = {"input": [{"role": "user", "content": "Research AI in education"}],
       "output": {"role": "assistant", "text": "An analysis section. Recommendations: ..."}}


# -- string rubric parsing ---------------------------------------------------------------------
@pytest.mark.parametrize(("text", "expected"), [
    ("- All tests pass\n- Named find_duplicates", ["All tests pass", "Named find_duplicates"]),
    ("* star\n• bullet\n1. one\n2) two", ["star", "bullet", "one", "two"]),
    ("1.5 is a version", ["1.5 is a version"]),
    ("-no space after dash", ["-no space after dash"]),
    ("- - only one marker goes", ["- only one marker goes"]),
    ("\n\n  - padded  \n\n\t\n- second\n", ["padded", "second"]),
    ("10. ten", ["ten"]),
    ("-\n- \n*\n1.", []),  # a bare marker is a blank item
    ("2024 was a year", ["2024 was a year"]),
])
def test_string_rubric_parsing(text: str, expected: list[str]) -> None:
    criteria = parse_rubric(text)
    assert [c.description for c in criteria] == expected
    assert all(c.required for c in criteria)


def test_list_rubric_accepts_mixed_items() -> None:
    criteria = parse_rubric([
        "plain string", Criterion("obj", id="x"),
        {"description": "dict optional", "required": False}, "- a\n- b",
    ])
    assert [(c.description, c.id, c.required) for c in criteria] == [
        ("plain string", None, True), ("obj", "x", True), ("dict optional", None, False),
        ("a", None, True), ("b", None, True)]


@pytest.mark.parametrize("bad", [
    [{"description": ""}], [{"description": "x", "required": "yes"}],
    [{"description": "x", "weight": 2}], [42], 3.5,
])
def test_bad_rubrics_are_config_errors(bad: object) -> None:
    with pytest.raises(ConfigError):
        parse_rubric(bad)  # type: ignore[arg-type]


def test_duplicate_ids_rejected(judge: JudgeClient) -> None:
    with pytest.raises(ConfigError, match="unique"):
        RubricScorer(judge, [Criterion("a", id="same"), Criterion("b", id="same")])


def test_scale_must_be_positive(judge: JudgeClient) -> None:
    for bad in (0, -1, float("nan")):
        with pytest.raises(ConfigError):
            RubricScorer(judge, "- x", scale=bad)


# -- gating --------------------------------------------------------------------------------------
@pytest.mark.parametrize(("required", "verdicts", "expected"), [
    ([True, True], [True, True], 1.0),
    ([True, True], [True, False], 0.0),
    ([True, False], [True, False], 1.0),      # optional failure never gates
    ([True, False], [False, True], 0.0),
    ([False, False], [True, True], 1.0),      # none required: all gate
    ([False, False], [True, False], 0.0),
    ([False, True, False], [False, True, False], 1.0),
])
def test_gating(judge_server: ScriptedJudgeServer, judge: JudgeClient, required: list[bool],
                verdicts: list[bool], expected: float) -> None:
    criteria = [Criterion(f"criterion {i}", required=r) for i, r in enumerate(required)]
    scorer = RubricScorer(judge, criteria, scale=10)
    judge_server.script(rubric_answer(verdicts))
    result = scorer.run(RUN)
    assert result.score == expected * 10
    assert result.passed is (expected == 1.0)
    assert result.label == ("pass" if expected else "fail")
    assert len(judge_server.requests) == 1
    analysis = result.analysis
    assert [c.required for c in analysis.criteria] == required  # type: ignore[union-attr]
    assert [c.satisfied for c in analysis.criteria] == verdicts  # type: ignore[union-attr]


def test_required_comes_from_rubric_not_judge(judge_server: ScriptedJudgeServer,
                                              judge: JudgeClient) -> None:
    scorer = RubricScorer(judge, [Criterion("must", required=True),
                                  Criterion("nice", required=False)])
    answer = rubric_answer([False, True])
    answer["verdicts"]["c1"]["required"] = False  # a judge trying to relax a criterion
    good = rubric_answer([False, True])
    judge_server.script(answer, good)
    result = scorer.run(RUN)
    assert result.score == 0.0
    assert len(judge_server.requests) == 2  # the extra key was a schema violation: re-asked


# -- no rubric, dynamic rubric -------------------------------------------------------------------
def test_no_rubric_scores_scale_without_judge_call(judge_server: ScriptedJudgeServer,
                                                    judge: JudgeClient) -> None:
    result = RubricScorer(judge, scale=5).run(RUN)
    assert result.score == 5.0
    assert result.skipped == "no_rubric"
    assert result.complete and result.passed
    assert "No rubric resolved" in result.reason
    assert judge_server.requests == []


def test_blank_dynamic_rubric_counts_as_none(judge_server: ScriptedJudgeServer,
                                             judge: JudgeClient) -> None:
    result = RubricScorer(judge).run({**RUN, "requestContext": {"rubric": "  \n- \n"}})
    assert result.skipped == "no_rubric"
    assert judge_server.requests == []


def _rubric_sent(server: ScriptedJudgeServer) -> str:
    text = server.requests[-1].text
    start = text.index("BEGIN rubric criteria>>>") + len("BEGIN rubric criteria>>>")
    return text[start:text.index("<<<", start)].strip()


@pytest.mark.parametrize(("run_extra", "expected"), [
    ({"requestContext": {"rubric": "- from request"},
      "additionalContext": {"rubric": "- from additional"}}, "c1: from request"),
    ({"additionalContext": {"rubric": ["from additional"]}}, "c1: from additional"),
    ({"input": {"inputMessages": [{"role": "user", "content": "q"}], "rubric": "- from input"}},
     "c1: from input"),
    ({"additionalContext": {"rubric": "- from additional"},
      "input": {"inputMessages": [{"role": "user", "content": "q"}], "rubric": "- from input"}},
     "c1: from additional"),
])
def test_dynamic_rubric_precedence(judge_server: ScriptedJudgeServer, judge: JudgeClient,
                                   run_extra: dict[str, object], expected: str) -> None:
    judge_server.script(rubric_answer([True]))
    result = RubricScorer(judge).run({**RUN, **run_extra})
    assert result.score == 1.0 and result.skipped is None
    assert _rubric_sent(judge_server) == expected


def test_static_criteria_win_over_dynamic(judge_server: ScriptedJudgeServer,
                                          judge: JudgeClient) -> None:
    judge_server.script(rubric_answer([True]))
    RubricScorer(judge, "- static").run({**RUN, "requestContext": {"rubric": "- dynamic"}})
    assert _rubric_sent(judge_server) == "c1: static"


def test_invalid_dynamic_rubric_is_input_error(judge_server: ScriptedJudgeServer,
                                               judge: JudgeClient) -> None:
    result = RubricScorer(judge).run({**RUN, "requestContext": {"rubric": [{"oops": 1}]}})
    assert result.error is not None and result.error.type == "invalid_input"
    assert "request_context" in result.error.message
    assert result.score is None and judge_server.requests == []


# -- judge answers: one call, position matching, re-ask, errors ---------------------------------
def test_verdicts_matched_by_position_not_text(judge_server: ScriptedJudgeServer,
                                               judge: JudgeClient) -> None:
    scorer = RubricScorer(judge, "- alpha\n- beta\n- gamma")
    judge_server.script(rubric_answer([True, False, True],
                                      reasoning=["about gamma?", "beta missing", "x"]))
    result = scorer.run(RUN)
    criteria = result.analysis.criteria  # type: ignore[union-attr]
    assert [(c.description, c.satisfied) for c in criteria] == [
        ("alpha", True), ("beta", False), ("gamma", True)]
    assert [c.id for c in criteria] == ["alpha", "beta", "gamma"]


@pytest.mark.parametrize("broken", [
    rubric_answer([True]),                                  # a verdict missing
    rubric_answer([True, True, True]),                      # an extra verdict
    {**rubric_answer([True, True]), "verdicts": {"c1": {"reasoning": "r", "satisfied": "yes"},
                                                 "c2": {"reasoning": "r", "satisfied": True}}},
    {"verdicts": [True, True], "overallAssessment": "list instead of keys"},
    "I think both criteria are satisfied!",                 # prose, no JSON
    {"overallAssessment": "no verdicts"},
])
def test_broken_answer_reasks_once_then_errors(judge_server: ScriptedJudgeServer,
                                               judge: JudgeClient, broken: object) -> None:
    scorer = RubricScorer(judge, "- one\n- two")
    judge_server.script(broken, broken)  # type: ignore[arg-type]
    result = scorer.run(RUN)
    assert result.score is None and result.passed is None
    assert result.error is not None and result.error.type == "invalid_output"
    assert len(judge_server.requests) == 2
    reask = judge_server.requests[1].messages
    assert reask[-2]["role"] == "assistant" and reask[-1]["role"] == "user"
    assert "could not be used" in reask[-1]["content"]
    assert result.judge is not None and result.judge.calls == 2


def test_reask_that_succeeds_scores(judge_server: ScriptedJudgeServer,
                                    judge: JudgeClient) -> None:
    judge_server.script(rubric_answer([True]), rubric_answer([True, True]))
    result = RubricScorer(judge, "- one\n- two").run(RUN)
    assert result.score == 1.0
    assert result.judge is not None and result.judge.calls == 2
    assert result.judge.prompt_tokens == 200


def test_answer_in_code_fence_parses(judge_server: ScriptedJudgeServer,
                                     judge: JudgeClient) -> None:
    judge_server.script("```json\n" + json.dumps(rubric_answer([True])) + "\n```")
    assert RubricScorer(judge, "- one").run(RUN).score == 1.0
    assert len(judge_server.requests) == 1


def test_control_characters_inside_strings_parse(judge_server: ScriptedJudgeServer,
                                                 judge: JudgeClient) -> None:
    raw = json.dumps(rubric_answer([True], reasoning=["line one<NL>line two\ttab"]))
    judge_server.script(raw.replace("<NL>", "\n"))  # a raw newline inside a JSON string
    result = RubricScorer(judge, "- one").run(RUN)
    assert result.score == 1.0 and result.judge is not None and result.judge.reasks == 0
    assert result.analysis.criteria[0].reasoning == "line one\nline two\ttab"  # type: ignore[union-attr]


def test_empty_response_is_an_error_not_a_fail(judge_server: ScriptedJudgeServer,
                                               judge: JudgeClient) -> None:
    result = RubricScorer(judge, "- one").run({"input": "q", "output": "   "})
    assert result.error is not None and result.error.type == "invalid_input"
    assert judge_server.requests == []


# -- reason and result shape ---------------------------------------------------------------------
def test_reason_says_exactly_what_to_fix(judge_server: ScriptedJudgeServer,
                                         judge: JudgeClient) -> None:
    scorer = RubricScorer(judge, [
        Criterion("Includes an analysis section"),
        Criterion("Includes concrete recommendations"),
        Criterion("Includes citations", required=False),
    ])
    judge_server.script(rubric_answer([True, False, False],
                                      reasoning=["Has '## Analysis'.", "No recommendations.",
                                                 "No sources."],
                                      overall="Add recommendations."))
    reason = scorer.run(RUN).reason
    lines = reason.splitlines()
    assert lines[0] == "Rubric not satisfied: 1 of 2 required criteria are not met."
    assert lines[1] == "- [PASS] [required] Includes an analysis section — Has '## Analysis'."
    assert lines[2] == ("- [FAIL] [required] Includes concrete recommendations — "
                        "No recommendations.")
    assert lines[3] == "- [FAIL] [optional] Includes citations — No sources."
    assert lines[4] == "Overall: Add recommendations."
    assert lines[5] == "Unmet required criteria: 1. To fix: Includes concrete recommendations"


def test_satisfied_reason_header(judge_server: ScriptedJudgeServer, judge: JudgeClient) -> None:
    judge_server.script(rubric_answer([True, True]))
    reason = RubricScorer(judge, "- a\n- b").run(RUN).reason
    assert reason.startswith("Rubric satisfied: all 2 required criteria are met.")
    assert reason.endswith("Unmet required criteria: 0.")


def test_to_dict_shape(judge_server: ScriptedJudgeServer, judge: JudgeClient) -> None:
    judge_server.script(rubric_answer([True, False]))
    scorer = RubricScorer(judge, [Criterion("a", id="crit-a"), Criterion("b", required=False)])
    data = scorer.run({**RUN, "runId": "run-42"}).to_dict()
    assert data["runId"] == "run-42"
    assert data["score"] == 1.0 and data["label"] == "pass" and data["scorer"] == "rubric"
    assert data["analyzeStepResult"] == {
        "criteria": [
            {"id": "crit-a", "description": "a", "required": True, "satisfied": True,
             "reasoning": "Scripted reasoning for criterion 1."},
            {"id": "b", "description": "b", "required": False, "satisfied": False,
             "reasoning": "Scripted reasoning for criterion 2."},
        ],
        "overallAssessment": "Scripted overall assessment.",
        "requiredUnmet": 0,
    }
    assert data["judge"]["calls"] == 1 and data["judge"]["promptTokens"] == 100
    json.dumps(data)  # JSON-serialisable


def test_criterion_ids_are_stable_slugs() -> None:
    scorer = RubricScorer("openai/x", ["The response is polite!", "The response is polite?",
                                      "你好 世界", "***"])
    assert scorer._ids == ("the_response_is_polite", "the_response_is_polite_2", "你好_世界", "c4")


def test_factory_matches_class(judge: JudgeClient) -> None:
    scorer = create_rubric_scorer(model=judge, criteria="- a", options={"scale": 3})
    assert isinstance(scorer, RubricScorer) and scorer.scale == 3.0
    assert [c.description for c in scorer.criteria] == ["a"]


async def test_arun_is_the_same_path(judge_server: ScriptedJudgeServer,
                                     judge: JudgeClient) -> None:
    judge_server.script(rubric_answer([True]))
    result = await RubricScorer(judge, "- a").arun(RUN)
    assert result.score == 1.0
