"""The rubric scorer (seed: Mastra ``createRubricScorer``).

A rubric is a checklist of criteria. The judge gives one verdict per criterion (reasoning
first, then ``satisfied``) in a single call; the score is ``scale`` when every required
criterion is satisfied and 0 otherwise. Optional criteria are judged and reported but never
gate, unless no criterion is required, in which case all of them gate.

Verdicts come back under fixed keys ``c1..cN`` (one per criterion, by position), so each
criterion is judged exactly once and matching never depends on the judge echoing text;
``required`` always comes from the rubric. A missing, extra or malformed verdict is a schema
violation: one corrective re-ask, then an error result, never a pass.

Without static criteria the rubric is read per run from ``request_context["rubric"]``, then
``additional_context["rubric"]``, then ``input["rubric"]``; when none resolves the scorer does
nothing and returns ``scale`` with ``skipped="no_rubric"`` (the seed's behaviour).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import Field, StrictBool, create_model

from otel_scorers.config.settings import CriterionSettings
from otel_scorers.errors import ConfigError, ScorerInputError
from otel_scorers.judge.client import JudgeClient, Judgement, JudgeRequest
from otel_scorers.registry import Flag, Options, ScorerType, option
from otel_scorers.scorers import prompts
from otel_scorers.scorers.analysis import CriterionVerdict, RubricAnalysis
from otel_scorers.scorers.base import LLMScorer, Question, digest, mastra_options
from otel_scorers.scorers.checks import steps_truncated_result
from otel_scorers.scorers.criteria import (
    MAX_CRITERIA,
    MAX_CRITERION_CHARS,
    Criterion,
    RubricLike,
    criterion_ids,
    needs_steps,
    parse_rubric,
    plain_criteria,
)
from otel_scorers.scorers.result import JudgeModel, ScoreResult, bounded_text
from otel_scorers.scorers.run import ScorerRun

__all__ = [
    "Criterion",
    "CriterionVerdict",
    "RubricAnalysis",
    "RubricLike",
    "RubricScorer",
    "create_rubric_scorer",
    "parse_rubric",
]

class _Verdict(JudgeModel):
    reasoning: bounded_text(400)  # type: ignore[valid-type]
    satisfied: StrictBool


@functools.cache
def answer_model(count: int) -> type[JudgeModel]:
    """The judge's answer schema for ``count`` criteria: keys ``c1..cN``, each exactly once."""
    verdicts: Any = create_model(  # type: ignore[call-overload]
        f"RubricVerdicts{count}",
        __base__=JudgeModel,
        **{f"c{i}": (_Verdict, Field(alias=f"c{i}")) for i in range(1, count + 1)},
    )
    model: type[JudgeModel] = create_model(
        "RubricJudgement",
        __base__=JudgeModel,
        verdicts=(verdicts, ...),
        overall_assessment=(bounded_text(600), ...),
    )
    return model


