"""The prompt-alignment scorer (seed: Mastra ``createPromptAlignmentScorerLLM``).

Four dimensions, each scored 0..1 by the judge, weighted exactly as the seed documents (the
table is in :mod:`otel_scorers.scorers.dimensions`); ``both`` (the default) weighs the user
side 0.7 and the system side 0.3. Upstream reuses the user score for the system part; here the
judge assesses system compliance for real, in the same single call. The final score is
``weighted × scale``, rounded half-up to two decimals, computed in decimal arithmetic so 0.985
rounds to 0.99.

``analyzeStepResult`` has the seed's shape. In ``system`` mode its dimensions are the system
ones. In ``both`` mode they are the user ones and the system dimensions are in one extra object,
``systemCompliance``. The reason is built from the same call: the judge's overall assessment
plus a deterministic per-dimension breakdown (upstream makes a second call for it).
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any, get_args

from otel_scorers.errors import ConfigError, ScorerInputError
from otel_scorers.judge.client import JudgeClient, Judgement, JudgeRequest
from otel_scorers.registry import Flag, Options, ScorerType, option
from otel_scorers.scorers import prompts
from otel_scorers.scorers.base import LLMScorer, Question, digest, mastra_options
from otel_scorers.scorers.cases import BANDS, band_problems
from otel_scorers.scorers.dimensions import (
    BOTH_SPLIT,
    DIMENSIONS,
    MODE_WEIGHTS,
    AlignmentAnalysis,
    AlignmentDimensions,
    EvaluationMode,
    alignment_label,
    round_half_up,
    weighted_score,
)
from otel_scorers.scorers.result import JudgeModel, ScoreResult, bounded_text
from otel_scorers.scorers.run import ScorerRun

__all__ = [
    "BOTH_SPLIT",
    "MODE_WEIGHTS",
    "AlignmentAnalysis",
    "AlignmentDimensions",
    "EvaluationMode",
    "PromptAlignmentScorer",
    "alignment_label",
    "create_prompt_alignment_scorer_llm",
    "weighted_score",
]


class _UserAnswer(JudgeModel):
    user_alignment: AlignmentDimensions
    overall_assessment: bounded_text(800)  # type: ignore[valid-type]


class _SystemAnswer(JudgeModel):
    system_compliance: AlignmentDimensions
    overall_assessment: bounded_text(800)  # type: ignore[valid-type]


class _BothAnswer(JudgeModel):
    user_alignment: AlignmentDimensions
    system_compliance: AlignmentDimensions
    overall_assessment: bounded_text(800)  # type: ignore[valid-type]


_ANSWERS: Mapping[str, type[JudgeModel]] = {
    "user": _UserAnswer, "system": _SystemAnswer, "both": _BothAnswer}


class PromptAlignmentScorer(LLMScorer):
    """LLM-as-judge prompt alignment: intent, requirements, completeness, appropriateness."""

    def __init__(self, model: str | JudgeClient | None = None, *, scale: float = 1.0,
                 evaluation_mode: EvaluationMode = "both", pass_threshold: float | None = None,
                 name: str = "prompt_alignment", examples: Any = None,
                 examples_max_tokens: int = 1500, include_trajectory: bool = False,
                 session: bool = False, **judge_options: Any) -> None:
        super().__init__(model, name=name, scale=scale, judge_options=judge_options)
        #: show the judge what the agent did (its steps) beside the request and the response
        self.include_trajectory = include_trajectory
        #: judge whole conversations (live: once a session goes idle), not each turn
        self.level = "session" if session else "turn"
        self.uses_steps = include_trajectory
        if evaluation_mode not in get_args(EvaluationMode):
            raise ConfigError(
                f"evaluation_mode must be one of {get_args(EvaluationMode)}, "
                f"got {evaluation_mode!r}")
        if pass_threshold is not None and not 0.0 <= pass_threshold <= 1.0:
            raise ConfigError("pass_threshold is a fraction of the scale, between 0 and 1")
        self.evaluation_mode: EvaluationMode = evaluation_mode
        self.pass_threshold = pass_threshold
        self.set_examples(examples, kind="prompt_alignment", max_tokens=examples_max_tokens)

    def mode_for(self, run: ScorerRun) -> str:
        """The mode actually used: ``both`` without a system prompt falls back to ``user``."""
        if self.evaluation_mode == "both" and not run.system_prompt:
            return "user"
        return self.evaluation_mode

    def check(self, run: ScorerRun) -> str:
        """Validate the run for this scorer and return the effective mode."""
        mode = self.mode_for(run)
        if not run.response.strip():
            raise ScorerInputError("the run has no response to judge (empty output)")
        if mode == "user" and not run.user_prompt:
            raise ScorerInputError(f"{self.evaluation_mode} mode needs a user prompt; the run has "
                                   "no user message")
        if mode == "system" and not run.system_prompt:
            raise ScorerInputError("system mode needs a system prompt; the run has no system "
                                   "messages")
        return mode

    def cache_key(self, run: ScorerRun) -> str | None:
        mode = self.mode_for(run)
        system = run.system_prompt if mode != "user" else None
        return digest("alignment", self.judge.fingerprint, self.scale, mode, system,
                      run.conversation, run.user_prompt, run.response, len(run.turns) > 1,
                      self.examples_digest,
                      prompts.trajectory_digest(run, self.include_trajectory))

    def ask(self, run: ScorerRun) -> Question:
        mode = self.check(run)
        request = JudgeRequest(instructions=prompts.alignment_instructions(
                                   mode, session=len(run.turns) > 1),
                               fields=prompts.alignment_fields(run, mode,
                                                              trajectory=self.include_trajectory),
                               answer_model=_ANSWERS[mode], task=prompts.alignment_task(mode),
                               examples=self.examples_text)
        return Question(request, lambda judgement: self._result(run, mode, judgement))

    def _result(self, run: ScorerRun, mode: str, judgement: Judgement[Any]) -> ScoreResult:
        answer: Any = judgement.value
        user: AlignmentDimensions | None = getattr(answer, "user_alignment", None)
        system: AlignmentDimensions | None = getattr(answer, "system_compliance", None)
        weighted = weighted_score(mode, user.scores() if user else None,
                                  system.scores() if system else None)
        score = round_half_up(weighted * Decimal(str(self.scale)))
        label = alignment_label(score / self.scale)
        primary = user if user is not None else system
        assert primary is not None
        analysis = AlignmentAnalysis(
            **{name: getattr(primary, name) for name in AlignmentDimensions.model_fields},
            overall_assessment=answer.overall_assessment,
            system_compliance=system if mode == "both" else None,
        )
        notes: tuple[str, ...] = ()
        if mode != self.evaluation_mode:
            notes = ("both mode without a system prompt: scored as user mode",)
        passed = None if self.pass_threshold is None else score / self.scale >= self.pass_threshold
        return ScoreResult(
            run_id=run.run_id, scorer=self.name, score=score, scale=self.scale, label=label,
            passed=passed, reason=alignment_reason(score, self.scale, label, mode, user, system,
                                                   answer.overall_assessment, notes),
            analysis=analysis, mode=mode, notes=notes, judge=judgement.usage)


def _breakdown(title: str, dims: AlignmentDimensions, weights: Mapping[str, Decimal]) -> str:
    scores = dims.scores()
    part = sum((scores[k] * w for k, w in weights.items()), Decimal(0))
    items = ", ".join(f"{k} {float(scores[k]):.2f}×{float(w):.2f}" for k, w in weights.items())
    return f"{title} {float(part):.2f} = {items}."


def alignment_reason(score: float, scale: float, label: str, mode: str,
                     user: AlignmentDimensions | None, system: AlignmentDimensions | None,
                     assessment: str, notes: tuple[str, ...]) -> str:
    """``Score: X out of SCALE`` summary, per-dimension breakdown, gaps, judge assessment."""
    lines = [f"Score: {score:g} out of {scale:g} ({label.replace('_', ' ')}); mode {mode}"
             + (" (user 70%, system 30%)." if mode == "both" else ".")]
    lines.extend(f"Note: {note}." for note in notes)
    for title, dims, weights in (("User alignment", user, MODE_WEIGHTS["user"]),
                                 ("System compliance", system, MODE_WEIGHTS["system"])):
        if dims is None:
            continue
        lines.append(_breakdown(title, dims, weights))
        unmet = [r.requirement for r in dims.requirements_fulfillment.requirements
                 if not r.is_fulfilled]
        if unmet:
            lines.append(f"  Unfulfilled: {'; '.join(unmet)}.")
        if dims.completeness.missing_elements:
            lines.append(f"  Missing: {'; '.join(dims.completeness.missing_elements)}.")
        if not dims.intent_alignment.is_addressed:
            lines.append(f"  Intent not addressed: {dims.intent_alignment.primary_intent}.")
    if assessment:
        lines.append(f"Assessment: {assessment}")
    return "\n".join(lines)


def create_prompt_alignment_scorer_llm(*, model: str | JudgeClient | None = None,
                                       options: Mapping[str, Any] | None = None
                                       ) -> PromptAlignmentScorer:
    """The seed-style factory: ``options`` takes ``scale`` and ``evaluationMode`` (or
    ``evaluation_mode``), plus ``name``, ``passThreshold`` and judge options; any other option
    (Mastra's other scorers have ``contextMode``, for one) is a :class:`ConfigError` naming
    what is accepted."""
    opts = mastra_options(options, {
        "scale": "scale", "evaluationMode": "evaluation_mode",
        "evaluation_mode": "evaluation_mode", "passThreshold": "pass_threshold",
        "pass_threshold": "pass_threshold", "name": "name"}, "the prompt-alignment scorer")
    return PromptAlignmentScorer(model, **opts)


# -- the row -------------------------------------------------------------------------------------
class AlignmentOptions(Options):
    """The prompt-alignment scorer's options (``type: prompt_alignment``)."""

    evaluation_mode: EvaluationMode = option("both", "`user`, "
                                             "`system`, `both`",
                                             env="OTEL_SCORERS_ALIGNMENT_MODE")
    pass_threshold: float | None = option(None, "the share of the scale that passes (prompt "
                                          "alignment: none by default; trajectory, tool use, "
                                          "1.0)", ge=0, le=1)
    examples: str | None = option(None, "labelled cases of the scorer's kind (JSON lines) "
                                  "shown to the judge as few-shot examples")
    examples_max_tokens: int = option(1500, "the few-shot examples' token budget", gt=0)
    include_trajectory: bool = option(False, "show the judge what the agent did")
    session: bool = option(False, "judge each whole conversation instead of each turn")


def _sides(mode: str) -> tuple[str, ...]:
    return {"user": ("user",), "system": ("system",), "both": ("user", "system")}[mode]


def reachable(mode: str, dimensions: Mapping[Any, Any]) -> tuple[float, float]:
    """The lowest and highest weighted score the dimension bands of a case allow."""
    low = high = Decimal(0)
    for side in _sides(mode):
        share = BOTH_SPLIT[side] if mode == "both" else Decimal(1)
        bands = dimensions[side]
        for name in DIMENSIONS:
            lo, hi = BANDS[getattr(bands, name)]
            weight = share * MODE_WEIGHTS[side][name]
            low += weight * Decimal(str(lo))
            high += weight * Decimal(str(hi))
    return float(low), float(high)


def _shape(case: Any) -> None:
    if case.options.evaluation_mode is None:
        raise ValueError("a prompt-alignment case needs options.evaluation_mode")
    if case.expected.score is None or case.expected.band is None:
        raise ValueError("a prompt-alignment case expects 'score' and 'band'")


def _check(case: Any) -> list[str]:
    expected = case.expected
    problems = band_problems(expected)
    mode = case.mode
    if mode == "user" and not case.run.input:
        problems.append("user mode needs a user message (run.input)")
    if mode == "system" and not case.run.system:
        problems.append("system mode needs run.system")
    if expected.dimensions is not None:
        missing = set(_sides(mode)) - set(expected.dimensions)
        if missing:
            problems.append(f"dimension bands missing for {sorted(missing)} ({mode} mode)")
        else:
            low, high = reachable(mode, expected.dimensions)
            if not low - 1e-9 <= expected.score <= high + 1e-9:
                problems.append(f"score {expected.score} is outside {low:.3f}..{high:.3f}, "
                                "what its dimension bands allow with the seed's weights")
    return problems


PROMPT_ALIGNMENT = ScorerType(
    name="prompt_alignment", options=AlignmentOptions, levels=("turn", "session"),
    summary="intent, requirements, completeness and appropriateness scored 0..1 in one judge "
            "call, weighted as the seed documents (user, system or both)",
    build=lambda name, scale, o, judge: PromptAlignmentScorer(
        judge, scale=scale, evaluation_mode=o.evaluation_mode, pass_threshold=o.pass_threshold,
        name=name, examples=o.examples, examples_max_tokens=o.examples_max_tokens,
        include_trajectory=o.include_trajectory, session=o.session),
    flags=(Flag("mode", "Prompt-alignment evaluation mode.", option="evaluation_mode",
                choices=("user", "system", "both"), default="both"),),
    shape_case=_shape, check_case=_check)
