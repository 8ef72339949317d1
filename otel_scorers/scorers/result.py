"""The result every scorer returns: a score, or an error, never both.

``ScoreResult.to_dict()`` gives the seed's ``.run()`` shape (``runId``, ``score``, ``reason``,
``analyzeStepResult``) plus this library's fields (scorer, scale, label, passed, mode, skipped,
error, judge usage), all in camelCase.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, SerializeAsAny
from pydantic.alias_generators import to_camel

from otel_scorers.errors import ERROR_TYPES, OtelScorersError
from otel_scorers.judge.client import JudgeUsage

__all__ = ["JudgeModel", "ScoreError", "ScoreResult", "bounded_list", "bounded_text"]


class JudgeModel(BaseModel):
    """Base of the models the judge fills in: camelCase on the wire, strict, no extra keys."""

    model_config = ConfigDict(frozen=True, strict=True, extra="forbid",
                              alias_generator=to_camel, populate_by_name=True)

    def to_dict(self) -> dict[str, Any]:
        dumped: dict[str, Any] = self.model_dump(by_alias=True, mode="json", exclude_none=True)
        return dumped


def _clip_text(limit: int) -> Any:
    def clip(value: str) -> str:
        return value if len(value) <= limit else value[: limit - 1] + "…"
    return clip


def bounded_text(limit: int) -> Any:
    """A string the schema bounds (for constrained decoders) and parsing clips, not rejects."""
    return Annotated[str, AfterValidator(_clip_text(limit)),
                     Field(json_schema_extra={"maxLength": limit})]


def bounded_list(item: Any, limit: int) -> Any:
    """A list the schema bounds and parsing clips to ``limit`` items."""
    def clip(value: tuple[Any, ...]) -> tuple[Any, ...]:
        return value[:limit]
    return Annotated[tuple[item, ...], AfterValidator(clip),
                     Field(json_schema_extra={"maxItems": limit})]


class ScoreError(BaseModel):
    """Why a run was not scored: a stable ``type`` (the ``error.type`` value) and a message."""

    model_config = ConfigDict(frozen=True)

    type: str
    message: str

    @classmethod
    def from_exception(cls, error: OtelScorersError) -> ScoreError:
        return cls(type=error.error_type, message=str(error))


class Evaluator(BaseModel):
    """Which evaluator produced a result (:mod:`otel_scorers.scorers.provenance`): the scorer
    (``id``), ``llm`` or ``code`` (``type``), the judge model, the fingerprint of everything
    but the run that defines the judgement, and the score's range."""

    model_config = ConfigDict(frozen=True)

    id: str
    type: str
    judge_model: str | None = None
    fingerprint: str
    score_min: float = 0.0
    score_max: float = 1.0


class ScoreResult(BaseModel):
    """The outcome of one scorer on one run.

    Exactly one of ``score`` and ``error`` is set. ``passed`` is the scorer's own pass verdict
    (the rubric: every required criterion met; prompt alignment: the optional threshold).
    ``skipped`` names why a scorer did nothing while still giving a score (``no_rubric``).
    """

    model_config = ConfigDict(frozen=True)

    run_id: str
    scorer: str
    score: float | None = None
    scale: float = 1.0
    label: str | None = None
    passed: bool | None = None
    reason: str = ""
    analysis: SerializeAsAny[BaseModel] | None = None
    mode: str | None = None
    skipped: str | None = None
    notes: tuple[str, ...] = ()
    error: ScoreError | None = None
    judge: JudgeUsage | None = None
    cached: bool = False
    #: who produced it (scorer, judge model, fingerprint, score range): set where results are
    #: emitted (:func:`otel_scorers.scorers.provenance.evaluator_of`)
    evaluator: Evaluator | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def normalized_score(self) -> float | None:
        """The score divided by the scale (0..1), or ``None`` for an error."""
        return None if self.score is None else self.score / self.scale

    @property
    def complete(self) -> bool:
        """True when the score equals its maximum (the seed's ``isTaskComplete`` test)."""
        return self.score is not None and self.score >= self.scale

    def reported(self) -> ScoreResult:
        """This result as telemetry, the CLI and ``rescore`` report it: a skipped evaluation
        (nothing was judged, e.g. no rubric) carries no score and no pass verdict there,
        only ``label="skipped"``; anything else is returned as it is."""
        if self.skipped is None:
            return self
        return self.model_copy(update={"score": None, "passed": None, "label": "skipped"})

    def raise_for_error(self) -> ScoreResult:
        """Raise the error this result carries (as its original exception class), if any."""
        if self.error is not None:
            raise ERROR_TYPES.get(self.error.type, OtelScorersError)(self.error.message)
        return self

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "runId": self.run_id,
            "scorer": self.scorer,
            "score": self.score,
            "scale": self.scale,
            "label": self.label,
            "passed": self.passed,
            "reason": self.reason,
            "analyzeStepResult": _dump(self.analysis),
        }
        if self.mode is not None:
            out["evaluationMode"] = self.mode
        if self.skipped is not None:
            out["skipped"] = self.skipped
        if self.notes:
            out["notes"] = list(self.notes)
        if self.error is not None:
            out["error"] = {"type": self.error.type, "message": self.error.message}
        if self.judge is not None:
            out["judge"] = self.judge.to_dict()
        if self.cached:
            out["cached"] = True
        return out


def _dump(analysis: BaseModel | None) -> Any:
    if analysis is None:
        return None
    to_dict = getattr(analysis, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    return analysis.model_dump(by_alias=True, mode="json")
