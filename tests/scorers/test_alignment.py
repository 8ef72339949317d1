from __future__ import annotations

import json
from fractions import Fraction

import pytest

from otel_scorers import ConfigError, PromptAlignmentScorer, create_prompt_alignment_scorer_llm
from otel_scorers.judge.client import JudgeClient
from otel_scorers.scorers.alignment import alignment_label
from otel_scorers.testing import ScriptedJudgeServer, alignment_answer

SEED_RUN = {
    "input": {
        "inputMessages": [{"role": "user", "content": "Explain how to reverse a string"}],
        "systemMessages": [{"role": "system",
                            "content": "Always provide code examples when explaining."}],
    },
    "output": {"text": "Use s[::-1]. def reverse_string(s): return s[::-1]"},
}
USER_ONLY_RUN = {"input": [{"role": "user", "content": "List TypeScript benefits in bullets"}],
                 "output": {"role": "assistant", "text": "TypeScript provides static typing."}}

# The seed's weights, written out independently of the implementation.
USER_W = (Fraction(40, 100), Fraction(30, 100), Fraction(20, 100), Fraction(10, 100))
SYSTEM_W = (Fraction(35, 100), Fraction(35, 100), Fraction(15, 100), Fraction(15, 100))


def expected(mode: str, user: tuple[str, ...], system: tuple[str, ...], scale: str) -> float:
    u = sum(Fraction(s) * w for s, w in zip(user, USER_W, strict=True))
    s = sum(Fraction(x) * w for x, w in zip(system, SYSTEM_W, strict=True))
    weighted = {"user": u, "system": s,
                "both": Fraction(7, 10) * u + Fraction(3, 10) * s}[mode]
    value = weighted * Fraction(scale) * 100
    floor = value.numerator // value.denominator
    rounded = floor + (1 if value - floor >= Fraction(1, 2) else 0)  # half-up
    return rounded / 100


CASES = [
    (("1", "1", "1", "1"), ("1", "1", "1", "1")),
    (("0", "0", "0", "0"), ("0", "0", "0", "0")),
    (("0.9", "0.8", "0.7", "0.6"), ("0.5", "0.4", "0.3", "0.2")),
    (("0.95", "0.85", "0.75", "0.65"), ("1", "0", "1", "0")),
    (("0.33", "0.67", "0.5", "0.1"), ("0.2", "0.9", "0.45", "0.05")),
]


@pytest.mark.parametrize("mode", ["user", "system", "both"])
@pytest.mark.parametrize("scale", ["1", "10", "2.5", "100"])
@pytest.mark.parametrize(("user", "system"), CASES)
def test_weighted_score_table(judge_server: ScriptedJudgeServer, judge: JudgeClient, mode: str,
                              scale: str, user: tuple[str, ...],
                              system: tuple[str, ...]) -> None:
    scorer = PromptAlignmentScorer(judge, scale=float(scale), evaluation_mode=mode)  # type: ignore[arg-type]
    judge_server.script(alignment_answer(
        user=[float(x) for x in user] if mode != "system" else None,
        system=[float(x) for x in system] if mode != "user" else None))
    result = scorer.run(SEED_RUN)
    assert result.error is None, result.error
    assert result.score == expected(mode, user, system, scale)
    assert result.mode == mode
    assert len(judge_server.requests) == 1


@pytest.mark.parametrize(("scores", "scale", "want"), [
    # user-mode weighted 0.985 exactly: half-up gives 0.99 (float rounding would give 0.98)
    ((1.0, 1.0, 0.925, 1.0), 1.0, 0.99),
    ((1.0, 0.95, 1.0, 1.0), 1.0, 0.99),      # 0.4 + 0.285 + 0.2 + 0.1 = 0.985
    ((0.5, 0.5, 0.5, 0.45), 1.0, 0.5),       # 0.495 -> 0.50
    ((0.5, 0.5, 0.5, 0.45), 10.0, 4.95),
])
def test_rounding_half_up(judge_server: ScriptedJudgeServer, judge: JudgeClient,
                          scores: tuple[float, ...], scale: float, want: float) -> None:
    judge_server.script(alignment_answer(user=list(scores)))
    result = PromptAlignmentScorer(judge, scale=scale, evaluation_mode="user").run(USER_ONLY_RUN)
    assert result.score == want


