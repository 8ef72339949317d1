"""What a trajectory is held to, and how the agent's steps compare with the expected ones.

An :class:`Expectation` is everything a trajectory scorer checks (the expected steps, their
ordering, the budgets, the blacklist); :func:`expectation` reads one from options (snake_case or
Mastra's camelCase), and :func:`accuracy` compares the steps taken with the expected ones
(``relaxed``, ``strict``, ``unordered``; see :mod:`otel_scorers.scorers.trajectory`).
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, ValidationError

from otel_scorers import safe_json
from otel_scorers.errors import ConfigError
from otel_scorers.scorers.analysis import CriterionVerdict
from otel_scorers.scorers.steps import Step, StepKind

__all__ = ["MAX_EXPECTED_STEPS", "Expectation", "ExpectedStep", "Ordering", "accuracy",
           "expectation", "part"]

Ordering = Literal["strict", "relaxed", "unordered"]
MAX_EXPECTED_STEPS = 100


class ExpectedStep(BaseModel):
    """A step the agent should take: a tool (or retrieval, handoff) ``name``, optionally its
    ``kind`` and the ``arguments`` it must be called with (a subset: keys not given may be
    anything)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    kind: StepKind | None = None
    arguments: dict[str, Any] | None = None

    @classmethod
    def of(cls, value: str | Mapping[str, Any] | ExpectedStep) -> ExpectedStep:
        if isinstance(value, ExpectedStep):
            return value
        if isinstance(value, str):
            return cls(name=value)
        data = dict(value)
        if "toolArgs" in data:  # Mastra's spelling
            data["arguments"] = data.pop("toolArgs")
        if "stepType" in data:
            data.pop("stepType")
        return cls.model_validate(data)

    def matches(self, step: Step) -> bool:
        if step.name != self.name or (self.kind is not None and step.kind != self.kind):
            return False
        if not self.arguments:
            return True
        try:
            actual = safe_json.loads(step.arguments or "{}")
        except ValueError:
            return False
        return isinstance(actual, dict) and all(
            key in actual and _same(actual[key], value) for key, value in self.arguments.items())


def _same(left: Any, right: Any) -> bool:
    return json.dumps(left, sort_keys=True) == json.dumps(right, sort_keys=True)


