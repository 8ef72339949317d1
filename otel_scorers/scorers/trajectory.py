"""The trajectory scorer: what the agent did, judged in code (seed: Mastra
``createTrajectoryScorerCode``; docs/mastra.md lists every difference).

The trajectory is the run's tool calls, retrievals and handoffs in time order (its LLM calls
count in the token budget, not as steps). Four parts, each reported like a rubric criterion
with a score between 0 and 1:

- **accuracy** (weight 0.4, when expected steps are given): the expected steps compared
  ``relaxed`` (in order, other steps allowed between: greedy, matched / expected), ``strict``
  (position by position: matched / expected, minus 0.5 x extra steps / expected) or
  ``unordered`` (each expected step matched once anywhere); with ``allow_repeated_steps=False``
  each distinct repeated step name costs 0.1. An expected step may give ``arguments``: each
  given key must equal the call's (JSON values, key order ignored), others may differ.
- **efficiency** (0.3, when a budget or ``no_redundant_calls`` is set: the redundancy check is
  on by default): the mean of each set check; a budget (``max_steps``, ``max_total_tokens``,
  ``max_duration_s``) scores ``max(0, 1 - over / budget)``, redundant calls (the same tool with
  the same arguments twice in a row) ``max(0, 1 - 0.2 x count)``.
- **tool failures** (0.2, when a failed call was retried): runs of consecutive calls of one
  tool, a failed call followed by another call of it is a retry; retries past
  ``max_retries_per_tool`` (2) cost 0.2 each.
- **blacklist** (0.1, when tools or sequences are blacklisted): any use of a blacklisted tool,
  or a blacklisted sequence as consecutive steps, makes the whole score 0.

The score is the weighted mean of the active parts (weights renormalised over them), rounded
to two decimals, times ``scale``; nothing active is 1. It passes at ``pass_threshold`` (a share
of the scale, default 1.0: every active part perfect). The expected steps come from the scorer,
or per run from ``expected_trajectory`` in the request context, additional context or input (a
list of steps, or a mapping of these options). A run with no steps at all (its telemetry
recorded no tool, retrieval or LLM call) is skipped with ``no_steps``, never scored.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from otel_scorers.errors import ConfigError, ScorerInputError
from otel_scorers.registry import Flag, Options, ScorerType, option
from otel_scorers.scorers.analysis import CriterionVerdict, RubricAnalysis
from otel_scorers.scorers.base import BaseScorer, validate_scale
from otel_scorers.scorers.checks import no_steps_result, same_call, steps_truncated_result
from otel_scorers.scorers.expectation import (
    Expectation,
    ExpectedStep,
    Ordering,
    accuracy,
    expectation,
    part,
)
from otel_scorers.scorers.result import ScoreResult
from otel_scorers.scorers.run import ScorerRun
from otel_scorers.scorers.steps import Step

__all__ = ["Expectation", "ExpectedStep", "Ordering", "TrajectoryAnalysis", "TrajectoryScorer",
           "expectation"]

WEIGHTS = {"accuracy": 0.4, "efficiency": 0.3, "tool_failures": 0.2, "blacklist": 0.1}


class TrajectoryAnalysis(RubricAnalysis):
    """The trajectory's ``analyzeStepResult``: its parts as criteria, and what was counted."""

    steps: tuple[str, ...] = ()
    missing_steps: tuple[str, ...] = ()
    extra_steps: tuple[str, ...] = ()
    out_of_order_steps: tuple[str, ...] = ()
    redundant_calls: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    total_tokens: int = 0
    duration_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out.update(steps=list(self.steps), missingSteps=list(self.missing_steps),
                   extraSteps=list(self.extra_steps),
                   outOfOrderSteps=list(self.out_of_order_steps),
                   redundantCalls=self.redundant_calls, toolCalls=self.tool_calls,
                   toolErrors=self.tool_errors, totalTokens=self.total_tokens,
                   durationS=self.duration_s)
        return out