@pytest.mark.parametrize(("normalized", "label"), [
    (1.0, "excellent"), (0.9, "excellent"), (0.89, "very_good"), (0.8, "very_good"),
    (0.79, "good"), (0.7, "good"), (0.69, "moderate"), (0.6, "moderate"), (0.59, "poor"),
    (0.4, "poor"), (0.39, "very_poor"), (0.0, "very_poor"),
])
def test_score_bands(normalized: float, label: str) -> None:
    assert alignment_label(normalized) == label


def test_label_uses_normalized_score(judge_server: ScriptedJudgeServer,
                                     judge: JudgeClient) -> None:
    judge_server.script(alignment_answer(user=[0.85, 0.85, 0.85, 0.85]))
    result = PromptAlignmentScorer(judge, scale=10, evaluation_mode="user").run(USER_ONLY_RUN)
    assert result.score == 8.5 and result.label == "very_good"
    assert result.reason.startswith("Score: 8.5 out of 10 (very good); mode user.")


@pytest.mark.parametrize("scale", [0, -1, -0.5, float("nan")])
def test_scale_must_be_positive(judge: JudgeClient, scale: float) -> None:
    with pytest.raises(ConfigError):
        PromptAlignmentScorer(judge, scale=scale)


def test_bad_mode_is_config_error(judge: JudgeClient) -> None:
    with pytest.raises(ConfigError):
        PromptAlignmentScorer(judge, evaluation_mode="everything")  # type: ignore[arg-type]


# -- errors instead of scores --------------------------------------------------------------------
@pytest.mark.parametrize(("mode", "run", "message"), [
    ("user", {"input": {"systemMessages": ["be nice"]}, "output": "hello"}, "user prompt"),
    ("both", {"input": [], "output": "hello"}, "user prompt"),
    ("system", {"input": "hi", "output": "hello"}, "system prompt"),
    ("user", {"input": "hi", "output": ""}, "empty output"),
    ("both", {"input": "hi", "system": "rules", "output": {"text": "  "}}, "empty output"),
])
def test_missing_inputs_are_errors(judge_server: ScriptedJudgeServer, judge: JudgeClient,
                                   mode: str, run: dict[str, object], message: str) -> None:
    result = PromptAlignmentScorer(judge, evaluation_mode=mode).run(run)  # type: ignore[arg-type]
    assert result.score is None and result.label is None
    assert result.error is not None and result.error.type == "invalid_input"
    assert message in result.error.message
    assert judge_server.requests == []
    with pytest.raises(Exception, match=message):
        result.raise_for_error()


def test_both_mode_without_system_prompt_scores_as_user(judge_server: ScriptedJudgeServer,
                                                        judge: JudgeClient) -> None:
    judge_server.script(alignment_answer(user=[1, 1, 1, 1]))
    result = PromptAlignmentScorer(judge).run(USER_ONLY_RUN)
    assert result.score == 1.0 and result.mode == "user"
    assert result.notes == ("both mode without a system prompt: scored as user mode",)
    assert "Note: both mode without a system prompt: scored as user mode." in result.reason
    assert result.to_dict()["notes"] == list(result.notes)
    assert "systemCompliance" not in result.to_dict()["analyzeStepResult"]
    system_prompt = judge_server.requests[0].messages[0]["content"]
    assert '"userAlignment"' in system_prompt and '"systemCompliance"' not in system_prompt


