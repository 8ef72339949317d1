"""Rubric criteria: what must hold of a run, written as a checklist or a list, parsed once.

A string rubric is one required criterion per non-blank line, with one leading list marker
removed; a mapping gives ``description``, ``id``, ``required`` and ``check`` (a quick check,
:mod:`otel_scorers.scorers.checks`, decided in code instead of by the judge). Criterion ids are
stable: the given id, else a slug of the description.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from otel_scorers.errors import ConfigError
from otel_scorers.scorers.checks import Check, parse_check

__all__ = ["MAX_CRITERIA", "MAX_CRITERION_CHARS", "Criterion", "RubricLike", "criterion_ids",
           "needs_steps", "parse_rubric", "plain_criteria"]

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


def plain_criteria(value: Any) -> Any:
    """Configured criteria (text, mappings, settings models) as :func:`parse_rubric` reads
    them."""
    if isinstance(value, list):
        return [item.model_dump() if hasattr(item, "model_dump") else item for item in value]
    return value