class TrajectoryScorer(BaseScorer):
    """Mastra's code trajectory scorer over the captured run: accuracy, efficiency, tool
    failures and blacklist, no judge call (see the module docstring)."""

    uses_steps = True
    kind = "code"

    def __init__(self, expected: Sequence[str | Mapping[str, Any] | ExpectedStep] | None = None,
                 *, ordering: Ordering = "relaxed", allow_repeated_steps: bool = True,
                 max_steps: int | None = None, max_total_tokens: int | None = None,
                 max_duration_s: float | None = None, no_redundant_calls: bool = True,
                 max_retries_per_tool: int = 2, blacklist: Sequence[str] = (),
                 blacklisted_sequences: Sequence[Sequence[str]] = (),
                 pass_threshold: float = 1.0, scale: float = 1.0,
                 name: str = "trajectory") -> None:
        self.name = name
        self.scale = validate_scale(scale)
        if not 0.0 <= pass_threshold <= 1.0:
            raise ConfigError("pass_threshold is a share of the scale, between 0 and 1")
        self.pass_threshold = pass_threshold
        if isinstance(expected, str):
            raise ConfigError("expected is a list of steps (tool names), not one string")
        self.expectation = expectation({
            "steps": list(expected or ()), "ordering": ordering,
            "allow_repeated_steps": allow_repeated_steps, "max_steps": max_steps,
            "max_total_tokens": max_total_tokens, "max_duration_s": max_duration_s,
            "no_redundant_calls": no_redundant_calls,
            "max_retries_per_tool": max_retries_per_tool, "blacklist": tuple(blacklist),
            "blacklisted_sequences": tuple(tuple(s) for s in blacklisted_sequences)})

    def resolve(self, run: ScorerRun) -> Expectation:
        """The scorer's expectation, with a run's own ``expected_trajectory`` over it."""
        if not (run.request_context or run.additional_context or run.input_data):
            return self.expectation
        for source, values in (("request_context", run.request_context),
                               ("additional_context", run.additional_context),
                               ("input", run.input_data)):
            value = values.get("expected_trajectory", values.get("expectedTrajectory"))
            if value is None:
                continue
            try:
                if isinstance(value, Mapping):
                    return expectation(value, self.expectation)
                return expectation({"steps": value}, self.expectation)
            except ConfigError as exc:
                raise ScorerInputError(f"invalid expected_trajectory in {source}: {exc}") \
                    from exc
        return self.expectation

    async def score(self, run: ScorerRun) -> ScoreResult:
        return self.decide(run)

    def decide(self, run: ScorerRun) -> ScoreResult:
        """The result, synchronously (no judge: a pure function of the run)."""
        if not run.steps:
            return no_steps_result(self.name, self.scale, run)
        want = self.resolve(run)
        acts = run.acts
        names = [step.name for step in acts]
        parts: list[CriterionVerdict] = []
        counted: dict[str, Any] = {}
        if want.steps:
            parts.append(accuracy(acts, names, want, counted))
        if (want.max_steps is not None or want.max_total_tokens is not None
                or want.max_duration_s is not None or want.no_redundant_calls):
            parts.append(_efficiency(run.steps, acts, want, counted))
        failures = _tool_failures(run.tool_steps, want.max_retries_per_tool)
        if failures is not None:
            parts.append(failures)
        if want.blacklist or want.blacklisted_sequences:
            parts.append(_blacklist(names, want, run))
        if run.steps_dropped and not any(p.id == "blacklist" and not p.satisfied
                                         for p in parts):
            # the parts read the sequence of steps, and some were left out: only a
            # blacklisted tool (counted over every step) decides a run that long
            return steps_truncated_result(self.name, self.scale, run)
        return self._result(run, names, parts, counted)

    def _result(self, run: ScorerRun, names: Sequence[str], parts: list[CriterionVerdict],
                counted: dict[str, Any]) -> ScoreResult:
        blacklisted = False
        total = weighted = 0.0
        unmet = 0
        for verdict in parts:
            weight = WEIGHTS[verdict.id]
            total += weight
            weighted += weight * (verdict.score or 0.0)
            if not verdict.satisfied:
                unmet += 1
                blacklisted = blacklisted or verdict.id == "blacklist"
        level = 0.0 if blacklisted else round(weighted / total if total else 1.0, 2)
        passed = level >= self.pass_threshold
        tools = run.tool_steps
        analysis = TrajectoryAnalysis(
            criteria=tuple(parts), required_unmet=unmet, steps=tuple(names),
            tool_calls=len(tools), tool_errors=sum(1 for step in tools if step.error is not None),
            **counted)
        lines = [f"Trajectory score {level:.2f}"
                 + (" (a blacklisted tool was used: 0)" if blacklisted else "")
                 + f" over {len(names)} step(s): {_names(names)}."]
        for p in parts:
            lines.append(f"- [{'PASS' if p.satisfied else 'FAIL'}] {p.id} {p.score:.2f} "
                         f"(weight {WEIGHTS[p.id]:g}): {p.reasoning}")
        if not parts:
            lines.append("Nothing to check: no expected steps, budgets or blacklist set.")
        return ScoreResult(
            run_id=run.run_id, scorer=self.name, score=level * self.scale, scale=self.scale,
            label="pass" if passed else "fail", passed=passed, reason="\n".join(lines),
            analysis=analysis)

    def __repr__(self) -> str:
        return f"TrajectoryScorer(name={self.name!r}, expected={len(self.expectation.steps)})"