def test_both_mode_judges_system_for_real_in_one_call(judge_server: ScriptedJudgeServer,
                                                      judge: JudgeClient) -> None:
    judge_server.script(alignment_answer(user=[1, 1, 1, 1], system=[0, 0, 0, 0]))
    result = PromptAlignmentScorer(judge).run(SEED_RUN)
    assert result.score == 0.7  # the system part is not a copy of the user part
    request = judge_server.requests[0]
    assert "Always provide code examples" in request.text
    assert len(judge_server.requests) == 1


def test_user_mode_hides_system_prompt_from_judge(judge_server: ScriptedJudgeServer,
                                                  judge: JudgeClient) -> None:
    judge_server.script(alignment_answer(user=[1, 1, 1, 1]))
    PromptAlignmentScorer(judge, evaluation_mode="user").run(SEED_RUN)
    assert "Always provide code examples" not in judge_server.requests[0].text


def test_missing_dimension_in_answer_is_judge_error(judge_server: ScriptedJudgeServer,
                                                    judge: JudgeClient) -> None:
    bad = alignment_answer(user=[1, 1, 1, 1])  # both mode needs systemCompliance too
    judge_server.script(bad, bad)
    result = PromptAlignmentScorer(judge).run(SEED_RUN)
    assert result.error is not None and result.error.type == "invalid_output"
    assert result.score is None


@pytest.mark.parametrize("bad_score", [1.5, -0.1, "0.8", None])
def test_out_of_range_scores_rejected(judge_server: ScriptedJudgeServer, judge: JudgeClient,
                                      bad_score: object) -> None:
    bad = alignment_answer(user=[1, 1, 1, 1])
    bad["userAlignment"]["completeness"]["score"] = bad_score
    judge_server.script(bad, bad)
    result = PromptAlignmentScorer(judge, evaluation_mode="user").run(USER_ONLY_RUN)
    assert result.error is not None and result.error.type == "invalid_output"


# -- shape -----------------------------------------------------------------------------------------
def test_analyze_step_result_has_exactly_the_seed_shape(judge_server: ScriptedJudgeServer,
                                                        judge: JudgeClient) -> None:
    judge_server.script(alignment_answer(user=[0.9, 0.8, 0.7, 0.6], system=[1, 1, 1, 1],
                                         requirements=[("code example", True)],
                                         missing=["edge cases"]))
    data = PromptAlignmentScorer(judge).run({**SEED_RUN, "runId": "r1"}).to_dict()
    assert {"runId", "score", "reason", "analyzeStepResult"} <= set(data)
    step = data["analyzeStepResult"]
    assert set(step) == {"intentAlignment", "requirementsFulfillment", "completeness",
                         "responseAppropriateness", "overallAssessment", "systemCompliance"}
    assert set(step["intentAlignment"]) == {"score", "primaryIntent", "isAddressed", "reasoning"}
    assert set(step["requirementsFulfillment"]) == {"requirements", "overallScore"}
    assert set(step["requirementsFulfillment"]["requirements"][0]) == {
        "requirement", "isFulfilled", "reasoning"}
    assert set(step["completeness"]) == {"score", "missingElements", "reasoning"}
    assert step["completeness"]["missingElements"] == ["edge cases"]
    assert set(step["responseAppropriateness"]) == {"score", "formatAlignment", "toneAlignment",
                                                    "reasoning"}
    assert set(step["systemCompliance"]) == {"intentAlignment", "requirementsFulfillment",
                                             "completeness", "responseAppropriateness"}
    assert step["intentAlignment"]["score"] == 0.9  # top level is the user side in both mode
    assert step["systemCompliance"]["intentAlignment"]["score"] == 1.0
    json.dumps(data)


def test_system_mode_reports_system_dimensions_at_top_level(judge_server: ScriptedJudgeServer,
                                                            judge: JudgeClient) -> None:
    judge_server.script(alignment_answer(system=[0.5, 1, 1, 1]))
    data = PromptAlignmentScorer(judge, evaluation_mode="system").run(SEED_RUN).to_dict()
    assert data["analyzeStepResult"]["intentAlignment"]["score"] == 0.5
    assert "systemCompliance" not in data["analyzeStepResult"]


