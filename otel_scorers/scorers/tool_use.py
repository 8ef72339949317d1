"""The tool-use scorer: were the agent's tool calls the right ones, with the right arguments,
and was a needed tool left uncalled? One judge call (seed: Mastra
``createToolCallAccuracyScorerLLM``; docs/mastra.md lists the differences).

The judge sees the user's request, the agent's instructions, the tools it had (from
``gen_ai.tool.definitions`` and the other conventions, else the tools it called), every tool
call with its arguments and result, and the answer; it gives one verdict per call under fixed
keys ``s1..sN`` (appropriate for the request? arguments right?) and names the tools the request
needed that were never called. Score: calls judged right (appropriate and with right
arguments) over calls plus missing tools, times ``scale``; no calls and nothing missing is the
full score (not calling a tool was right). Passes at ``pass_threshold`` (default 1.0).

A run with no steps at all is skipped (``no_steps``); a run that called no tool and whose
telemetry names no tool it could have called is skipped (``no_tools``): there is nothing to
judge, and a score would be made up.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any

from pydantic import Field, StrictBool, create_model

from otel_scorers.errors import ConfigError, ScorerInputError
from otel_scorers.judge.client import JudgeClient, Judgement, JudgeRequest
from otel_scorers.registry import Options, ScorerType, option
from otel_scorers.scorers import prompts
from otel_scorers.scorers.analysis import (
    Calibrated,
    CaseLike,
    CriterionVerdict,
    RubricAnalysis,
)
from otel_scorers.scorers.base import LLMScorer, Question, digest
from otel_scorers.scorers.checks import no_steps_result
from otel_scorers.scorers.result import JudgeModel, ScoreResult, bounded_list, bounded_text
from otel_scorers.scorers.run import ScorerRun
from otel_scorers.scorers.steps import Step

__all__ = ["ToolUseAnalysis", "ToolUseScorer"]

#: Calls judged one by one; past this the rest are summarised in the reason, not judged.
MAX_JUDGED_CALLS = 30

INSTRUCTIONS = """\
You judge how an AI agent used its tools for the USER REQUEST. For every tool call labelled \
s1, s2, ... (none missing or extra), give "reasoning" (one or two sentences), then \
"appropriate" (true only if the request, or the agent instructions, called for this tool at \
this point; a call that is merely helpful, repeated without need, or unrelated is false), then \
"argumentsCorrect" (true only if the arguments match what the request says: the right \
entity, values, units). Then "missingTools": the tools from AVAILABLE TOOLS the request \
clearly needed but the agent never called (empty when none; asking the user a needed \
clarifying question instead of guessing is not a missing tool). End with \
"overallAssessment": one or two sentences on the agent's tool use.\
"""


class _CallVerdict(JudgeModel):
    reasoning: bounded_text(400)  # type: ignore[valid-type]
    appropriate: StrictBool
    arguments_correct: StrictBool


@functools.cache
def answer_model(count: int) -> type[JudgeModel]:
    """The answer schema for ``count`` calls: keys ``s1..sN`` each exactly once."""
    calls: Any = create_model(  # type: ignore[call-overload]
        f"ToolUseVerdicts{count}", __base__=JudgeModel,
        **{f"s{i}": (_CallVerdict, Field(alias=f"s{i}")) for i in range(1, count + 1)})
    model: type[JudgeModel] = create_model(
        "ToolUseJudgement", __base__=JudgeModel, calls=(calls, ...),
        missing_tools=(bounded_list(bounded_text(120), 10), ...),
        overall_assessment=(bounded_text(600), ...))
    return model


class ToolUseAnalysis(RubricAnalysis):
    """``analyzeStepResult``: one criterion per call (id: the tool's name), and one per tool
    the judge found missing (``missing_<name>``)."""

    stable_key = "id"
    calls: int = 0
    missing_tools: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "calls": self.calls, "missingTools": list(self.missing_tools)}

    def calibrated(self, case: CaseLike, result: ScoreResult) -> Calibrated:
        """One verdict per call of the case (right tool, right arguments), and the label."""
        assert case.expected.verdicts is not None
        calls = [s for s in case.scorer_run().steps if s.kind in ("tool", "handoff")]
        verdicts = tuple((f"{case.scorer}:{ident}", expected, verdict.satisfied)
                         for ident, expected, verdict in zip(
                             call_ids(calls), case.expected.verdicts, self.criteria,
                             strict=False))
        return Calibrated(judged_pass=result.label == "pass", verdicts=verdicts)


