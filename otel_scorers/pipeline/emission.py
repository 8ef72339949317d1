"""Step three of an evaluation: each scorer's one decision counted and its result sent out, in
one place.

A judged result's tokens and cost are spent from its scorer's budget and recorded in the
judge's health; its decision is counted (scored, cached, filtered with a reason, error with a
type); a skip that needs a fix is said once; a result that is not filtered goes to the metrics,
the evaluation span and ``gen_ai.evaluation.result`` event, and the result backends; and its
attributes go to enriched export, which releases the evaluated span once all its scorers are
done (:meth:`Emission.release`, whatever happened).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from otel_scorers import names as n
from otel_scorers.backends import Evaluated, SinkQueue
from otel_scorers.capture import Captured
from otel_scorers.emit.attributes import result_attributes
from otel_scorers.emit.enriched import EnrichedExport
from otel_scorers.emit.metrics import ScorerMetrics
from otel_scorers.emit.spans import Emitter, Subject
from otel_scorers.names import Decision, Reason
from otel_scorers.pipeline.counts import DecisionCounts
from otel_scorers.pipeline.health import Health
from otel_scorers.pipeline.slots import Slot
from otel_scorers.policy import ContentPolicy
from otel_scorers.scorers.provenance import evaluator_of
from otel_scorers.scorers.result import ScoreResult

__all__ = ["Emission", "check_prices", "decision_of", "skip_warning"]

logger = logging.getLogger(__name__)


class Emission:
    """Where every decision is counted and every result goes (see the module docstring)."""

    def __init__(self, *, counts: DecisionCounts, metrics: ScorerMetrics, emitter: Emitter,
                 policy: ContentPolicy, log_once: Callable[[str, str], None],
                 health: Health | None = None, sinks: SinkQueue | None = None,
                 enriched: EnrichedExport | None = None) -> None:
        self.counts, self.metrics, self.emitter = counts, metrics, emitter
        self.policy, self.log_once = policy, log_once
        self.health = health if health is not None else Health(policy=policy)
        self.sinks, self.enriched = sinks, enriched

    def reset_after_fork(self) -> None:
        self.health.reset_after_fork()
        self.metrics.reset_after_fork()

    # -- decisions without a result ---------------------------------------------------------
    def budget_spent(self, slot: Slot, subject: Subject | None = None,
                     agent: str | None = None) -> None:
        self.counts.add(slot.name, Decision.BUDGET_EXHAUSTED)
        if subject is not None and self.emitter.due(slot.name, Decision.BUDGET_EXHAUSTED):
            self.emitter.unjudged(  # an example of the skipped runs, for the alert's link
                subject, slot.name, Decision.BUDGET_EXHAUSTED, None, agent=agent)
        budget = slot.sampler.budget
        if budget is not None and budget.day_exhausted():
            self.log_once(f"budget_day:{slot.name}", f"otel-scorers: the judge's per-day "
                          f"ceiling of scorer {slot.name} is spent (the last 24 hours): runs "
                          "are skipped (decision budget_exhausted) until it frees up. To fix: "
                          "raise budget_tokens_per_day / budget_cost_per_day "
                          "(OTEL_SCORERS_BUDGET_TOKENS_PER_DAY, "
                          "OTEL_SCORERS_BUDGET_COST_PER_DAY), or sample less")
            return
        self.log_once(f"budget:{slot.name}", f"otel-scorers: the judge budget of scorer "
                      f"{slot.name} is spent for this hour: runs are skipped (decision "
                      "budget_exhausted) until it frees up. To fix: raise "
                      "budget_tokens_per_hour / budget_cost_per_hour "
                      "(OTEL_SCORERS_BUDGET_TOKENS_PER_HOUR, "
                      "OTEL_SCORERS_BUDGET_COST_PER_HOUR), or sample less")

    def not_captured(self, slots: Sequence[Slot], reason: str) -> None:
        for slot in slots:
            self.counts.add(slot.name, Decision.FILTERED, reason)

    def dropped(self, slot: Slot, reason: str) -> None:
        self.counts.add(slot.name, Decision.DROPPED, reason)

    def failed(self, slot: Slot) -> None:
        """The scorer failed in a way no result says (a bug): counted, logged once."""
        self.counts.add(slot.name, Decision.ERROR, None, Reason.INTERNAL)
        self.log_once(f"score:{slot.name}", f"otel-scorers scorer {slot.name} failed "
                      "unexpectedly")

    # -- a result ---------------------------------------------------------------------------
    def decided(self, slot: Slot, subject: Subject, captured: Captured, result: ScoreResult,
                *, judged: bool, start_ns: int, extra: Mapping[str, Any] | None = None,
                turns: int | None = None) -> dict[str, Any]:
        """Count ``result``'s decision and send it out (``judged``: it cost a judge call now,
        else it was reused); ``extra`` and ``turns``: a session evaluation's attributes and
        size. Returns its attributes for enriched export (none when the span is not held)."""
        # which evaluator produced it, on every result that goes out (provenance)
        result = result.model_copy(update={"evaluator": evaluator_of(slot.scorer, captured.run)})
        if judged:
            self._spend(slot, result)
            self.health.record(slot.name, result, getattr(slot.scorer, "judge", None))
        decision, reason, error_type = decision_of(result)
        if decision == Decision.SCORED and not judged:
            decision = Decision.CACHED
        self.counts.add(slot.name, decision, reason, error_type)
        warning = skip_warning(reason, slot.name, captured.agent)
        if reason == Reason.NO_STEPS and captured.nested:
            # per-agent evaluation: this agent span's steps belong to the nested agents
            # below it, each judged on its own; nothing reached it wrongly, nothing to fix
            warning = None
        if warning is not None:
            self.log_once(f"{reason}:{slot.name}", warning)
        rate = slot.sampler.rate_of(subject.context.trace_id)
        if rate is not None:  # sampled at a paced ratio: said on the result (weights)
            extra = {**(extra or {}), n.PREFIX + n.ATTR_SAMPLE_RATE: rate}
        if decision != Decision.FILTERED:
            try:
                self._send(slot, subject, captured, result, start_ns, extra, turns)
            except Exception:
                self.log_once("emit", "otel-scorers could not emit an evaluation result")
        if self.enriched is None or not subject.held:
            return {}
        return result_attributes(result, f"{n.PREFIX}{slot.name}.", self.policy)

    def _send(self, slot: Slot, subject: Subject, captured: Captured, result: ScoreResult,
              start_ns: int, extra: Mapping[str, Any] | None, turns: int | None) -> None:
        self.metrics.result(result, captured.agent, turns=turns, evaluated=subject.context,
                            version=captured.version)
        if captured.version is not None:  # the drop alerts' links search by it
            extra = {**(extra or {}), n.PREFIX + n.ATTR_VERSION: captured.version}
        self.emitter.emit(subject, result, agent=captured.agent, source=captured.source,
                          start_ns=start_ns, end_ns=time.time_ns(), extra=extra)
        if self.sinks is not None and result.score is not None:
            self.sinks.offer(Evaluated(
                trace_id=f"{subject.context.trace_id:032x}",
                span_id=f"{subject.context.span_id:016x}", result=result,
                kind=getattr(slot.scorer, "kind", "llm"), agent=captured.agent))

    def release(self, subject: Subject, attributes: dict[str, Any]) -> None:
        """One scorer is done with a held span: hand its attributes to enriched export."""
        if self.enriched is not None and subject.held:
            self.enriched.add(subject.context.span_id, attributes)

    def _spend(self, slot: Slot, result: ScoreResult) -> None:
        """A judgement's tokens and cost against the scorer's budget; a call that succeeded
        without a price is said once (a failed call has no price to miss)."""
        budget = slot.sampler.budget
        usage = result.judge
        if budget is None or usage is None:
            return
        budget.spend(usage.total_tokens, usage.cost_usd)
        if usage.cost_usd is None and result.error is None and budget.max_cost is not None:
            self.log_once(f"unpriced:{slot.name}", unpriced_warning(slot.name, usage.model))


async def check_prices(slots: Sequence[Slot], log_once: Callable[[str, str], None]) -> None:
    """With a cost budget: warn about judge models litellm cannot price (at start-up, on the
    background loop: it loads litellm)."""
    for slot in slots:
        judge = getattr(slot.scorer, "judge", None)
        budget = slot.sampler.budget
        if judge is None or budget is None or budget.max_cost is None:
            continue
        try:
            priced = await asyncio.to_thread(judge.priced)
        except Exception:
            continue
        if priced is False:
            log_once(f"unpriced:{slot.name}",
                     unpriced_warning(slot.name, str(getattr(judge, "model", "?"))))


def no_rubric_warning(scorer: str, agent: str | None) -> str:
    whose = f"agent {agent!r}" if agent else "a run with no agent name"
    return (f"otel-scorers: rubric scorer {scorer} found no rubric for {whose}: nothing was "
            "judged (decision filtered, reason no_rubric). To fix: give it criteria, "
            "rubrics={'<agent>': '- ...'} (OTEL_SCORERS_RUBRIC sets one for every agent), or "
            "an otel_scorers.rubric span attribute")


#: What to change when an agent scorer skips a run, by reason (``None``: nothing to change).
_SKIP_FIXES: dict[str, str | None] = {
    Reason.NO_STEPS: "the interaction's tool and LLM spans must reach this processor: trace the "
                     "framework's tools (its instrumentation's tool spans) and keep "
                     "assemble_from_trace on",
    Reason.NO_TOOLS: None,  # an agent that has no tools and used none: right, nothing to fix
    Reason.NO_CONTEXT: "record tool results (the instrumentation's content switch) or "
                       "retrieved documents, or give the scorer a context",
    Reason.NO_CLAIMS: None,  # an answer with nothing to ground (a greeting): nothing to fix
    Reason.INPUT_TOO_LARGE: "the judge is shown at most max_field_chars (12,000 by default) "
                            "of each field, and this run's response or request is over ten "
                            "times that: judge a bounded answer (a summary, the final "
                            "message), or a JudgeClient with a larger max_field_chars",
    Reason.CONTEXT_TRUNCATED: "the context was cut to fit the judge and no claim could be "
                              "decided on the part shown: give the scorer a shorter context "
                              "(the relevant documents), or a judge with a larger "
                              "max_field_chars",
    Reason.STEPS_TRUNCATED: "the interaction made more steps than a run keeps (the first and "
                            "last 100): decide it with checks the counts of every step answer "
                            "(called_tool, did_not_call, max_tool_calls, no_tool_errors, the "
                            "blacklist), or bound the agent's loop",
}


def skip_warning(reason: str | None, scorer: str, agent: str | None) -> str | None:
    """The one warning for a scorer that skipped a run, with what to change; ``None`` where
    skipping is the right outcome (no tools at all, no claims) or nothing was skipped."""
    if reason == Reason.NO_RUBRIC:
        return no_rubric_warning(scorer, agent)
    fix = _SKIP_FIXES.get(reason or "")
    if fix is None:
        return None
    whose = f"agent {agent!r}" if agent else "a run with no agent name"
    return (f"otel-scorers: scorer {scorer} judged nothing for {whose} (decision filtered, "
            f"reason {reason}). To fix: {fix}")


def unpriced_warning(scorer: str, model: str) -> str:
    from otel_scorers.pipeline.sampling import UNPRICED_USD_PER_1K_TOKENS

    return (f"otel-scorers: judge model {model!r} of scorer {scorer} has no price in "
            "litellm's table: budget_cost_per_hour counts its calls at an estimated "
            f"${UNPRICED_USD_PER_1K_TOKENS:g} per 1,000 tokens (set budget_tokens_per_hour "
            "for an exact bound)")


def decision_of(result: ScoreResult) -> tuple[str, str | None, str | None]:
    """The terminal decision of a finished evaluation.

    A result the scorer skipped (a rubric scorer with no rubric for the run) still carries the
    seed's default score, but nothing was judged: live scoring counts it as filtered and emits
    no score, so pass rates and score histograms only count judged runs.
    """
    if result.skipped is not None:
        return Decision.FILTERED, result.skipped, None
    if result.error is None:
        return Decision.SCORED, None, None
    if result.error.type == "invalid_input":
        return Decision.FILTERED, Reason.INVALID_INPUT, None
    return Decision.ERROR, None, result.error.type
