"""What a scorer found besides its score, and how it shows itself wherever a result goes.

An :class:`Analysis` renders itself: as span attributes under a content policy, as the metadata
a result sink stores, as the table ``otel-scorers score`` prints, as the rows of the verdict and
dimension metrics, and as what calibration compares with a labelled case. Emission, the sinks,
the CLI and calibration ask the analysis instead of inspecting its type, so a new scorer with an
analysis of its own is shown everywhere without touching them. An analysis that is not an
:class:`Analysis` (a custom scorer's own model) is carried as it is and shown by its score.

Verdicts per criterion are the shape every checklist-like result shares (a rubric's criteria,
quick checks, a trajectory's parts, tool-use calls, faithfulness claims): :class:`RubricAnalysis`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict

from otel_scorers import names as n
from otel_scorers.policy import ContentPolicy
from otel_scorers.scorers.result import ScoreResult

__all__ = ["Analysis", "Calibrated", "CaseLike", "CriterionVerdict", "RubricAnalysis", "Table",
           "rendering"]


class CaseLike(Protocol):
    """What an analysis reads of a labelled case when it is calibrated
    (:class:`~otel_scorers.scorers.cases.LabelledCase`)."""

    @property
    def scorer(self) -> str: ...

    @property
    def expected(self) -> Any: ...

    def criterion_ids(self) -> tuple[str, ...]: ...

    def scorer_run(self) -> Any: ...


@dataclass(frozen=True)
class Table:
    """What ``otel-scorers score`` prints of an analysis: a titled table of text cells;
    ``verdict_column`` holds ``satisfied`` / ``not satisfied`` (the terminal colours it)."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    verdict_column: int | None = None


@dataclass(frozen=True)
class Calibrated:
    """What a judged result says, in the terms calibration compares with a case's labels:
    the pass verdict, the normalized score, verdicts ``(id, expected, judged)`` and band hits
    per dimension (``"user.intent"``)."""

    judged_pass: bool | None = None
    normalized: float | None = None
    verdicts: tuple[tuple[str, bool, bool], ...] = ()
    dimension_hits: Mapping[str, bool] = field(default_factory=dict)


class Analysis(BaseModel):
    """Base of the analyses that render themselves (see the module docstring); every method
    has a sensible empty default, so an analysis overrides only what it has."""

    model_config = ConfigDict(frozen=True)

    def attributes(self, result: ScoreResult, policy: ContentPolicy) -> dict[str, Any]:
        """Span attributes, named relative to the scorer's prefix; text under ``policy``."""
        return {}

    def metadata(self, policy: ContentPolicy) -> dict[str, Any]:
        """Plain JSON values a result sink stores beside score, label and explanation."""
        return {}

    def table(self, result: ScoreResult) -> Table | None:
        """The table ``otel-scorers score`` prints above the reason (``None``: none)."""
        return None

    def verdict_rows(self, content_free: bool) -> Sequence[tuple[str, bool, bool]]:
        """``(criterion id, satisfied, required)`` for the criterion-verdict metric."""
        return ()

    def dimension_rows(self, mode: str | None) -> Sequence[tuple[str, str, float]]:
        """``(side, dimension, score)`` for the dimension-score metric."""
        return ()

    def summary_rows(self) -> Sequence[tuple[str, bool]]:
        """``(what names the part across runs, satisfied)``: a dataset summary's failures."""
        return ()

    def calibrated(self, case: CaseLike, result: ScoreResult) -> Calibrated:
        """This judged result in calibration's terms (a case of the scorer's own kind)."""
        return plain_calibrated(result)


def plain_calibrated(result: ScoreResult) -> Calibrated:
    """A result without an analysis of its own, in calibration's terms: its pass verdict and
    its normalized score."""
    return Calibrated(judged_pass=result.passed, normalized=result.normalized_score)


#: How an analysis that is not an :class:`Analysis` is shown: by nothing but its score.
PLAIN = Analysis()


def rendering(analysis: BaseModel | None) -> Analysis:
    """``analysis`` when it renders itself, else :data:`PLAIN`."""
    return analysis if isinstance(analysis, Analysis) else PLAIN


class CriterionVerdict(BaseModel):
    """One criterion as judged (``analyzeStepResult.criteria[i]``)."""

    model_config = ConfigDict(frozen=True)

    id: str
    description: str
    required: bool
    satisfied: bool
    reasoning: str
    #: a part scored between 0 and 1 (a trajectory's accuracy), when it is not all or nothing
    score: float | None = None