def _names(names: Sequence[str], limit: int = 12) -> str:
    more = f" ... ({len(names)} in all)" if len(names) > limit else ""
    return (" → ".join(names[:limit]) or "none") + more


def _efficiency(steps: Sequence[Step], acts: Sequence[Step], want: Expectation,
                counted: dict[str, Any]) -> CriterionVerdict:
    tokens = first = last = 0
    for step in steps:
        if step.kind == "llm":
            tokens += (step.input_tokens or 0) + (step.output_tokens or 0)
        start, end = step.start_ns, step.end_ns
        if start and (not first or start < first):
            first = start
        last = max(last, end)
    duration = (last - first) / 1e9 if first and last else 0.0
    redundant = 0
    before = None
    for after in acts:
        if (before is not None and after.kind == "tool" and before.kind == "tool"
                and same_call(before, after)):
            redundant += 1
        before = after
    counted.update(redundant_calls=redundant, total_tokens=tokens,
                   duration_s=round(duration, 3))
    scores: list[float] = []
    notes: list[str] = []
    for label, value, limit in (("steps", len(acts), want.max_steps),
                                ("tokens", tokens, want.max_total_tokens),
                                ("seconds", duration, want.max_duration_s)):
        if limit is not None:
            scores.append(1.0 if value <= limit else max(0.0, 1 - (value - limit) / limit))
            notes.append(f"{value:.1f} seconds (budget {limit:g})" if label == "seconds"
                         else f"{value} {label} (budget {limit:g})")
    if want.no_redundant_calls:
        scores.append(max(0.0, 1 - 0.2 * redundant))
        notes.append(f"{redundant} redundant call(s)")
    return part("efficiency", sum(scores) / len(scores), _budgets(
        want.max_steps, want.max_total_tokens, want.max_duration_s, want.no_redundant_calls),
        "; ".join(notes))


@functools.lru_cache(maxsize=256)
def _budgets(steps: int | None, tokens: int | None, seconds: float | None,
             no_redundant: bool) -> str:
    """What the efficiency part checks, in words (the same for every run of a scorer)."""
    wanted = [f"at most {limit:g} {label}" for label, limit in
              (("steps", steps), ("tokens", tokens), ("seconds", seconds)) if limit is not None]
    if no_redundant:
        wanted.append("no identical call twice in a row")
    return ", ".join(wanted)


def _tool_failures(tools: Sequence[Step], max_retries: int) -> CriterionVerdict | None:
    """Retry patterns (a failed call followed by another call of the same tool), scored only
    when there is one (Mastra); ``None`` when the run has none."""
    if not any(step.error is not None for step in tools):
        return None  # no failure, so no retry pattern
    patterns: list[tuple[str, int, bool]] = []
    start = 0
    while start < len(tools):
        end = start
        while end + 1 < len(tools) and tools[end + 1].name == tools[start].name:
            end += 1
        group = tools[start:end + 1]
        retries = sum(1 for step in group[:-1] if step.failed)
        if retries:
            patterns.append((group[0].name, retries, not group[-1].failed))
        start = end + 1
    if not patterns:
        return None
    excess = sum(max(0, retries - max_retries) for _, retries, _ in patterns)
    failed = sum(1 for step in tools if step.failed)
    detail = "; ".join(f"{name} retried {retries} time(s), "
                       f"{'then succeeded' if ok else 'never succeeded'}"
                       for name, retries, ok in patterns[:6])
    return part("tool_failures", 1 - 0.2 * excess,
                 f"at most {max_retries} retries per tool",
                 f"{failed} failed call(s): {detail}")


