"""Judge canaries: labelled cases replayed through the live judge, on a schedule.

A provider swaps the model snapshot behind a name, a prompt is edited, a local model is
replaced: the dashboard moves while the agent did not. The canaries watch the judge itself.
Every ``canary.interval_s`` (an hour by default; the first round one interval after start),
each configured LLM scorer judges ``canary.cases_per_round`` labelled cases of its kind (the
bundled golden set by default, or the agent set, or your own labelled file, or the labels your
reviewers gave in Phoenix or MLflow, read as ``calibrate --cases phoenix|mlflow`` reads them and
read again every :data:`REVIEWED_REFRESH_S`: ``canary.cases``),
stratified: passing and failing labels alternate, and every case comes round before one
repeats. Each verdict is compared with its label:

- ``otel_scorers.canary.verdicts`` counts them (labels scorer, judge_model, expected,
  judged: ``pass``, ``fail`` or ``error``): agreement, TPR and TNR in PromQL, the
  ``OtelScorersJudgeDrift`` alert on their drop against the scorer's own week;
- the judge's live true rates over the last ``canary.window`` verdicts are the
  ``otel_scorers.judge.true_positive_rate`` / ``true_negative_rate`` gauges with
  ``source="canary"`` (the corrected pass rate uses them), and ``health()["canaries"]``.

Canaries run off the application's thread, on the library's background loop, through the
scorer's own judge client, inside its rate limit and its hourly budget, and spend at most
``canary.budget_share`` of that budget (a round that would exceed it is skipped, counted).
Their results never reach the application's evaluation spans, events, score metrics or
sinks: only the canary metrics, and one ``otel_scorers.canary <scorer>`` span per verdict, in
a trace of its own (its case, label, verdict and the judge's reasons: the ``JudgeDrift``
alert links to the ones that disagree with their label). A scorer type without labelled
cases (a custom one, or ``checks``, decided in code) has no canaries; that is said once, never
guessed.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from otel_scorers import background_loop
from otel_scorers.config.settings import CanarySettings
from otel_scorers.pipeline.sampling import HourlyBudget
from otel_scorers.pipeline.slots import Slot

__all__ = ["Canaries", "CanaryState", "load_canary_cases"]

logger = logging.getLogger(__name__)


#: Reviewers' labels (``canary.cases: phoenix|mlflow``) are read again this often (seconds), so
#: new reviews join the canaries; each scorer's window of verdicts is kept across a re-read.
REVIEWED_REFRESH_S = 86_400.0
#: The most spans (Phoenix) or traces (MLflow) one reading of reviewers' labels goes through.
MAX_REVIEWED = 5_000

#: ``reviewed(name)``: the cases of backend ``name``'s reviewers' labels and the notes on what
#: was left out (made by ``pipeline.build`` from the backend's settings).
Reviewed = Callable[[str], tuple[list[Any], list[str]]]


def load_canary_cases(source: str, reviewed: Reviewed | None = None) -> list[Any]:
    """The labelled cases of ``source``: ``bundled`` (the golden set), ``agents`` (the agent
    set), a backend that keeps reviewers' labels (``phoenix``, ``mlflow``: read through
    ``reviewed``), or a labelled JSONL file (the ``calibrate --cases`` format)."""
    from otel_scorers import registry
    from otel_scorers.calibration import agent_cases, bundled_cases
    from otel_scorers.scorers.cases import load_cases

    if source == "bundled":
        return bundled_cases()
    if source == "agents":
        return agent_cases()
    if source in {row.name for row in registry.backends() if row.labels is not None}:
        if reviewed is None:
            raise ValueError(f"{source}: no backend settings to read the reviewers' labels "
                             "with")
        cases, notes = reviewed(source)
        logger.info("otel-scorers: %d judge canary case(s) from the reviewers' labels in %s%s",
                    len(cases), source, f" ({'; '.join(notes)})" if notes else "")
        return cases
    return list(load_cases(source))


@dataclass
class CanaryState:
    """One scorer's canaries: its cases by label, and its last verdicts (label, judged)."""

    slot: Slot
    passing: list[Any]
    failing: list[Any]
    window: deque[tuple[bool, bool]]
    spend: HourlyBudget | None
    turn: int = 0
    counts: dict[str, int] = field(default_factory=dict)

    def next_cases(self, count: int) -> list[Any]:
        """``count`` cases, alternating labels; each list walked in order (shuffled once)."""
        chosen = []
        for index in range(count):
            pool = (self.passing, self.failing)[(self.turn + index) % 2] or \
                self.passing or self.failing
            chosen.append(pool[(self.turn + index) // 2 % len(pool)])
        self.turn += count
        return chosen

    def rates(self) -> tuple[float | None, float | None]:
        """TPR and TNR over the window (``None`` without a case of that label)."""
        passing = [judged for expected, judged in self.window if expected]
        failing = [not judged for expected, judged in self.window if not expected]
        return (sum(passing) / len(passing) if passing else None,
                sum(failing) / len(failing) if failing else None)


class Canaries:
    """The canary rounds of a processor's scorers (see the module docstring)."""

    def __init__(self, settings: CanarySettings, slots: Sequence[Slot], *,
                 record: Callable[[str, str, str, str], None],
                 log_once: Callable[[str, str], None], reviewed: Reviewed | None = None) -> None:
        self.settings, self._record, self._log_once = settings, record, log_once
        self._reviewed = reviewed
        #: each verdict's span (``Emitter.canary``; set by the builder once the emitter exists)
        self.emit: Callable[..., None] | None = None
        self._loaded_at: float | None = None
        self.states: dict[str, CanaryState] = {}
        self._task: Future[None] | None = None
        self._stopped = False
        #: the scorers a judge decides: the ones canaries watch (read at the first round, on
        #: the background loop: nothing is loaded on the application's thread at start)
        self._judged = [slot for slot in slots if getattr(slot.scorer, "judge", None) is not None
                        and getattr(slot.scorer, "kind", "llm") != "code"] \
            if settings.enabled else []

    def _prepare(self) -> None:
        """Each watched scorer's cases, by label (once; reviewers' labels again every
        :data:`REVIEWED_REFRESH_S`, keeping each scorer's verdicts)."""
        settings, log_once = self.settings, self._log_once
        now = time.monotonic()
        if self._loaded_at is not None and (settings.cases not in ("phoenix", "mlflow") or
                                            now - self._loaded_at < REVIEWED_REFRESH_S):
            return
        self._loaded_at = now
        try:
            cases = load_canary_cases(settings.cases, self._reviewed)
        except Exception as exc:  # a bad file or backend: said once; scoring goes on as ever
            if not self.states:
                log_once("canary:cases", f"otel-scorers: the canary cases {settings.cases!r} "
                         f"could not be read ({exc}): no judge canaries run. To fix: "
                         "OTEL_SCORERS_CANARY_FILE=bundled, or a labelled JSONL file, or "
                         "the backend's settings")
            else:  # the earlier cases stay
                logger.warning("otel-scorers: the canary cases %r could not be read again "
                               "(%s): the earlier ones stay", settings.cases, exc)
            return
        states: dict[str, CanaryState] = {}
        for slot in self._judged:
            mine = _cases_for(slot, cases)
            if not mine:
                log_once(f"canary:none:{slot.name}", f"otel-scorers: scorer {slot.name} has "
                         "no labelled canary cases of its kind: its judge is not watched")
                continue
            shuffled = random.Random(slot.name).sample(mine, len(mine))
            passing = [c for c in shuffled if expected_pass(c)]
            failing = [c for c in shuffled if not expected_pass(c)]
            problem = set_problem(len(passing), len(failing))
            if problem:
                log_once(f"canary:set:{slot.name}", f"otel-scorers: scorer {slot.name}'s "
                         f"canary set ({settings.cases}) {problem}")
            earlier = self.states.get(slot.name)
            if earlier is not None:  # a re-read: the verdicts and the spend go on
                earlier.passing, earlier.failing = passing, failing
                states[slot.name] = earlier
                continue
            budget, share = slot.sampler.budget, settings.budget_share
            spend = None if budget is None else HourlyBudget(
                None if budget.max_tokens is None else max(1, int(budget.max_tokens * share)),
                None if budget.max_cost is None else budget.max_cost * share,
                day_tokens=None if budget.day_tokens is None else
                max(1, int(budget.day_tokens * share)),
                day_cost=None if budget.day_cost is None else budget.day_cost * share)
            states[slot.name] = CanaryState(slot, passing, failing,
                                            deque(maxlen=settings.window), spend)
        self.states = states  # whole, for the readers on other threads

    def start(self) -> None:
        """The rounds, on the background loop (nothing when no scorer has a judge)."""
        if self._judged and self._task is None:
            self._task = background_loop.submit(self._run())

    def stop(self) -> None:
        self._stopped = True
        if self._task is not None:
            self._task.cancel()

    async def _run(self) -> None:
        await background_loop.every(self.settings.interval_s, self.round,
                                    lambda: self._stopped, self._failed)

    def _failed(self, exc: Exception) -> None:
        """A bug must not end the watch: said once."""
        logger.debug("canary round failed", exc_info=exc)
        self._log_once("canary:round", "otel-scorers: a judge canary round failed unexpectedly")

    async def round(self) -> None:
        """One round: each scorer's next cases, judged one at a time."""
        await asyncio.to_thread(self._prepare)
        for state in self.states.values():
            for case in state.next_cases(self.settings.cases_per_round):
                await self._judge(state, case)

    async def _judge(self, state: CanaryState, case: Any) -> None:
        from otel_scorers.calibration.metrics import Outcome
        from otel_scorers.calibration.runner import scorer_for

        slot = state.slot
        scorer: Any = slot.scorer
        model = str(scorer.judge.model)
        budget, limiter = slot.sampler.budget, slot.sampler.limiter
        if (budget is not None and budget.exhausted()) or \
                (state.spend is not None and state.spend.exhausted()):
            self._count(state, "budget_exhausted")
            return
        if limiter is not None and not limiter.allow():
            self._count(state, "rate_limited")
            return
        expected = "pass" if expected_pass(case) else "fail"
        judge = scorer_for(case, scorer.judge, getattr(scorer, "examples", None))
        start_ns = time.time_ns()
        result = await judge.arun(case.scorer_run())
        usage = result.judge
        if usage is not None:
            tokens, cost = usage.total_tokens, usage.cost_usd
            if budget is not None:
                budget.spend(tokens, cost)
            if state.spend is not None:
                state.spend.spend(tokens, cost)
        verdict = judged_pass(case, Outcome.of(case, result))
        judged = "error" if result.error is not None or verdict is None else \
            "pass" if verdict else "fail"
        self._count(state, "error" if judged == "error" else "judged")
        if verdict is not None and judged != "error":
            state.window.append((expected == "pass", verdict))
        self._record(slot.name, model, expected, judged)
        if self.emit is not None:
            self.emit(result.model_copy(update={"scorer": slot.name}), case=case.id,
                      expected=expected, judged=judged, start_ns=start_ns)

    def _count(self, state: CanaryState, outcome: str) -> None:
        state.counts[outcome] = state.counts.get(outcome, 0) + 1

    def rates(self) -> list[tuple[str, str, str, float, float]]:
        """(scorer, judge model, "canary", TPR, TNR) of each scorer with both rates known."""
        out = []
        for name, state in self.states.items():
            tpr, tnr = state.rates()
            if tpr is not None and tnr is not None:
                out.append((name, str(state.slot.scorer.judge.model), "canary", tpr, tnr))  # type: ignore[attr-defined]
        return out

    def report(self) -> dict[str, Any]:
        """For ``health()``: per scorer its canary counts and live rates."""
        out: dict[str, Any] = {}
        for name, state in self.states.items():
            tpr, tnr = state.rates()
            out[name] = {**state.counts, "window": len(state.window),
                         "true_positive_rate": tpr, "true_negative_rate": tnr,
                         "cases_passing": len(state.passing),
                         "cases_failing": len(state.failing)}
        return out


#: The fewest cases of each label a canary set should have: below it a rate is a few cases
#: judged over and over (one flaky case moves it by a fifth or more).
MIN_CASES_PER_LABEL = 5


def set_problem(passing: int, failing: int) -> str | None:
    """What is wrong with a canary set of ``passing`` and ``failing`` cases, said with the
    numbers (``None``: nothing). A one-sided set still runs (it catches the judge broken the
    other way), but the rate it lacks is never measured, so the drift alert cannot fire on a
    judge broken into that verdict: the line says so and what to add."""
    if not failing:
        return (f"has {passing} passing case(s) and no failing one: its true-negative rate "
                "cannot be measured, and a judge broken into always passing would agree "
                "100% (OtelScorersJudgeDrift never fires). Add cases labelled fail")
    if not passing:
        return (f"has {failing} failing case(s) and no passing one: its true-positive rate "
                "cannot be measured, and a judge broken into always failing would agree "
                "100%. Add cases labelled pass")
    if min(passing, failing) < MIN_CASES_PER_LABEL:
        return (f"is small ({passing} passing, {failing} failing case(s)): its rates come "
                f"from the same few cases judged again and again. Give it at least "
                f"{MIN_CASES_PER_LABEL} of each label")
    return None


#: A case labelled by a score (prompt alignment) is a passing canary in the ``high`` band, a
#: failing one in the ``low`` band (``mid`` ones are left out: no verdict to hold a judge to);
#: the judge's score passes it from the middle of the ``mid`` band.
PASS_SCORE = 0.6


def expected_pass(case: Any) -> bool | None:
    """Whether ``case`` is labelled passing (``None``: no pass/fail label to hold to)."""
    label = case.expected.label
    if label in ("pass", "fail"):
        return bool(label == "pass")
    band = getattr(case.expected, "band", None)
    return {"high": True, "low": False}.get(band) if band else None


def judged_pass(case: Any, outcome: Any) -> bool | None:
    """The judge's pass verdict on ``case`` (``None``: none to read)."""
    if case.expected.label in ("pass", "fail"):
        return outcome.judged_pass  # type: ignore[no-any-return]
    if outcome.normalized is None:
        return None
    return bool(outcome.normalized >= PASS_SCORE)


def _cases_for(slot: Slot, cases: Sequence[Any]) -> list[Any]:
    """The cases whose kind builds the same scorer class as ``slot``'s, with a pass/fail
    verdict to hold the judge to."""
    from otel_scorers.calibration.runner import scorer_for

    kind = type(slot.scorer)
    judge = getattr(slot.scorer, "judge", None)
    mine = []
    for case in cases:
        if expected_pass(case) is None:
            continue
        try:
            if type(scorer_for(case, judge, None)) is kind:  # type: ignore[arg-type]
                mine.append(case)
        except Exception:  # a case of a type this build does not have
            continue
    return mine