class RubricScorer(LLMScorer):
    """LLM-as-judge rubric scorer: ``scale`` when every required criterion holds, else 0."""

    def __init__(self, model: str | JudgeClient | None = None, criteria: RubricLike | None = None,
                 *, scale: float = 1.0, name: str = "rubric", examples: Any = None,
                 examples_max_tokens: int = 1500, include_trajectory: bool = False,
                 session: bool = False, **judge_options: Any) -> None:
        super().__init__(model, name=name, scale=scale, judge_options=judge_options)
        self.set_examples(examples, kind="rubric", max_tokens=examples_max_tokens)
        #: judge whole conversations (live: once a session goes idle), not each turn; the
        #: built-in criteria ``goal_completion`` and ``knowledge_retention`` may be named
        self.level = "session" if session else "turn"
        self.criteria = parse_rubric(criteria)
        if session:
            self.criteria = builtin_criteria(self.criteria)
        if len(self.criteria) > MAX_CRITERIA:
            raise ConfigError(f"a rubric holds at most {MAX_CRITERIA} criteria")
        self._ids = criterion_ids(self.criteria)
        #: show the judge what the agent did (its steps), so a criterion may speak of it
        self.include_trajectory = include_trajectory
        self.uses_steps = include_trajectory or needs_steps(self.criteria)

    def resolve(self, run: ScorerRun) -> tuple[tuple[Criterion, ...], str]:
        """The criteria for ``run`` and where they came from."""
        if self.criteria:
            return self.criteria, "static"
        for source, values in (("request_context", run.request_context),
                               ("additional_context", run.additional_context),
                               ("input", run.input_data)):
            value = values.get("rubric")
            if value is None:
                continue
            try:
                criteria = parse_rubric(value, checks=False)
            except ConfigError as exc:
                raise ScorerInputError(f"invalid rubric in {source}: {exc}") from exc
            if len(criteria) > MAX_CRITERIA:
                raise ScorerInputError(f"rubric in {source} has more than {MAX_CRITERIA} criteria")
            if any(len(c.description) > MAX_CRITERION_CHARS for c in criteria):
                raise ScorerInputError(f"rubric in {source} has a criterion longer than "
                                       f"{MAX_CRITERION_CHARS} characters")
            if criteria:
                return (builtin_criteria(criteria) if self.level == "session" else criteria,
                        source)
        return (), "none"

    def cache_key(self, run: ScorerRun) -> str | None:
        criteria, _ = self.resolve(run)
        return digest(self.name_of_prompt, self.judge.fingerprint, self.scale, criteria,
                      run.system_prompt, run.conversation, run.user_prompt, run.response,
                      len(run.turns) > 1,
                      self.examples_digest, prompts.trajectory_digest(run, self.include_trajectory
                                                                     or needs_steps(criteria)))

    def ask(self, run: ScorerRun) -> Question | ScoreResult:
        criteria, source = self.resolve(run)
        if not criteria:
            return ScoreResult(
                run_id=run.run_id, scorer=self.name, score=self.scale, scale=self.scale,
                label="skipped", passed=True, skipped="no_rubric",
                reason=("No rubric resolved (no criteria configured and no 'rubric' in the "
                        "request context, additional context or input): nothing was judged "
                        "and no verdict is given. To fix: give the scorer criteria, a rubric "
                        "for this agent, or a 'rubric' in the run's context."))
        if not run.response.strip():
            raise ScorerInputError("the run has no response to judge (empty output)")
        dynamic = source not in ("static", "builtin")
        redactor = self.judge.redactor
        if dynamic and redactor is not None:  # what the judge saw, and all that is reported
            criteria = tuple(Criterion(redactor(c.description), c.id, c.required, c.check)
                             for c in criteria)
        ids = self._ids if criteria is self.criteria else criterion_ids(criteria)
        decided = {i: c.check(run) for i, c in enumerate(criteria) if c.check is not None}
        judged = [c for c in criteria if c.check is None]
        if not judged:  # every criterion is a check: no judge call
            return self._result(run, criteria, ids, dynamic, decided, None)
        return Question(self.request(judged, run), lambda judgement: self._result(
            run, criteria, ids, dynamic, decided, judgement))

    #: What the cache key calls this scorer's prompt (a subclass with its own prompt differs).
    name_of_prompt = "rubric"

    def request(self, judged: Sequence[Criterion], run: ScorerRun) -> JudgeRequest[Any]:
        """The judge request for the criteria the judge decides (checks are decided here)."""
        return JudgeRequest(instructions=prompts.rubric_instructions(run),
                            fields=prompts.rubric_fields(judged, run,
                                                         trajectory=self.include_trajectory),
                            answer_model=answer_model(len(judged)),
                            task=prompts.rubric_task(len(judged)), examples=self.examples_text)

    def _result(self, run: ScorerRun, criteria: tuple[Criterion, ...], ids: tuple[str, ...],
                dynamic: bool, decided: dict[int, tuple[bool | None, str]],
                judgement: Judgement[Any] | None) -> ScoreResult:
        answer: Any = judgement.value if judgement is not None else None
        found: list[CriterionVerdict] = []
        label = 0
        for index, (c, ident) in enumerate(zip(criteria, ids, strict=True)):
            if index in decided:
                held, reasoning = decided[index]
                satisfied = bool(held)
            else:
                label += 1
                verdict = getattr(answer.verdicts, f"c{label}")
                satisfied, reasoning = verdict.satisfied, verdict.reasoning
            found.append(CriterionVerdict(id=ident, description=c.description,
                                          required=c.required, satisfied=satisfied,
                                          reasoning=reasoning))
        verdicts = tuple(found)
        gating = [v for v in verdicts if v.required] or list(verdicts)
        unmet = [v for v in gating if not v.satisfied]
        analysis = RubricAnalysis(criteria=verdicts, overall_assessment=(
            answer.overall_assessment if answer is not None else ""),
            required_unmet=len(unmet), dynamic=dynamic)
        undecided = {ids[i] for i, (held, _) in decided.items() if held is None}
        if undecided and all(v.id in undecided for v in unmet):  # nothing certain fails
            return steps_truncated_result(
                self.name, self.scale, run, analysis=analysis,
                judge=judgement.usage if judgement is not None else None)
        passed = not unmet
        return ScoreResult(
            run_id=run.run_id, scorer=self.name, score=self.scale if passed else 0.0,
            scale=self.scale, label="pass" if passed else "fail", passed=passed,
            reason=rubric_reason(analysis, gating_count=len(gating)), analysis=analysis,
            judge=judgement.usage if judgement is not None else None)


