"""Quick checks as a scorer of their own (config ``type: checks``): no judge, a pure function
of the captured run (:mod:`otel_scorers.scorers.checks` holds the checks)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import Field, model_validator

from otel_scorers.errors import ConfigError
from otel_scorers.registry import Flag, Options, ScorerType
from otel_scorers.scorers import check_rows
from otel_scorers.scorers.analysis import RubricAnalysis
from otel_scorers.scorers.base import BaseScorer, validate_scale
from otel_scorers.scorers.checks import (
    Check,
    no_steps_result,
    parse_check,
    steps_truncated_result,
    verdicts,
)
from otel_scorers.scorers.result import ScoreResult
from otel_scorers.scorers.run import ScorerRun

__all__ = ["ChecksScorer"]


class ChecksScorer(BaseScorer):
    """Quick checks as a scorer of their own: ``scale`` when every check holds, else 0;
    each check reported like a rubric criterion. No judge call. A run with no record of
    what the agent did, checked for its tools, is skipped (``no_steps``), never passed."""

    kind = "code"

    def __init__(self, checks: Sequence[str | Check], *, name: str = "checks",
                 scale: float = 1.0) -> None:
        self.name = name
        self.scale = validate_scale(scale)
        self.checks = tuple(parse_check(check) for check in checks)
        if not self.checks:
            raise ConfigError("a checks scorer needs at least one check")
        ids = [check.id for check in self.checks]
        if len(ids) != len(set(ids)):
            raise ConfigError(f"two checks have the same id: {ids}")
        self.uses_steps = any(check.uses_steps for check in self.checks)

    async def score(self, run: ScorerRun) -> ScoreResult:
        return self.decide(run)

    def decide(self, run: ScorerRun) -> ScoreResult:
        """The result, synchronously (no judge: a pure function of the run)."""
        if self.uses_steps and not run.steps:
            return no_steps_result(self.name, self.scale, run)
        token = check_rows.sharing(run)
        try:
            found, undecided = verdicts(self.checks, run)
        finally:
            check_rows.done_sharing(token)
        unmet = [v for v in found if not v.satisfied]
        analysis = RubricAnalysis(criteria=found, required_unmet=len(unmet))
        if undecided and len(unmet) == undecided:  # nothing kept fails: never a pass
            return steps_truncated_result(self.name, self.scale, run, analysis=analysis)
        passed = not unmet
        head = (f"All {len(found)} checks hold." if passed
                else f"{len(unmet)} of {len(found)} checks fail.")
        lines = [head, *(f"- [{'PASS' if v.satisfied else 'FAIL'}] {v.description} — "
                         f"{v.reasoning}" for v in found)]
        return ScoreResult(run_id=run.run_id, scorer=self.name,
                           score=self.scale if passed else 0.0, scale=self.scale,
                           label="pass" if passed else "fail", passed=passed,
                           reason="\n".join(lines), analysis=analysis)

    def cache_key(self, run: ScorerRun) -> str | None:
        return None  # deciding is cheaper than hashing

    def __repr__(self) -> str:
        return f"ChecksScorer(name={self.name!r}, checks={[c.id for c in self.checks]})"


# -- the row -------------------------------------------------------------------------------------
class ChecksOptions(Options):
    """The checks scorer's options (``type: checks``)."""

    checks: list[str] = Field(
        default_factory=list,
        description="the quick checks (`called_tool get_weather`, `no_tool_errors`, "
                    "`json_schema declared`, `no_pii`, ...; see docs/agent-scorers.md); the "
                    "variable: a `;` list (a check may hold commas)",
        json_schema_extra={"env": "OTEL_SCORERS_CHECKS", "separator": ";"})

    @model_validator(mode="after")
    def _some(self) -> ChecksOptions:
        if not self.checks:
            raise ValueError("a checks scorer needs checks (e.g. ['called_tool get_weather'])")
        return self


def _from_flags(values: Mapping[str, Any]) -> dict[str, Any]:
    if not values.get("check"):
        raise ConfigError("the checks scorer needs --check (e.g. --check 'no_tool_errors')")
    return {"checks": list(values["check"])}


CHECKS = ScorerType(
    name="checks", options=ChecksOptions, judges=False,
    summary="quick checks decided in code (tools called or not, their order, errors, loops, "
            "what the answer says); passes when every check holds",
    build=lambda name, scale, o, _judge: ChecksScorer(o.checks, name=name, scale=scale),
    flags=(Flag("check", "A quick check (`called_tool get_weather`, repeatable).",
                multiple=True, metavar="CHECK"),),
    from_flags=_from_flags)
