"""Verdicts per criterion, the shape every checklist-like result shares: a rubric's criteria,
quick checks, a trajectory's parts, tool-use steps and faithfulness claims. Emission, metrics
and the CLI read this one shape, so a new scorer reporting its parts this way is shown like a
rubric everywhere."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

__all__ = ["CriterionVerdict", "RubricAnalysis"]


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