def test_reason_breakdown_from_the_same_call(judge_server: ScriptedJudgeServer,
                                             judge: JudgeClient) -> None:
    judge_server.script(alignment_answer(user=[1, 0.5, 0.5, 1], system=[1, 1, 1, 1],
                                         requirements=[("bullet points", False)],
                                         missing=["examples"], overall="Use bullets."))
    result = PromptAlignmentScorer(judge).run(SEED_RUN)
    lines = result.reason.splitlines()
    assert lines[0] == "Score: 0.83 out of 1 (very good); mode both (user 70%, system 30%)."
    assert lines[1] == ("User alignment 0.75 = intent 1.00×0.40, requirements 0.50×0.30, "
                        "completeness 0.50×0.20, appropriateness 1.00×0.10.")
    assert "  Unfulfilled: bullet points." in lines
    assert "  Missing: examples." in lines
    assert lines[-1] == "Assessment: Use bullets."
    assert len(judge_server.requests) == 1


# -- input extraction ------------------------------------------------------------------------------
def test_input_extraction(judge_server: ScriptedJudgeServer, judge: JudgeClient) -> None:
    judge_server.script(alignment_answer(user=[1, 1, 1, 1], system=[1, 1, 1, 1]))
    run = {"input": [
        {"role": "system", "content": "Rule one."},
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": [{"type": "text", "text": "first answer"}]},
        {"role": "user", "content": [{"type": "text", "text": "second"},
                                     {"type": "image_url", "image_url": "x"},
                                     {"type": "text", "text": "question"}]},
    ], "system": [{"role": "system", "content": "Rule two."}],
        "output": [{"role": "assistant", "content": "draft"},
                   {"role": "tool", "content": "tool output"},
                   {"role": "assistant", "content": "final answer"}]}
    PromptAlignmentScorer(judge).run(run)
    text = judge_server.requests[0].text

    def field(name: str) -> str:
        start = text.index(f"BEGIN {name}>>>") + len(f"BEGIN {name}>>>")
        return text[start:text.index("<<<", start)].strip()

    assert field("user request") == "second\nquestion"
    assert field("earlier conversation") == "user: first question\nassistant: first answer"
    assert field("agent instructions") == "Rule two.\n\nRule one."
    assert field("agent response") == "final answer"


def test_conversation_context_is_bounded(judge_server: ScriptedJudgeServer,
                                         judge: JudgeClient) -> None:
    judge_server.script(alignment_answer(user=[1, 1, 1, 1]))
    turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " + "x" * 5000}
             for i in range(20)]
    run = {"input": [*turns, {"role": "user", "content": "final"}], "output": "ok"}
    PromptAlignmentScorer(judge, evaluation_mode="user").run(run)
    text = judge_server.requests[0].text
    assert "[14 earlier turns omitted]" in text
    assert "turn 13 " not in text and "turn 14 " in text and "turn 19 " in text
    assert len(text) < 20_000


def test_factory_options(judge: JudgeClient) -> None:
    scorer = create_prompt_alignment_scorer_llm(
        model=judge, options={"scale": 10, "evaluationMode": "system"})
    assert scorer.scale == 10.0 and scorer.evaluation_mode == "system"


def test_pass_threshold(judge_server: ScriptedJudgeServer, judge: JudgeClient) -> None:
    judge_server.script(alignment_answer(user=[0.7, 0.7, 0.7, 0.7]),
                        alignment_answer(user=[0.7, 0.7, 0.7, 0.7]))
    strict = PromptAlignmentScorer(judge, evaluation_mode="user", pass_threshold=0.8)
    lenient = PromptAlignmentScorer(judge, evaluation_mode="user", pass_threshold=0.7)
    assert strict.run(USER_ONLY_RUN).passed is False
    assert lenient.run(USER_ONLY_RUN).passed is True