class RubricAnalysis(Analysis):
    """The rubric's ``analyzeStepResult``: a verdict per criterion."""

    criteria: tuple[CriterionVerdict, ...]
    overall_assessment: str = ""
    required_unmet: int = 0
    #: The criteria came with the run (a rubric in a span attribute or the request context;
    #: a tool-use call): application content, so telemetry without content
    #: (``reasons="none"``) must not carry its text, not even as criterion-id slugs, and with
    #: ``exported_content: strip`` the descriptions stay behind.
    dynamic: bool = False
    #: whether each criterion's verdict is counted in the criterion-verdict metric (false where
    #: the ids are positions with no meaning across runs: a claim, a step)
    verdict_metrics: ClassVar[bool] = True
    #: what names a criterion across runs in summaries: its description (a rubric's, a
    #: check's, a trajectory part's), or its id where the description is about one run (a
    #: tool-use call: its id is the tool's name)
    stable_key: ClassVar[str] = "description"

    def to_dict(self) -> dict[str, Any]:
        return {
            "criteria": [c.model_dump(exclude_none=True) for c in self.criteria],
            "overallAssessment": self.overall_assessment,
            "requiredUnmet": self.required_unmet,
        }

    def emitted_ids(self, content_free: bool) -> list[str]:
        """Criterion ids as telemetry carries them: the rubric's, except for a rubric that
        came with the run when no content may leave (``reasons="none"``): ``c1``, ``c2``, ...
        then, since an id made from a description is a piece of that description."""
        if content_free and self.dynamic:
            return [f"c{i}" for i in range(1, len(self.criteria) + 1)]
        return [c.id for c in self.criteria]

    def attributes(self, result: ScoreResult, policy: ContentPolicy) -> dict[str, Any]:
        ids = self.emitted_ids(policy.content_free)
        gating_all = not any(c.required for c in self.criteria)
        out: dict[str, Any] = {
            n.ATTR_CRITERIA_IDS: ids,
            n.ATTR_CRITERIA_UNMET: [i for i, c in zip(ids, self.criteria, strict=True)
                                    if not c.satisfied and (c.required or gating_all)],
            n.ATTR_REQUIRED_UNMET: self.required_unmet,
            n.ATTR_OVERALL_ASSESSMENT: policy.text(self.overall_assessment),
        }
        described = policy.run_text if self.dynamic else policy.text
        for ident, criterion in zip(ids, self.criteria, strict=True):
            base = f"{n.ATTR_CRITERION}.{ident}."
            out[base + "satisfied"] = criterion.satisfied
            out[base + "required"] = criterion.required
            out[base + "description"] = described(criterion.description)
            out[base + "reasoning"] = policy.text(criterion.reasoning)
            out[base + "score"] = criterion.score
        return {key: value for key, value in out.items() if value is not None}

    def metadata(self, policy: ContentPolicy) -> dict[str, Any]:
        """Per criterion its id, verdict (and part score); its text and reasoning only when
        the reasons switch lets content out."""
        content = not policy.content_free
        criteria = []
        for index, criterion in enumerate(self.criteria, start=1):
            row: dict[str, Any] = {
                "id": criterion.id if content or not self.dynamic else f"c{index}",
                "satisfied": criterion.satisfied, "required": criterion.required}
            if criterion.score is not None:
                row["score"] = criterion.score
            if content:
                row["description"] = (policy.run_text if self.dynamic else policy.text)(
                    criterion.description)
                row["reasoning"] = policy.text(criterion.reasoning)
            criteria.append(row)
        return {"criteria": criteria[:100]}

    def table(self, result: ScoreResult) -> Table | None:
        return Table(f"{result.scorer}: criteria",
                     ("criterion", "required", "verdict", "reasoning"),
                     tuple((c.description, "required" if c.required else "optional",
                            "satisfied" if c.satisfied else "not satisfied", c.reasoning)
                           for c in self.criteria), verdict_column=2)

    def verdict_rows(self, content_free: bool) -> Sequence[tuple[str, bool, bool]]:
        if not self.verdict_metrics:
            return ()
        return [(ident, c.satisfied, c.required)
                for ident, c in zip(self.emitted_ids(content_free), self.criteria, strict=True)]

    def summary_rows(self) -> Sequence[tuple[str, bool]]:
        if not self.verdict_metrics:
            return ()
        return [(getattr(c, self.stable_key), c.satisfied) for c in self.criteria]

    def calibrated(self, case: CaseLike, result: ScoreResult) -> Calibrated:
        """The run's pass verdict, and each criterion's verdict against the case's when it
        has them (a reviewer's label of the run has none)."""
        judged_pass = result.label == "pass"
        if case.expected.verdicts is None:
            return Calibrated(judged_pass=judged_pass)
        verdicts = tuple((ident, expected, verdict.satisfied) for ident, expected, verdict
                         in zip(case.criterion_ids(), case.expected.verdicts, self.criteria,
                                strict=True))
        return Calibrated(judged_pass=judged_pass, verdicts=verdicts)