class ToolUseScorer(LLMScorer):
    """Tool selection and arguments judged in one call (see the module docstring)."""

    uses_steps = True

    def __init__(self, model: str | JudgeClient | None = None, *, scale: float = 1.0,
                 pass_threshold: float = 1.0, name: str = "tool_use",
                 **judge_options: Any) -> None:
        super().__init__(model, name=name, scale=scale, judge_options=judge_options)
        if not 0.0 <= pass_threshold <= 1.0:
            raise ConfigError("pass_threshold is a share of the scale, between 0 and 1")
        self.pass_threshold = pass_threshold

    def cache_key(self, run: ScorerRun) -> str | None:
        return digest("tool_use", self.judge.fingerprint, self.scale, run.system_prompt,
                      run.user_prompt, run.response, run.steps, run.tools)

    def ask(self, run: ScorerRun) -> Question | ScoreResult:
        if not run.steps:
            return no_steps_result(self.name, self.scale, run)
        calls = calls_of(run)
        if not calls and not run.tools:
            return ScoreResult(
                run_id=run.run_id, scorer=self.name, score=self.scale, scale=self.scale,
                label="skipped", passed=True, skipped="no_tools",
                reason="Not judged: the agent called no tool and its telemetry names no tool "
                       "it could have called.")
        if not run.user_prompt:
            raise ScorerInputError("the run has no user request to judge tool use against")
        judged = calls[:MAX_JUDGED_CALLS]
        request = JudgeRequest(instructions=INSTRUCTIONS, fields=fields(run, judged),
                               answer_model=answer_model(len(judged)),
                               task=("Judge s1 to s" + str(len(judged)) if judged else
                                     "No tool was called: judge whether one was needed")
                               + "; answer with the JSON object.")
        return Question(request, lambda judgement: self._result(run, judged, len(calls),
                                                                judgement))

    def _result(self, run: ScorerRun, judged: Sequence[Step], total: int,
                judgement: Judgement[Any]) -> ScoreResult:
        answer: Any = judgement.value
        verdicts: list[CriterionVerdict] = []
        ids = call_ids(judged)
        shown = self.judge.redactor or (lambda text: text)  # what the judge saw, no more
        for index, (step, ident) in enumerate(zip(judged, ids, strict=True), start=1):
            verdict = getattr(answer.calls, f"s{index}")
            notes = [] if verdict.appropriate else ["not appropriate"]
            if not verdict.arguments_correct:
                notes.append("wrong arguments")
            verdicts.append(CriterionVerdict(
                id=ident, description=f"call {index}: {shown(prompts.render_step(step))[:300]}",
                required=True, satisfied=verdict.appropriate and verdict.arguments_correct,
                reasoning=(", ".join(notes) + ": " if notes else "") + verdict.reasoning))
        known = {tool.name for tool in run.tools} | {step.name for step in judged}
        missing = tuple(dict.fromkeys(m.strip() for m in answer.missing_tools if m.strip()))
        for name in missing:
            note = "" if name in known else " (not among the tools the telemetry names)"
            verdicts.append(CriterionVerdict(
                id=f"missing_{_slug(name)}", description=f"calls tool {name}", required=True,
                satisfied=False, reasoning=f"the request needed {name}, never called{note}"))
        good = sum(1 for v in verdicts[:len(judged)] if v.satisfied)
        denominator = len(judged) + len(missing)
        level = round(good / denominator, 2) if denominator else 1.0
        passed = level >= self.pass_threshold
        analysis = ToolUseAnalysis(criteria=tuple(verdicts),
                                   overall_assessment=answer.overall_assessment,
                                   required_unmet=sum(1 for v in verdicts if not v.satisfied),
                                   dynamic=True, calls=total, missing_tools=missing)
        lines = [f"Tool use {level:.2f}: {good} of {len(judged)} call(s) right"
                 + (f", {len(missing)} needed tool(s) never called" if missing else "") + "."]
        # the reason names each call by its tool (its arguments and result are the run's
        # content: in the criteria, under the content policy, never in the reason)
        names = [f"call {i}: tool {step.name}" for i, step in enumerate(judged, start=1)]
        names += [v.description for v in verdicts[len(judged):]]
        lines += [f"- [{'PASS' if v.satisfied else 'FAIL'}] {name} — {v.reasoning}"
                  for name, v in zip(names, verdicts, strict=True)]
        if total > len(judged):
            lines.append(f"{total - len(judged)} later call(s) were not judged "
                         f"(at most {MAX_JUDGED_CALLS} per run).")
        if answer.overall_assessment:
            lines.append(f"Overall: {answer.overall_assessment}")
        return ScoreResult(run_id=run.run_id, scorer=self.name, score=level * self.scale,
                           scale=self.scale, label="pass" if passed else "fail", passed=passed,
                           reason="\n".join(lines), analysis=analysis, judge=judgement.usage)