#: The built-in criteria of conversations, named in a rubric by their id alone (a line
#: ``goal_completion``): what users ask of a session most.
BUILTIN_CRITERIA: dict[str, Criterion] = {
    "goal_completion": Criterion(
        "By the end of the conversation the agent has achieved what the user set out to do in "
        "their opening turns (or plainly said why it cannot and what the user can do instead), "
        "without the user giving up, repeating the request or asking again.",
        id="goal_completion"),
    "knowledge_retention": Criterion(
        "The agent remembers what the user told it in earlier turns: it never asks again for "
        "information already given, and never contradicts or forgets facts, preferences or "
        "constraints the user stated.", id="knowledge_retention"),
}


def builtin_criteria(criteria: Sequence[Criterion]) -> tuple[Criterion, ...]:
    """``criteria`` with each one that names a built-in (its description is exactly
    ``goal_completion`` or ``knowledge_retention``) replaced by it, keeping ``required``."""
    out = []
    for criterion in criteria:
        builtin = BUILTIN_CRITERIA.get(criterion.description.strip())
        if builtin is not None and criterion.check is None:
            out.append(Criterion(builtin.description, criterion.id or builtin.id,
                                 criterion.required))
        else:
            out.append(criterion)
    return tuple(out)


def rubric_reason(analysis: RubricAnalysis, *, gating_count: int) -> str:
    """The feedback text: verdicts line by line, what to fix, the judge's overall view."""
    unmet = analysis.required_unmet
    gate_word = "gating" if not any(c.required for c in analysis.criteria) else "required"
    if unmet == 0:
        header = f"Rubric satisfied: all {gating_count} {gate_word} criteria are met."
    else:
        header = (f"Rubric not satisfied: {unmet} of {gating_count} {gate_word} criteria "
                  "are not met.")
    lines = [header]
    for verdict in analysis.criteria:
        mark = "PASS" if verdict.satisfied else "FAIL"
        tag = "required" if verdict.required else "optional"
        lines.append(f"- [{mark}] [{tag}] {verdict.description} — {verdict.reasoning}")
    if analysis.overall_assessment:
        lines.append(f"Overall: {analysis.overall_assessment}")
    if unmet:
        gating_all = not any(c.required for c in analysis.criteria)
        todo = [v.description for v in analysis.criteria
                if not v.satisfied and (v.required or gating_all)]
        lines.append(f"Unmet {gate_word} criteria: {unmet}. To fix: " + "; ".join(todo))
    else:
        lines.append(f"Unmet {gate_word} criteria: 0.")
    return "\n".join(lines)


