"""Labelled cases: a run and what a correct judgement of it is (schema version 1).

One JSON object per line; the bundled golden set and a user's own cases share the format, and
so do the few-shot examples a scorer can be given (:mod:`otel_scorers.scorers.examples`)::

    {"schema": 1, "id": "rubric-support-003", "domain": "support", "scorer": "rubric",
     "run": {"input": "...", "system": "...", "context": [{"role": "user", "content": "..."}],
             "output": "..."},
     "options": {"criteria": [{"description": "...", "required": true}]},
     "expected": {"verdicts": [true, false], "label": "fail"},
     "rationale": "one line: why these are the right labels"}

A rubric case expects one verdict per criterion, in order, and the run's label (``pass`` exactly
when every gating criterion holds: the required ones, or all when none is required); a case
from a reviewer (``calibrate --cases phoenix``) may give the label alone. A
``tool_use`` case gives the run's ``steps`` (and ``tools``) and expects one verdict per tool
call (right tool, right arguments) and the label. A ``faithfulness`` case gives the context
(``options.context``, or tool results among the ``steps``) and expects the normalized score
(supported claims / claims), its band and the label (``pass`` only at 1.0). A
prompt-alignment case gives ``options.evaluation_mode`` and expects the normalized score (0..1),
its band (``low`` < 0.4 <= ``mid`` < 0.8 <= ``high``) and a band per dimension
(``intent``, ``requirements``, ``completeness``, ``appropriateness``) for the sides its mode
judges (``user``, ``system``). :func:`check_case` holds the labels to the scorer's own formula:
the expected score must be reachable from the dimension bands with the seed's weights.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from otel_scorers import registry
from otel_scorers.errors import ConfigError
from otel_scorers.scorers.criteria import Criterion, criterion_ids
from otel_scorers.scorers.dimensions import band_of
from otel_scorers.scorers.run import Message, ScorerRun

__all__ = [
    "BANDS",
    "SCHEMA_VERSION",
    "LabelledCase",
    "band_of",
    "band_problems",
    "case_from_record",
    "check_case",
    "load_cases",
    "parse_cases",
]

SCHEMA_VERSION = 1
Band = Literal["low", "mid", "high"]
#: Band -> the closed interval of normalized scores it stands for (``mid`` is [0.4, 0.8)).
BANDS: Mapping[str, tuple[float, float]] = {"low": (0.0, 0.4), "mid": (0.4, 0.8),
                                            "high": (0.8, 1.0)}

class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CaseMessage(_Model):
    role: Literal["user", "assistant", "system", "tool"]
    content: str


class CaseRun(_Model):
    input: str = ""
    system: str = ""
    context: tuple[CaseMessage, ...] = ()
    output: str = Field(min_length=1)
    #: what the agent did, in the shape ``rescore --include-run`` writes (``{kind, name,
    #: arguments, result, error}``), and the tools it had (names or ``{name, description}``)
    steps: tuple[dict[str, Any], ...] = ()
    tools: tuple[str | dict[str, Any], ...] = ()


class CaseCriterion(_Model):
    description: str = Field(min_length=1)
    required: bool = True
    id: str | None = None


class CaseOptions(_Model):
    criteria: tuple[CaseCriterion, ...] = ()
    evaluation_mode: Literal["user", "system", "both"] | None = None
    context: tuple[str, ...] | None = None


class DimensionBands(_Model):
    intent: Band
    requirements: Band
    completeness: Band
    appropriateness: Band


class CaseExpected(_Model):
    verdicts: tuple[bool, ...] | None = None
    label: Literal["pass", "fail"] | None = None
    score: float | None = Field(default=None, ge=0.0, le=1.0)
    band: Band | None = None
    dimensions: dict[Literal["user", "system"], DimensionBands] | None = None


class LabelledCase(_Model):
    """One labelled case (see the module docstring for the format)."""

    schema_version: Literal[1] = Field(alias="schema")
    id: str = Field(min_length=1, max_length=120)
    domain: str = Field(min_length=1)
    #: a scorer type that judges (a row of :mod:`otel_scorers.registry`)
    scorer: str
    run: CaseRun
    options: CaseOptions = CaseOptions()
    expected: CaseExpected
    rationale: str = Field(min_length=1)
    source: str | None = None

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _scorer_spelling(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("scorer"), str):
            data = {**data, "scorer": registry.canonical(data["scorer"])}
        return data

    @model_validator(mode="after")
    def _shape(self) -> LabelledCase:
        """A case of a type that judges, shaped as its row says (a rubric case has criteria and
        a label, ...)."""
        try:
            row = registry.scorer_type(self.scorer)
        except KeyError as exc:
            raise ValueError(str(exc.args[0])) from None
        if not row.judges:
            raise ValueError(f"{row.name} decides in code: there is no judge to calibrate")
        if row.shape_case is not None:
            row.shape_case(self)
        return self

    @property
    def mode(self) -> str:
        """The alignment mode the scorer will use: ``both`` without a system prompt is user."""
        mode = self.options.evaluation_mode or "both"
        return "user" if mode == "both" and not self.run.system else mode

    def criteria(self) -> tuple[Criterion, ...]:
        return tuple(Criterion(c.description, c.id, c.required) for c in self.options.criteria)

    def criterion_ids(self) -> tuple[str, ...]:
        """The ids of the case's criteria, as the rubric scorer makes them."""
        return criterion_ids(self.criteria())

    def scorer_run(self) -> ScorerRun:
        """The run as the scorers take it (``run_id`` is the case id)."""
        context = tuple(Message(role=m.role, content=m.content) for m in self.run.context)
        asked = (Message(role="user", content=self.run.input),) if self.run.input else ()
        shaped = ScorerRun.coerce({"steps": list(self.run.steps), "tools": list(self.run.tools)})
        return ScorerRun(
            run_id=self.id,
            input_messages=context + asked,
            system_messages=(Message(role="system", content=self.run.system),)
            if self.run.system else (),
            output=(Message(role="assistant", content=self.run.output),),
            steps=shaped.steps, tools=shaped.tools)


