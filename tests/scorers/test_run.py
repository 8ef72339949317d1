from __future__ import annotations

import pytest

from otel_scorers import ScorerRun
from otel_scorers.scorers.run import Message
from otel_scorers.testing import ScriptedJudgeServer


def test_seed_shape_with_message_list() -> None:
    run = ScorerRun.coerce({
        "input": [{"role": "user", "content": "Write a factorial"}],
        "output": {"role": "assistant", "text": "def factorial(n): ..."},
    })
    assert run.user_prompt == "Write a factorial"
    assert run.response == "def factorial(n): ..."
    assert run.system_prompt is None and run.conversation == ()


def test_seed_shape_with_input_and_system_messages() -> None:
    run = ScorerRun.coerce({
        "input": {"inputMessages": [{"role": "user", "content": "Explain recursion"}],
                  "systemMessages": [{"role": "system", "content": "Use Python"}]},
        "output": {"text": "Recursion is..."},
        "requestContext": {"rubric": "- x"}, "additionalContext": {"k": 1}, "runId": 7,
    })
    assert run.user_prompt == "Explain recursion"
    assert run.system_prompt == "Use Python"
    assert run.response == "Recursion is..."
    assert run.request_context == {"rubric": "- x"} and run.additional_context == {"k": 1}
    assert run.run_id == "7"


def test_plain_strings() -> None:
    run = ScorerRun.coerce({"input": "prompt", "output": "answer", "system": "rules"})
    assert (run.user_prompt, run.response, run.system_prompt) == ("prompt", "answer", "rules")


def test_content_parts_and_mastra_parts() -> None:
    run = ScorerRun.coerce({
        "input": [{"role": "user", "content": [{"type": "text", "text": "a"},
                                               {"type": "image", "image": "..."},
                                               {"type": "text", "text": "b"}]}],
        "output": [{"role": "assistant",
                    "content": {"format": 2, "parts": [{"type": "text", "text": "done"}]}}],
    })
    assert run.user_prompt == "a\nb"
    assert run.response == "done"


def test_snake_case_keys_and_typed_model() -> None:
    run = ScorerRun.coerce({"input": {"input_messages": ["q"], "system_messages": ["s"]},
                            "output": "o", "request_context": {"a": 1}})
    assert run.user_prompt == "q" and run.system_prompt == "s" and run.request_context == {"a": 1}
    typed = ScorerRun(input_messages=(Message(role="user", content="q"),),
                      output=(Message(role="assistant", content="o"),))
    assert ScorerRun.coerce(typed) is typed


def test_last_user_message_is_the_prompt() -> None:
    run = ScorerRun.coerce({"input": [
        {"role": "user", "content": "one"}, {"role": "assistant", "content": "reply"},
        {"role": "user", "content": "two"}, {"role": "user", "content": "   "}],
        "output": "x"})
    assert run.user_prompt == "two"
    assert [m.content for m in run.conversation] == ["one", "reply"]


def test_response_prefers_last_assistant_message() -> None:
    run = ScorerRun.coerce({"input": "q", "output": [
        {"role": "assistant", "content": "first"}, {"role": "tool", "content": "tool"},
        {"role": "assistant", "content": "final"}]})
    assert run.response == "final"


def test_run_ids_are_unique_by_default() -> None:
    assert ScorerRun().run_id != ScorerRun().run_id


@pytest.mark.parametrize("bad", ["just a string", 42, None, ["a", "list"]])
def test_top_level_must_be_a_run_or_mapping(bad: object) -> None:
    with pytest.raises(TypeError):
        ScorerRun.coerce(bad)  # type: ignore[arg-type]


def test_unreadable_messages_raise_type_error() -> None:
    with pytest.raises(TypeError):
        ScorerRun.coerce({"input": 42, "output": "x"})


def test_remembered_messages_keep_the_question_an_answer_answers(
        judge_server: ScriptedJudgeServer) -> None:
    # Mastra's agent input: memory brings back the earlier turns; the user now answers "A"
    from otel_scorers import PromptAlignmentScorer
    from otel_scorers.judge.client import JudgeClient
    from otel_scorers.testing import alignment_answer

    run = ScorerRun.coerce({
        "input": {
            "rememberedMessages": [
                {"role": "user", "content": "Help me pick a plan."},
                {"role": "assistant", "content": "Plan A (monthly) or plan B (yearly)?"}],
            "inputMessages": [{"role": "user", "content": {"format": 2, "parts": [
                {"type": "text", "text": "A"}]}}],
            "systemMessages": [{"role": "system", "content": "You sell plans."}],
            "taggedSystemMessages": {"memory": [{"role": "system",
                                                 "content": "The user is on the free tier."}]},
        },
        "output": {"role": "assistant", "text": "Monthly it is: 10 USD a month."},
    })
    assert run.user_prompt == "A"
    assert [m.content for m in run.conversation] == [
        "Help me pick a plan.", "Plan A (monthly) or plan B (yearly)?"]
    assert run.system_prompt == "You sell plans.\n\nThe user is on the free tier."
    judge_server.script(alignment_answer(user=(1, 1, 1, 1), system=(1, 1, 1, 1)))
    judge = JudgeClient(judge_server.model, api_base=judge_server.url, api_key="k")
    assert PromptAlignmentScorer(judge).run(run).error is None
    seen = judge_server.requests[0].text
    assert "Plan A (monthly) or plan B (yearly)?" in seen  # the question "A" answers
    assert "The user is on the free tier." in seen


def test_original_task_is_the_request_judged() -> None:
    run = ScorerRun.coerce({
        "input": {"inputMessages": [
            {"role": "user", "content": "Write find_duplicates"},
            {"role": "assistant", "content": "def f(): ..."},
            {"role": "user", "content": "Your response does not meet the criteria. Revise."}],
            "originalTask": "Write find_duplicates"},
        "output": "def find_duplicates(items): ..."})
    assert run.user_prompt == "Write find_duplicates"
    assert len(run.conversation) == 3  # the attempts and the feedback, as context


@pytest.mark.parametrize("factory", ["rubric", "alignment"])
def test_unknown_mastra_options_are_a_clear_error(factory: str) -> None:
    from otel_scorers import ConfigError, create_prompt_alignment_scorer_llm, create_rubric_scorer

    with pytest.raises(ConfigError, match="no option 'contextMode'; accepted: ") as raised:
        if factory == "rubric":
            create_rubric_scorer(model="openai/x", criteria="- a",
                                 options={"contextMode": "conversation"})
        else:
            create_prompt_alignment_scorer_llm(model="openai/x",
                                               options={"contextMode": "conversation"})
    assert "JudgeClient" not in str(raised.value)
    scorer = create_prompt_alignment_scorer_llm(
        model="openai/x", options={"evaluationMode": "user", "scale": 10})
    assert (scorer.evaluation_mode, scorer.scale) == ("user", 10.0)
