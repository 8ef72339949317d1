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
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import Field, StrictBool, create_model

from otel_scorers.errors import ConfigError, ScorerInputError
from otel_scorers.judge.client import JudgeClient, Judgement, JudgeRequest
from otel_scorers.scorers import prompts
from otel_scorers.scorers.base import LLMScorer, Question, digest, mastra_options
from otel_scorers.scorers.checks import Check, parse_check
from otel_scorers.scorers.criteria import CriterionVerdict, RubricAnalysis
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

_MARKER = re.compile(r"^(?:[-*•]|\d+[.)])(?:\s+|$)")
_SLUG = re.compile(r"[^\w]+")
MAX_CRITERIA = 50
#: The longest criterion a rubric that comes with a run may hold (a criterion is a sentence;
#: anything longer is not one, and would be redacted and judged at length).
MAX_CRITERION_CHARS = 1_000


@dataclass(frozen=True)
class Criterion:
    """One rubric criterion: what must hold, an optional stable ``id``, and whether it gates."""

    description: str
    id: str | None = None
    required: bool = True
    #: decided in code, without the judge (:mod:`otel_scorers.scorers.checks`)
    check: Check | None = None

    @classmethod
    def of_check(cls, check: str | Check, *, required: bool = True) -> Criterion:
        """A criterion decided by a quick check (``"called_tool get_weather"``)."""
        parsed = parse_check(check)
        return cls(parsed.description, parsed.id, required, parsed)

    def __post_init__(self) -> None:
        if not isinstance(self.description, str) or not self.description.strip():
            raise ConfigError("a rubric criterion needs a non-empty description")
        if self.id is not None and (not isinstance(self.id, str) or not self.id.strip()):
            raise ConfigError(f"criterion id must be a non-empty string, got {self.id!r}")


RubricLike = str | Criterion | Mapping[str, Any] | Sequence[str | Criterion | Mapping[str, Any]]


def parse_rubric(rubric: RubricLike | None, *, checks: bool = True) -> tuple[Criterion, ...]:
    """Turn a string checklist, a criterion, or a list of them into criteria.

    A string is one required criterion per non-blank line, with one leading list marker
    (``-``, ``*``, ``•``, ``1.``, ``1)``) removed when white space follows it, so
    ``1.5 is a version`` stays whole. Mappings take ``description``, ``id``, ``required`` and
    ``check``. A line ``check: called_tool get_weather`` (or a ``check`` key) is a quick check,
    decided without the judge; ``checks=False`` (a rubric that came with a run) refuses them.
    """
    if rubric is None:
        return ()
    if isinstance(rubric, str):
        lines = (line.strip() for line in rubric.splitlines())
        texts = (_MARKER.sub("", line, count=1).strip() for line in lines if line)
        return tuple(_line(text, checks) for text in texts if text)
    if isinstance(rubric, Criterion | Mapping):
        rubric = [rubric]
    if not isinstance(rubric, Sequence):
        raise ConfigError(
            f"a rubric is a string or a list of criteria, not {type(rubric).__name__}")
    out: list[Criterion] = []
    for item in rubric:
        if isinstance(item, Criterion):
            out.append(item)
        elif isinstance(item, str):
            out.extend(parse_rubric(item, checks=checks))
        elif isinstance(item, Mapping):
            out.append(_criterion(item, checks))
        else:
            raise ConfigError(f"cannot read a rubric criterion from {type(item).__name__}")
    return tuple(out)


def _line(text: str, checks: bool) -> Criterion:
    if text[:6].lower() == "check:":
        if not checks:
            raise ConfigError("a rubric that comes with a run cannot hold checks (configure "
                              "them in the scorer or the rubrics setting)")
        return Criterion.of_check(text[6:].strip())
    return Criterion(text)


def _criterion(item: Mapping[str, Any], checks: bool) -> Criterion:
    unknown = set(item) - {"description", "id", "required", "check"}
    if unknown:
        raise ConfigError(f"unknown criterion keys: {sorted(unknown)}")
    required = item.get("required", True)
    if not isinstance(required, bool):
        raise ConfigError(f"criterion 'required' must be true or false, got {required!r}")
    if item.get("check") is not None:
        if not checks:
            raise ConfigError("a rubric that comes with a run cannot hold checks")
        made = Criterion.of_check(item["check"], required=required)
        return Criterion(item.get("description") or made.description, item.get("id") or made.id,
                         required, made.check)
    return Criterion(description=item.get("description", ""), id=item.get("id"),
                     required=required)


def needs_steps(criteria: Sequence[Criterion]) -> bool:
    """Whether any criterion is a check that reads what the agent did."""
    return any(c.check is not None and c.check.uses_steps for c in criteria)


def criterion_ids(criteria: Sequence[Criterion]) -> tuple[str, ...]:
    """Stable ids: the given ``id``, else a slug of the description (``c<N>`` when empty)."""
    ids: list[str] = []
    seen: set[str] = set()
    explicit = [c.id for c in criteria if c.id is not None]
    if len(explicit) != len(set(explicit)):
        raise ConfigError(f"criterion ids must be unique, got {explicit}")
    taken = set(explicit)
    for position, criterion in enumerate(criteria, start=1):
        if criterion.id is not None:
            ident = criterion.id
        else:
            base = _SLUG.sub("_", criterion.description.lower()).strip("_")[:40].rstrip("_")
            ident = base or f"c{position}"
            suffix = 2
            while ident in seen or ident in taken:
                ident = f"{base or 'c'}_{suffix}"
                suffix += 1
        seen.add(ident)
        ids.append(ident)
    return tuple(ids)


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
                        "request context, additional context or input): nothing was judged, "
                        f"score {self.scale:g} by default."))
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
                dynamic: bool, decided: dict[int, tuple[bool, str]],
                judgement: Judgement[Any] | None) -> ScoreResult:
        answer: Any = judgement.value if judgement is not None else None
        found: list[CriterionVerdict] = []
        label = 0
        for index, (c, ident) in enumerate(zip(criteria, ids, strict=True)):
            if index in decided:
                satisfied, reasoning = decided[index]
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

