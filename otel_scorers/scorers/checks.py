"""Quick checks: assertions about a run decided in code, without a judge (seed: Mastra's
``checks`` namespace, ``packages/evals/src/scorers/code/checks``).

A check is a pure function of the captured run: what tools it called, in what order, whether
they failed, whether it looped, what its answer says. Use them alone (``ChecksScorer``,
config ``type: checks``) or as rubric criteria (``check: called_tool get_weather`` as a
checklist line, or ``Criterion(check=...)``): the rubric judges its other criteria in its one
judge call and decides the checks itself.

A check is written in code (``called_tool("get_weather")``) or as text, its name then its
argument: ``called_tool get_weather``, ``did_not_call delete_account``, ``tool_order search,
summarize``, ``max_tool_calls 5``, ``no_tool_errors``, ``used_no_tools``, ``includes sunny``,
``excludes sorry``, ``equals 42``, ``matches ^\\d+ C$``, ``no_loops 3`` (more checks, by family,
are rows of :mod:`~otel_scorers.scorers.check_rows`). Mastra's camelCase names
(``calledTool``, ``didNotCall``, ``toolOrder``, ``maxToolCalls``, ``noToolErrors``,
``usedNoTools``) are accepted too. Text checks come from configuration only: a rubric read from a
span never holds one (a regular expression from application data would be an attack surface).
"""

from __future__ import annotations

import functools
import json
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import regex

from otel_scorers import safe_json
from otel_scorers.errors import ConfigError, ScorerInputError
from otel_scorers.scorers import check_rows
from otel_scorers.scorers.analysis import CriterionVerdict
from otel_scorers.scorers.result import ScoreResult
from otel_scorers.scorers.run import ScorerRun
from otel_scorers.scorers.steps import Step

__all__ = [
    "Check",
    "called_tool", "did_not_call",
    "equals", "excludes",
    "includes", "matches",
    "max_tool_calls",
    "no_loops",
    "no_tool_errors",
    "parse_check",
    "steps_truncated_result",
    "tool_order",
    "used_no_tools",
]

#: A check's verdict on a run: held or not, with why; ``None``: not decided, because it needs
#: steps the run left out past its bound (``steps_truncated``: never a pass)
Verdict = tuple[bool | None, str]


def _left_out(run: ScorerRun) -> str:
    return (f"not decided: {run.steps_dropped} of the run's steps were left out past the "
            "bound, and this check needs them")


@dataclass(frozen=True)
class Check:
    """One quick check: a stable ``id``, a ``description``, and what it tests (``kind`` and its
    arguments, decided by :data:`TESTS`; plain values, so a check pickles and compares).
    ``uses_steps`` says whether it reads what the agent did (else only the answer)."""

    id: str
    description: str
    kind: str
    args: tuple[Any, ...] = ()
    uses_steps: bool = True

    def __call__(self, run: ScorerRun) -> Verdict:
        return (TESTS.get(self.kind) or check_rows.test(self.kind))(run, *self.args)


def _tools(run: ScorerRun) -> tuple[str, ...]:
    return run.tool_names


def _slug(text: str) -> str:
    return re.sub(r"[^\w]+", "_", text.lower()).strip("_")[:40] or "x"


def _listed(names: Sequence[str], limit: int = 8) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f", ... ({len(names)} in all)" if len(names) > limit else "") or "none"


def called_tool(name: str, *, times: int = 1) -> Check:
    """The agent called tool ``name`` at least ``times`` times."""
    suffix = f" at least {times} times" if times > 1 else ""
    return Check(f"called_{_slug(name)}", f"calls tool {name}{suffix}", "called_tool",
                 (name, times))


def _called(run: ScorerRun, name: str, times: int) -> Verdict:
    count = run.tool_count(name)
    if count is None:
        return None, _left_out(run)
    return count >= times, f"{name} called {count} time(s) (at least {times} wanted)"


def did_not_call(name: str) -> Check:
    """The agent never called tool ``name``."""
    return Check(f"not_called_{_slug(name)}", f"does not call tool {name}", "did_not_call",
                 (name,))