def band_problems(expected: CaseExpected) -> list[str]:
    """Where an expected score is not in its expected band (for the score-labelled kinds)."""
    if expected.score is None or band_of(expected.score) == expected.band:
        return []
    return [f"score {expected.score} is in band {band_of(expected.score)!r}, not "
            f"{expected.band!r}"]


def check_case(case: LabelledCase) -> list[str]:
    """Where a case's labels contradict the scorer's own rules (empty: consistent), as its
    type's row says."""
    check = registry.scorer_type(case.scorer).check_case
    return check(case) if check is not None else []


def case_from_record(record: Any, *, where: str) -> LabelledCase:
    """A case from one decoded JSON value; a :class:`ConfigError` naming ``where`` if it is
    not one."""
    try:
        return LabelledCase.model_validate(record)
    except ValidationError as exc:
        raise ConfigError(f"{where}: not a labelled case: {_describe(exc.errors()[0])}") from None


#: The longest line a dataset or a cases file may hold: a record is one run, not a dump.
MAX_LINE_CHARS = 16 * 1024 * 1024


def read_lines(path: str | Path, what: str) -> Iterator[str]:
    """The lines of ``path``, one at a time (the file is never read whole); a line over
    :data:`MAX_LINE_CHARS`, bytes that are not UTF-8 or an unreadable file are a
    :class:`ConfigError` naming the file (and the line)."""
    try:
        with Path(path).open(encoding="utf-8") as stream:
            number = 0
            while line := stream.readline(MAX_LINE_CHARS + 1):
                number += 1
                if len(line) > MAX_LINE_CHARS and not line.endswith("\n"):
                    raise ConfigError(f"{path}, line {number}: longer than "
                                      f"{MAX_LINE_CHARS // (1024 * 1024)} MB")
                yield line
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the {what} {path}: {exc}") from None


def json_lines(lines: Iterable[str], *, origin: str) -> Iterator[tuple[int, Any]]:
    """(line number, value) for each non-blank JSON line; a line that is not JSON is a
    :class:`ConfigError` naming ``origin`` and the line."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise ConfigError(f"{origin}, line {number}: not JSON ({exc})") from None


def parse_cases(lines: Iterable[str], *, origin: str) -> Iterator[LabelledCase]:
    """Cases from JSON lines; a bad line is a :class:`ConfigError` naming ``origin`` and the
    line."""
    for number, record in json_lines(lines, origin=origin):
        yield case_from_record(record, where=f"{origin}, line {number}")


def _describe(detail: Any) -> str:
    if isinstance(detail, dict):
        where = ".".join(str(p) for p in detail.get("loc", ()))
        return f"{where}: {detail.get('msg')}" if where else str(detail.get("msg"))
    return str(detail)


def load_cases(path: str | Path) -> list[LabelledCase]:
    """Every case of a JSON-lines file; duplicate ids are an error."""
    cases = list(parse_cases(read_lines(path, "cases"), origin=str(path)))
    seen: set[str] = set()
    for case in cases:
        if case.id in seen:
            raise ConfigError(f"{path}: case id {case.id!r} appears twice")
        seen.add(case.id)
    return cases