def calls_of(run: ScorerRun) -> list[Step]:
    """The calls judged: tool executions and handoffs (a handoff is a tool the model chose)."""
    return [step for step in run.steps if step.kind in ("tool", "handoff")]


def fields(run: ScorerRun, calls: Sequence[Step]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    if run.system_prompt:
        out.append(("agent instructions", run.system_prompt))
    out.append(("user request", run.user_prompt or ""))
    if run.tools:
        out.append(("available tools", "\n".join(
            f"{tool.name}: {tool.description}".rstrip(": ") for tool in run.tools)))
    else:
        out.append(("available tools", "(not recorded; the tools called: "
                    + (", ".join(dict.fromkeys(s.name for s in calls)) or "none") + ")"))
    out.append(("tool calls", "\n".join(f"s{i}: {prompts.render_step(step)}"
                                        for i, step in enumerate(calls, start=1)) or "(none)"))
    out.append(("agent response", run.response or "(no text answer)"))
    return out


def _slug(text: str) -> str:
    return re.sub(r"[^\w]+", "_", text.lower()).strip("_")[:40] or "tool"


def call_ids(calls: Sequence[Step]) -> list[str]:
    """One id per call: the tool's name, ``_2``, ``_3`` ... for its later calls."""
    seen: dict[str, int] = {}
    ids = []
    for step in calls:
        base = _slug(step.name)
        seen[base] = seen.get(base, 0) + 1
        ids.append(base if seen[base] == 1 else f"{base}_{seen[base]}")
    return ids


# -- the row -------------------------------------------------------------------------------------
class ToolUseOptions(Options):
    """The tool-use scorer's options (``type: tool_use``)."""

    pass_threshold: float | None = option(None, "the share of the scale that passes", ge=0,
                                          le=1)


def _shape(case: Any) -> None:
    calls = [s for s in case.run.steps if s.get("kind") in ("tool", "handoff")]
    expected = case.expected
    if expected.verdicts is None or expected.label is None:
        raise ValueError("a tool_use case expects 'verdicts' (one per call) and 'label'")
    if len(expected.verdicts) != len(calls):
        raise ValueError(f"{len(expected.verdicts)} verdicts for {len(calls)} calls")


def _check(case: Any) -> list[str]:
    expected = case.expected
    if not all(expected.verdicts or ()) and expected.label == "pass":
        return ["label 'pass' but a call is labelled wrong"]
    return []


TOOL_USE = ScorerType(
    name="tool_use", options=ToolUseOptions,
    summary="each tool call judged (the right tool, the right arguments) and the tools "
            "missing, in one judge call",
    build=lambda name, scale, o, judge: ToolUseScorer(
        judge, scale=scale, name=name,
        **({} if o.pass_threshold is None else {"pass_threshold": o.pass_threshold})),
    shape_case=_shape, check_case=_check)