def _not_called(run: ScorerRun, name: str) -> Verdict:
    count = run.tool_count(name)
    if count is None:
        return None, _left_out(run)
    return count == 0, (f"{name} was not called" if count == 0
                        else f"{name} was called {count} time(s)")


def tool_order(names: Sequence[str]) -> Check:
    """The tools ``names`` were called in this order (other calls in between allowed)."""
    wanted = tuple(name for name in names if name)
    if not wanted:
        raise ConfigError("tool_order needs at least one tool name")
    return Check(f"order_{_slug('_'.join(wanted))}", f"calls {' → '.join(wanted)} in order",
                 "tool_order", (wanted,))


def _in_order(run: ScorerRun, wanted: tuple[str, ...]) -> Verdict:
    called = _tools(run)
    remaining = iter(called)
    ok = all(any(name == seen for seen in remaining) for name in wanted)
    if not ok and run.steps_dropped:  # the order may lie in the steps left out
        return None, _left_out(run)
    return ok, f"called in order: {_listed(called)}"


def max_tool_calls(limit: int) -> Check:
    """At most ``limit`` tool calls."""
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
        raise ConfigError(f"max_tool_calls needs a count >= 0, got {limit!r}")
    return Check(f"max_tool_calls_{limit}", f"makes at most {limit} tool calls",
                 "max_tool_calls", (limit,))


def _at_most(run: ScorerRun, limit: int) -> Verdict:
    count = run.tool_call_count
    if count is None:
        return None, _left_out(run)
    return count <= limit, f"{count} tool call(s) (at most {limit})"


def no_tool_errors() -> Check:
    """No tool call failed."""
    return Check("no_tool_errors", "no tool call fails", "no_tool_errors")


def _no_errors(run: ScorerRun) -> Verdict:
    failed = [step for step in run.tool_steps if step.failed]
    errors = run.tool_error_count
    if errors is None and not failed:
        return None, _left_out(run)
    if not errors and not failed:
        return True, f"{run.tool_call_count} tool call(s), none failed"
    shown = "; ".join(f"{s.name}: {(s.error or '')[:120]}" for s in failed[:5])
    return False, f"{errors or len(failed)} failed" + (f": {shown}" if shown else "")


def used_no_tools() -> Check:
    """The agent answered without calling any tool."""
    return Check("used_no_tools", "calls no tool", "used_no_tools")


def _no_tools(run: ScorerRun) -> Verdict:
    count = run.tool_call_count
    if count is None:
        return None, _left_out(run)
    return not count, f"tools called: {_listed(_tools(run))}"


def no_loops(times: int = 3) -> Check:
    """No identical call (same tool, same arguments) made ``times`` times or more: the agent
    did not loop (Mastra has no such check; DeepEval's AgentLoopDetection is the peer)."""
    if not isinstance(times, int) or isinstance(times, bool) or times < 2:
        raise ConfigError(f"no_loops needs a repeat count >= 2, got {times!r}")
    return Check(f"no_loops_{times}", f"repeats no identical tool call {times} times",
                 "no_loops", (times,))


def _no_loops(run: ScorerRun, times: int) -> Verdict:
    tools = run.tool_steps
    if not run.steps_dropped and len(tools) < times:
        return True, f"no identical call repeated {times} times"
    often = {name for name, count in Counter(run.tool_names).items() if count >= times}
    counts = Counter(call_key(step) for step in tools if step.name in often)
    loops = [(key[0], count) for key, count in counts.items() if count >= times]
    if loops:
        return False, "repeated: " + ", ".join(f"{name} x{count}" for name, count in loops[:5])
    total = run.tool_call_count
    if run.steps_dropped and (total is None or total >= times):  # a loop may be in them
        return None, _left_out(run)
    return True, f"no identical call repeated {times} times"


def includes(text: str, *, ignore_case: bool = True) -> Check:
    """The answer contains ``text``."""
    return _text_check("includes", text, ignore_case, "contains")


def excludes(text: str, *, ignore_case: bool = True) -> Check:
    """The answer does not contain ``text``."""
    return _text_check("excludes", text, ignore_case, "does not contain")


def equals(text: str, *, ignore_case: bool = True) -> Check:
    """The answer is ``text`` (surrounding white space ignored)."""
    return _text_check("equals", text, ignore_case, "is")