def _blacklist(names: Sequence[str], want: Expectation, run: ScorerRun) -> CriterionVerdict:
    # every tool called counts, the steps left out past the bound included (run.tool_count)
    tools = sorted(name for name in set(want.blacklist)
                   if name in names or run.tool_count(name))
    sequences = [seq for seq in want.blacklisted_sequences if seq and any(
        tuple(names[i:i + len(seq)]) == tuple(seq) for i in range(len(names) - len(seq) + 1))]
    violated = bool(tools or sequences)
    reasoning = ("used: " + ", ".join([*tools, *(" → ".join(s) for s in sequences)])
                 if violated else "no blacklisted tool or sequence used")
    return part("blacklist", 0.0 if violated else 1.0, "uses no blacklisted tool", reasoning)


# -- the row -------------------------------------------------------------------------------------
class ExpectedStepOption(Options):
    """An expected step as configured: a tool (or retrieval, handoff) name, its kind, the
    arguments it must be called with."""

    name: str
    kind: Literal["tool", "retrieval", "handoff"] | None = None
    arguments: dict[str, Any] | None = None


class TrajectoryOptions(Options):
    """The trajectory scorer's options (``type: trajectory``)."""

    expected: list[str | ExpectedStepOption] | None = option(
        None, "the expected steps (tool names, or `{name, kind, arguments}`; the "
        "variable: a comma list of names)", env="OTEL_SCORERS_TRAJECTORY_EXPECTED")
    ordering: Ordering = option("relaxed", "`relaxed` (in order, extras allowed), "
                                "`strict`, `unordered`")
    allow_repeated_steps: bool = option(True, "false costs 0.1 of accuracy per "
                                        "repeated step name")
    max_steps: int | None = option(None, "step budget (tool calls, retrievals, "
                                   "handoffs)", gt=0)
    max_total_tokens: int | None = option(None, "token budget of the run's LLM "
                                          "calls", gt=0)
    max_duration_s: float | None = option(None, "duration budget, seconds", gt=0)
    no_redundant_calls: bool = option(True, "the same call twice in a row costs "
                                      "0.2 of efficiency")
    max_retries_per_tool: int = option(2, "retries of a failed call allowed "
                                       "before each costs 0.2", ge=0)
    blacklist: list[str] = option(None, "tools whose use scores the run 0 (comma "
                                  "list)", env="OTEL_SCORERS_TOOL_BLACKLIST",
                                  default_factory=list)
    blacklisted_sequences: list[list[str]] = option(
        None, "tool sequences (consecutive) whose use scores the run 0",
        default_factory=list)
    pass_threshold: float | None = option(None, "the share of the scale that passes", ge=0,
                                          le=1)


TRAJECTORY = ScorerType(
    name="trajectory", options=TrajectoryOptions, judges=False,
    summary="what the agent did, in code: expected steps (accuracy), budgets and redundant "
            "calls (efficiency), retried failures, blacklisted tools",
    build=lambda name, scale, o, _judge: TrajectoryScorer(
        [e if isinstance(e, str) else e.model_dump(exclude_none=True) for e in o.expected or ()],
        ordering=o.ordering, allow_repeated_steps=o.allow_repeated_steps,
        max_steps=o.max_steps, max_total_tokens=o.max_total_tokens,
        max_duration_s=o.max_duration_s, no_redundant_calls=o.no_redundant_calls,
        max_retries_per_tool=o.max_retries_per_tool, blacklist=o.blacklist,
        blacklisted_sequences=o.blacklisted_sequences, scale=scale, name=name,
        **({} if o.pass_threshold is None else {"pass_threshold": o.pass_threshold})),
    flags=(Flag("expected", "Trajectory: an expected step (tool name, repeatable, in order).",
                multiple=True, metavar="TOOL"),
           Flag("ordering", "Trajectory: how steps compare.",
                choices=("relaxed", "strict", "unordered"), default="relaxed")))