def create_rubric_scorer(*, model: str | JudgeClient | None = None,
                         criteria: RubricLike | None = None,
                         options: Mapping[str, Any] | None = None) -> RubricScorer:
    """The seed-style factory: ``options`` takes ``scale``, ``name`` and judge options; any
    other option is a :class:`ConfigError` naming what is accepted."""
    opts = mastra_options(options, {"scale": "scale", "name": "name"}, "the rubric scorer")
    return RubricScorer(model, criteria, **opts)



# -- the row -------------------------------------------------------------------------------------
Criteria = str | list[str | CriterionSettings] | None


class RubricOptions(Options):
    """The rubric scorer's options (``type: rubric``)."""

    criteria: Criteria = option(None, "the criteria (a checklist string or a "
                                "list; in session scorers `goal_completion` and "
                                "`knowledge_retention` name the built-in criteria)")
    examples: str | None = option(None, "labelled cases of the scorer's kind (JSON lines) "
                                  "shown to the judge as few-shot examples, fenced, in the "
                                  "system prompt (see the README, \"How far can I trust my "
                                  "judge?\")")
    examples_max_tokens: int = option(1500, "the few-shot examples' token budget", gt=0)
    include_trajectory: bool = option(False, "show the judge what "
                                      "the agent did (its tool calls, retrievals, handoffs)")
    session: bool = option(False, "judge each whole conversation "
                           "(once its session goes idle), its last answer in the light of "
                           "every earlier turn, instead of each turn")


def criteria_from_flags(values: Mapping[str, Any], *, checks: bool) -> list[Any]:
    """``--criteria`` (required), ``--optional`` and (``checks``) ``--check`` as criteria."""
    out: list[Any] = list(values.get("criteria", ()))
    out += [{"description": c.description, "required": False}
            for text in values.get("optional", ()) for c in parse_rubric(text)]
    if checks:
        out += [{"check": spec} for spec in values.get("check", ())]
    return out


CRITERIA_FLAGS = (
    Flag("criteria", "Required criterion (repeatable), a newline checklist, or @file.",
         multiple=True, text=True, metavar="TEXT"),
    Flag("optional", "Optional criterion: judged and reported, never gating (repeatable).",
         multiple=True, text=True, metavar="TEXT"),
)


def _shape(case: Any) -> None:
    if not case.options.criteria:
        raise ValueError("a rubric case needs options.criteria")
    if case.expected.label is None:
        raise ValueError("a rubric case expects 'label' (and 'verdicts')")
    if case.expected.verdicts is not None and len(case.expected.verdicts) != len(
            case.options.criteria):
        raise ValueError(f"{len(case.expected.verdicts)} verdicts for "
                         f"{len(case.options.criteria)} criteria")


def _check(case: Any) -> list[str]:
    expected = case.expected
    if expected.verdicts is None:  # a reviewer's label of the run (calibrate --cases
        return []                  # phoenix): nothing to hold it to
    gating = [v for v, c in zip(expected.verdicts, case.options.criteria, strict=True)
              if c.required] or list(expected.verdicts)
    label = "pass" if all(gating) else "fail"
    return [] if expected.label == label else [
        f"label {expected.label!r} but the verdicts make it {label!r}"]


RUBRIC = ScorerType(
    name="rubric", options=RubricOptions, levels=("turn", "session"),
    summary="a checklist of criteria, one verdict each in one judge call; passes when every "
            "required criterion holds (quick checks among them are decided in code)",
    build=lambda name, scale, o, judge: RubricScorer(
        judge, plain_criteria(o.criteria), scale=scale, name=name, examples=o.examples,
        examples_max_tokens=o.examples_max_tokens, include_trajectory=o.include_trajectory,
        session=o.session),
    flags=(*CRITERIA_FLAGS,
           Flag("check", "A quick check (`called_tool get_weather`, repeatable): the checks "
                "scorer's checks, or rubric criteria decided without the judge.",
                multiple=True, metavar="CHECK")),
    from_flags=lambda values: {"criteria": criteria_from_flags(values, checks=True)},
    shape_case=_shape, check_case=_check)