def _text_check(kind: str, text: str, ignore_case: bool, verb: str) -> Check:
    if not isinstance(text, str) or not text:
        raise ConfigError(f"{kind} needs a non-empty text")
    return Check(f"{kind}_{_slug(text)}", f"the answer {verb} {text!r}", kind,
                 (text, ignore_case), uses_steps=False)


def _text(kind: str) -> Callable[[ScorerRun, str, bool], Verdict]:
    def test(run: ScorerRun, text: str, ignore_case: bool) -> Verdict:
        answer = run.response.lower() if ignore_case else run.response
        wanted = text.lower() if ignore_case else text
        ok = {"includes": wanted in answer, "excludes": wanted not in answer,
              "equals": answer.strip() == wanted.strip()}[kind]
        return ok, f"{'holds' if ok else 'fails'}: the answer {kind} {text!r}"
    return test


#: The longest ``matches`` may search one answer (seconds). A pattern with nested repeats,
#: ``(a|aa)+$``, backtracks for minutes on a hostile answer: it gives up here instead.
MATCH_TIMEOUT_S = 0.1


def matches(pattern: str, *, exact: bool = False) -> Check:
    """The answer matches the regular expression ``pattern`` (``exact``: all of it).

    Searched with the ``regex`` module (Python's ``re`` syntax), which lets go of the GIL while
    it searches (the application's threads never wait on it) and gives up after
    :data:`MATCH_TIMEOUT_S`: the check is then an error of the scorer (``invalid_input``, the
    pattern named), never a pass or a fail."""
    try:
        _compiled(pattern)
    except (regex.error, re.error, TypeError) as exc:
        raise ConfigError(f"matches needs a regular expression: {exc}") from exc
    return Check(f"matches_{_slug(pattern)}", f"the answer matches /{pattern}/", "matches",
                 (pattern, exact), uses_steps=False)


@functools.lru_cache(maxsize=256)
def _compiled(pattern: str) -> Any:
    return regex.compile(pattern, flags=regex.VERSION0)


def _matches(run: ScorerRun, pattern: str, exact: bool) -> Verdict:
    compiled = _compiled(pattern)
    search = compiled.fullmatch if exact else compiled.search
    try:
        found = search(run.response, concurrent=True, timeout=MATCH_TIMEOUT_S) is not None
    except TimeoutError:
        raise ScorerInputError(
            f"matches /{pattern}/ gave up after {MATCH_TIMEOUT_S:g} s on this answer of "
            f"{len(run.response)} characters (nested repeats backtrack without end): simplify "
            "the pattern") from None
    return found, f"the answer {'matches' if found else 'does not match'} /{pattern}/"


#: What each kind of check tests.
TESTS: dict[str, Callable[..., Verdict]] = {
    "called_tool": _called, "did_not_call": _not_called, "tool_order": _in_order,
    "max_tool_calls": _at_most, "no_tool_errors": _no_errors, "used_no_tools": _no_tools,
    "no_loops": _no_loops, "includes": _text("includes"), "excludes": _text("excludes"),
    "equals": _text("equals"), "matches": _matches,
}


def call_key(step: Step) -> tuple[str, str]:
    """A tool call's identity: its name and its arguments with JSON key order ignored."""
    return step.name, normalized_arguments(step.arguments)


def same_call(first: Step, second: Step) -> bool:
    """Whether two steps are the same tool call (the JSON is only read when the names match
    and the texts differ)."""
    return first.name == second.name and (first.arguments == second.arguments
                                          or call_key(first) == call_key(second))


@functools.lru_cache(maxsize=1024)
def normalized_arguments(arguments: str | None) -> str:
    if not arguments:
        return ""
    try:
        return json.dumps(safe_json.loads(arguments), sort_keys=True, separators=(",", ":"))
    except ValueError:
        return arguments.strip()