class Expectation(BaseModel):
    """Everything a trajectory is held to (the scorer's options; a run may override any)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    steps: tuple[ExpectedStep, ...] = ()
    ordering: Ordering = "relaxed"
    allow_repeated_steps: bool = True
    max_steps: int | None = None
    max_total_tokens: int | None = None
    max_duration_s: float | None = None
    no_redundant_calls: bool = True
    max_retries_per_tool: int = 2
    blacklist: tuple[str, ...] = ()
    blacklisted_sequences: tuple[tuple[str, ...], ...] = ()


_CAMEL = {"allowRepeatedSteps": "allow_repeated_steps", "maxSteps": "max_steps",
          "maxTotalTokens": "max_total_tokens", "noRedundantCalls": "no_redundant_calls",
          "maxRetriesPerTool": "max_retries_per_tool", "blacklistedTools": "blacklist",
          "blacklistedSequences": "blacklisted_sequences", "expected": "steps"}


def expectation(values: Mapping[str, Any], base: Expectation | None = None) -> Expectation:
    """Options (snake_case or Mastra's camelCase) over ``base``; ``maxTotalDurationMs`` is
    read in milliseconds. A bad value is a :class:`ConfigError`."""
    data: dict[str, Any] = {}
    for key, value in values.items():
        if key == "maxTotalDurationMs" and value is not None:
            data["max_duration_s"] = float(value) / 1000
            continue
        data[_CAMEL.get(key, key)] = value
    if "steps" in data and data["steps"] is not None:
        if isinstance(data["steps"], str) or not isinstance(data["steps"], Sequence):
            raise ConfigError("expected steps are a list of tool names or {name, arguments}")
        if len(data["steps"]) > MAX_EXPECTED_STEPS:
            raise ConfigError(f"at most {MAX_EXPECTED_STEPS} expected steps")
        try:
            data["steps"] = tuple(ExpectedStep.of(step) for step in data["steps"])
        except (ValidationError, TypeError, ValueError) as exc:
            raise ConfigError(f"invalid expected step: {exc}") from None
    merged = {**(base.model_dump() if base else {}),
              **{k: v for k, v in data.items() if v is not None}}
    if merged.get("ordering") not in get_args(Ordering):
        raise ConfigError(f"ordering must be one of {get_args(Ordering)}, "
                          f"got {merged.get('ordering')!r}")
    try:
        made = Expectation.model_validate(merged)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ConfigError(f"trajectory option {'.'.join(map(str, first['loc']))}: "
                          f"{first['msg']}") from None
    for name, limit in (("max_steps", made.max_steps), ("max_total_tokens", made.max_total_tokens),
                        ("max_duration_s", made.max_duration_s)):
        if limit is not None and limit <= 0:
            raise ConfigError(f"{name} must be > 0, got {limit!r}")
    if made.max_retries_per_tool < 0:
        raise ConfigError("max_retries_per_tool must be >= 0")
    return made


def part(ident: str, score: float, description: str, reasoning: str) -> CriterionVerdict:
    score = round(min(1.0, max(0.0, score)), 2)
    return CriterionVerdict(id=ident, description=description, required=True,
                            satisfied=score >= 1.0, reasoning=reasoning, score=score)


def _first_match(step: ExpectedStep, acts: Sequence[Step], names: Sequence[str], start: int,
                 used: list[bool] | None = None) -> int:
    """The index of the first act from ``start`` that ``step`` matches (and, with ``used``,
    that no other expected step took), or -1."""
    name = step.name
    for j in range(start, len(acts)):
        if names[j] == name and (used is None or not used[j]) and step.matches(acts[j]):
            return j
    return -1


def accuracy(acts: Sequence[Step], names: Sequence[str], want: Expectation,
              counted: dict[str, Any]) -> CriterionVerdict:
    expected = want.steps
    matched = 0
    out_of_order: list[str] = []
    expected_names = {step.name for step in expected}
    if want.ordering == "strict":
        for i in range(min(len(acts), len(expected))):
            if expected[i].matches(acts[i]):
                matched += 1
            elif names[i] in expected_names:
                out_of_order.append(names[i])
    elif want.ordering == "relaxed":
        last = -1
        for step in expected:
            hit = _first_match(step, acts, names, last + 1)
            if hit < 0:
                if step.name in names:
                    out_of_order.append(step.name)
            else:
                matched, last = matched + 1, hit
    else:
        used = [False] * len(acts)
        for step in expected:
            hit = _first_match(step, acts, names, 0, used)
            if hit >= 0:
                matched, used[hit] = matched + 1, True
    score = matched / len(expected)
    extra = max(0, len(acts) - len(expected))
    if want.ordering == "strict" and extra:
        score -= 0.5 * extra / len(expected)
    repeated: list[str] = []
    if not want.allow_repeated_steps:
        repeated = sorted(name for name, count in Counter(names).items() if count > 1)
        score -= 0.1 * len(repeated)
    missing = _missing(expected, acts, names) if matched < len(expected) else []
    counted.update(missing_steps=tuple(missing),
                   extra_steps=tuple(n for n in names if n not in expected_names),
                   out_of_order_steps=tuple(out_of_order))
    reasoning = f"matched {matched} of {len(expected)} expected step(s)"
    if missing:
        reasoning += "; missing: " + ", ".join(missing[:8])
    if out_of_order:
        reasoning += "; out of order: " + ", ".join(out_of_order[:8])
    if want.ordering == "strict" and extra:
        reasoning += f"; {extra} extra step(s)"
    if repeated:
        reasoning += "; repeated: " + ", ".join(repeated[:8])
    return part("accuracy", score, _described(tuple(s.name for s in expected), want.ordering),
                 reasoning)


@functools.lru_cache(maxsize=256)
def _described(names: tuple[str, ...], ordering: str) -> str:
    arrow = " → " if ordering != "unordered" else ", "
    return f"expected steps {arrow.join(names)} ({ordering} order)"


def _missing(expected: Sequence[ExpectedStep], acts: Sequence[Step], names: Sequence[str]
             ) -> list[str]:
    """Expected steps with no match anywhere in the trajectory (for the reason)."""
    used = [False] * len(acts)
    missing = []
    for step in expected:
        hit = _first_match(step, acts, names, 0, used)
        if hit < 0:
            missing.append(step.name)
        else:
            used[hit] = True
    return missing
