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

from pydantic import BaseModel, ConfigDict, Field, StrictBool, create_model

from otel_scorers.errors import ConfigError, ScorerInputError
from otel_scorers.judge.client import JudgeClient, Judgement, JudgeRequest
from otel_scorers.scorers import prompts
from otel_scorers.scorers.base import LLMScorer, Question, digest, mastra_options
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

    def __post_init__(self) -> None:
        if not isinstance(self.description, str) or not self.description.strip():
            raise ConfigError("a rubric criterion needs a non-empty description")
        if self.id is not None and (not isinstance(self.id, str) or not self.id.strip()):
            raise ConfigError(f"criterion id must be a non-empty string, got {self.id!r}")


RubricLike = str | Criterion | Mapping[str, Any] | Sequence[str | Criterion | Mapping[str, Any]]


def parse_rubric(rubric: RubricLike | None) -> tuple[Criterion, ...]:
    """Turn a string checklist, a criterion, or a list of them into criteria.

    A string is one required criterion per non-blank line, with one leading list marker
    (``-``, ``*``, ``•``, ``1.``, ``1)``) removed when white space follows it, so
    ``1.5 is a version`` stays whole. Mappings take ``description``, ``id`` and ``required``.
    """
    if rubric is None:
        return ()
    if isinstance(rubric, str):
        lines = (line.strip() for line in rubric.splitlines())
        texts = (_MARKER.sub("", line, count=1).strip() for line in lines if line)
        return tuple(Criterion(text) for text in texts if text)
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
            out.extend(parse_rubric(item))
        elif isinstance(item, Mapping):
            unknown = set(item) - {"description", "id", "required"}
            if unknown:
                raise ConfigError(f"unknown criterion keys: {sorted(unknown)}")
            required = item.get("required", True)
            if not isinstance(required, bool):
                raise ConfigError(f"criterion 'required' must be true or false, got {required!r}")
            out.append(Criterion(description=item.get("description", ""), id=item.get("id"),
                                 required=required))
        else:
            raise ConfigError(f"cannot read a rubric criterion from {type(item).__name__}")
    return tuple(out)


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


class CriterionVerdict(BaseModel):
    """One criterion as judged (``analyzeStepResult.criteria[i]``)."""

    model_config = ConfigDict(frozen=True)

    id: str
    description: str
    required: bool
    satisfied: bool
    reasoning: str


class RubricAnalysis(BaseModel):
    """The rubric's ``analyzeStepResult``."""

    model_config = ConfigDict(frozen=True)

    criteria: tuple[CriterionVerdict, ...]
    overall_assessment: str = ""
    required_unmet: int = 0
    #: The rubric came with the run (a span attribute, the request context): application
    #: content, so telemetry without content (``reasons="none"``) must not carry its text,
    #: not even as criterion-id slugs.
    dynamic: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "criteria": [c.model_dump() for c in self.criteria],
            "overallAssessment": self.overall_assessment,
            "requiredUnmet": self.required_unmet,
        }


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
                 examples_max_tokens: int = 1500, **judge_options: Any) -> None:
        super().__init__(model, name=name, scale=scale, judge_options=judge_options)
        self.set_examples(examples, kind="rubric", max_tokens=examples_max_tokens)
        self.criteria = parse_rubric(criteria)
        if len(self.criteria) > MAX_CRITERIA:
            raise ConfigError(f"a rubric holds at most {MAX_CRITERIA} criteria")
        self._ids = criterion_ids(self.criteria)

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
                criteria = parse_rubric(value)
            except ConfigError as exc:
                raise ScorerInputError(f"invalid rubric in {source}: {exc}") from exc
            if len(criteria) > MAX_CRITERIA:
                raise ScorerInputError(f"rubric in {source} has more than {MAX_CRITERIA} criteria")
            if any(len(c.description) > MAX_CRITERION_CHARS for c in criteria):
                raise ScorerInputError(f"rubric in {source} has a criterion longer than "
                                       f"{MAX_CRITERION_CHARS} characters")
            if criteria:
                return criteria, source
        return (), "none"

    def cache_key(self, run: ScorerRun) -> str | None:
        criteria, _ = self.resolve(run)
        return digest("rubric", self.judge.fingerprint, self.scale, criteria,
                      run.system_prompt, run.conversation, run.user_prompt, run.response,
                      self.examples_digest)

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
        dynamic = source != "static"
        redactor = self.judge.redactor
        if dynamic and redactor is not None:  # what the judge saw, and all that is reported
            criteria = tuple(Criterion(redactor(c.description), c.id, c.required)
                             for c in criteria)
        ids = self._ids if criteria is self.criteria else criterion_ids(criteria)
        request = JudgeRequest(instructions=prompts.RUBRIC_INSTRUCTIONS,
                               fields=prompts.rubric_fields(criteria, run),
                               answer_model=answer_model(len(criteria)),
                               task=prompts.rubric_task(len(criteria)),
                               examples=self.examples_text)
        return Question(request, lambda judgement: self._result(
            run, criteria, ids, dynamic, judgement))

    def _result(self, run: ScorerRun, criteria: tuple[Criterion, ...], ids: tuple[str, ...],
                dynamic: bool, judgement: Judgement[Any]) -> ScoreResult:
        answer: Any = judgement.value
        verdicts = tuple(
            CriterionVerdict(id=ident, description=c.description, required=c.required,
                             satisfied=getattr(answer.verdicts, f"c{i}").satisfied,
                             reasoning=getattr(answer.verdicts, f"c{i}").reasoning)
            for i, (c, ident) in enumerate(zip(criteria, ids, strict=True), start=1)
        )
        gating = [v for v in verdicts if v.required] or list(verdicts)
        unmet = [v for v in gating if not v.satisfied]
        analysis = RubricAnalysis(criteria=verdicts, overall_assessment=answer.overall_assessment,
                                  required_unmet=len(unmet), dynamic=dynamic)
        passed = not unmet
        return ScoreResult(
            run_id=run.run_id, scorer=self.name, score=self.scale if passed else 0.0,
            scale=self.scale, label="pass" if passed else "fail", passed=passed,
            reason=rubric_reason(analysis, gating_count=len(gating)), analysis=analysis,
            judge=judgement.usage)


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