_BUILDERS: dict[str, Callable[[str], Check]] = {
    "called_tool": lambda arg: called_tool(_required(arg, "called_tool")),
    "did_not_call": lambda arg: did_not_call(_required(arg, "did_not_call")),
    "tool_order": lambda arg: tool_order([n.strip() for n in re.split(r"[,>→]+", arg)
                                          if n.strip()]),
    "max_tool_calls": lambda arg: max_tool_calls(_count(arg, "max_tool_calls")),
    "no_tool_errors": lambda arg: _no_argument(arg, "no_tool_errors", no_tool_errors),
    "used_no_tools": lambda arg: _no_argument(arg, "used_no_tools", used_no_tools),
    "no_loops": lambda arg: no_loops(_count(arg, "no_loops") if arg else 3),
    "includes": lambda arg: includes(_required(arg, "includes")),
    "excludes": lambda arg: excludes(_required(arg, "excludes")),
    "equals": lambda arg: equals(_required(arg, "equals")),
    "matches": lambda arg: matches(_required(arg, "matches")),
}
_ALIASES = {"calledtool": "called_tool", "didnotcall": "did_not_call",
            "not_called": "did_not_call", "toolorder": "tool_order",
            "maxtoolcalls": "max_tool_calls", "notoolerrors": "no_tool_errors",
            "usednotools": "used_no_tools", "noloops": "no_loops"}


def _required(arg: str, name: str) -> str:
    if not arg:
        raise ConfigError(f"check {name} needs an argument (e.g. '{name} get_weather')")
    return arg


def _count(arg: str, name: str) -> int:
    try:
        return int(arg)
    except ValueError:
        raise ConfigError(f"check {name} needs a whole number, got {arg!r}") from None


def _no_argument(arg: str, name: str, make: Callable[[], Check]) -> Check:
    if arg:
        raise ConfigError(f"check {name} takes no argument, got {arg!r}")
    return make()


def parse_check(spec: str | Check) -> Check:
    """A check from its text form (``called_tool get_weather``); see the module docstring."""
    if isinstance(spec, Check):
        return spec
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError(f"a check is a non-empty string, got {spec!r}")
    name, _, arg = spec.strip().partition(" ")
    key = name.strip().rstrip(":")
    key = _ALIASES.get(key.lower().replace("_", ""), _ALIASES.get(key.lower(), key.lower()))
    builder = _BUILDERS.get(key) or check_rows.builder(key)
    if builder is None:
        known = ", ".join(sorted([*_BUILDERS, *check_rows.names()]))
        raise ConfigError(f"unknown check {name!r}; known: {known}")
    return builder(arg.strip())


def verdicts(checks: Sequence[Check], run: ScorerRun
             ) -> tuple[tuple[CriterionVerdict, ...], int]:
    """Each check's verdict on ``run``, as rubric criterion verdicts, and how many could not
    be decided (steps left out: reported not satisfied, with why; see :func:`decided`)."""
    out = []
    undecided = 0
    for check in checks:
        held, reasoning = check(run)
        undecided += held is None
        out.append(CriterionVerdict(id=check.id, description=check.description, required=True,
                                    satisfied=bool(held), reasoning=reasoning))
    return tuple(out), undecided


def steps_truncated_result(scorer: str, scale: float, run: ScorerRun, **extra: Any
                           ) -> ScoreResult:
    """Not decided: a check needs steps the run left out past its bound, and nothing kept
    fails it; skipped (``steps_truncated``, counted), never passed."""
    return ScoreResult(run_id=run.run_id, scorer=scorer, score=None, scale=scale,
                       label="skipped", passed=None, skipped="steps_truncated",
                       reason=(f"Not decided: the run has more steps than are kept "
                               f"({run.steps_dropped} left out past the bound), a check needs "
                               "them, and none of those kept fails it."), **extra)


def no_steps_result(scorer: str, scale: float, run: ScorerRun, **extra: Any) -> ScoreResult:
    """Nothing to judge: the run carries no record of what the agent did (its telemetry has
    no tool, retrieval or LLM spans under the interaction), so it is skipped, not passed."""
    return ScoreResult(run_id=run.run_id, scorer=scorer, score=None, scale=scale,
                       label="skipped", passed=None, skipped="no_steps",
                       reason=("Not judged: the run has no steps (no tool, retrieval or LLM "
                               "span under the interaction), so what the agent did is "
                               "unknown."), **extra)
