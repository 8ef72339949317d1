"""The multi-turn judge: criteria over a whole conversation's numbered transcript (seed idea:
Mastra ``createMultiTurnJudgeScorer``; docs/mastra.md lists the differences).

Like the rubric scorer, it judges a checklist of criteria in one judge call (verdicts under
fixed keys ``c1..cN``, reasoning first, ``required`` from the rubric) and scores ``scale`` when
every gating criterion holds, else 0; unlike it, the object judged is the conversation as a
whole: every turn, user and assistant, numbered. Mastra's judge takes one criterion and reads
only the assistant's turns; this one takes a rubric and reads both sides, because most of what
goes wrong in a conversation (a user repeating themselves, an agent forgetting what it was told)
is only visible with the user's turns.

Criteria come from the scorer, else the run's rubric (the ``rubrics`` setting, an
``otel_scorers.rubric`` span attribute), else the two built-in criteria users ask for most:
``goal_completion`` and ``knowledge_retention`` (:data:`~.rubric.BUILTIN_CRITERIA`), which a
rubric may also name by id. The live pipeline gives it each session once it goes idle (its
``level`` is ``session``); given a plain run, it reads the run's messages as the conversation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from otel_scorers.errors import ScorerInputError
from otel_scorers.judge.client import JudgeClient, JudgeRequest
from otel_scorers.registry import Options, ScorerType, option
from otel_scorers.scorers import prompts
from otel_scorers.scorers.base import Question
from otel_scorers.scorers.criteria import plain_criteria
from otel_scorers.scorers.result import ScoreResult
from otel_scorers.scorers.rubric import (
    BUILTIN_CRITERIA,
    CRITERIA_FLAGS,
    Criteria,
    Criterion,
    RubricLike,
    RubricScorer,
    answer_model,
    criteria_from_flags,
)
from otel_scorers.scorers.run import ScorerRun
from otel_scorers.scorers.session import turns_of

__all__ = ["MultiTurnScorer"]


class MultiTurnScorer(RubricScorer):
    """LLM judge of whole conversations against a rubric (see the module docstring)."""

    name_of_prompt = "multi_turn"

    def __init__(self, model: str | JudgeClient | None = None, criteria: RubricLike | None = None,
                 *, scale: float = 1.0, name: str = "multi_turn",
                 include_trajectory: bool = False, **judge_options: Any) -> None:
        super().__init__(model, criteria, scale=scale, name=name, session=True,
                         include_trajectory=include_trajectory, **judge_options)

    def resolve(self, run: ScorerRun) -> tuple[tuple[Criterion, ...], str]:
        criteria, source = super().resolve(run)
        if criteria:
            return criteria, source
        return tuple(BUILTIN_CRITERIA.values()), "builtin"

    def ask(self, run: ScorerRun) -> Question | ScoreResult:
        if not any(turn.assistant.strip() for turn in turns_of(run)):
            raise ScorerInputError("the conversation has no answer from the agent to judge")
        return super().ask(run)

    def request(self, judged: Sequence[Criterion], run: ScorerRun) -> JudgeRequest[Any]:
        return JudgeRequest(instructions=prompts.MULTI_TURN_INSTRUCTIONS,
                            fields=prompts.multi_turn_fields(
                                judged, run, turns_of(run), trajectory=self.include_trajectory),
                            answer_model=answer_model(len(judged)),
                            task=prompts.rubric_task(len(judged)).replace(
                                "agent response", "conversation"),
                            examples=self.examples_text)


# -- the row -------------------------------------------------------------------------------------
class MultiTurnOptions(Options):
    """The multi-turn judge's options (``type: multi_turn``)."""

    criteria: Criteria = option(None, "the criteria (none: the built-in goal completion and "
                                "knowledge retention)")
    include_trajectory: bool = option(False, "show the judge what the agent did")


MULTI_TURN = ScorerType(
    name="multi_turn", options=MultiTurnOptions, levels=("session",),
    summary="whole conversations judged against a rubric in one call (built in: goal "
            "completion, knowledge retention), once each session goes idle",
    build=lambda name, scale, o, judge: MultiTurnScorer(
        judge, plain_criteria(o.criteria), scale=scale, name=name,
        include_trajectory=o.include_trajectory),
    flags=CRITERIA_FLAGS,
    from_flags=lambda values: {"criteria": criteria_from_flags(values, checks=False) or None})
