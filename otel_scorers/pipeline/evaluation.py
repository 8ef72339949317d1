"""One evaluation of one run: capture, budget and cache, the scorer call, the decision, emission.

The processor's hooks hand a :class:`Job` (an ended span and the scorers that sampled it) to
the worker, which awaits :meth:`Evaluation.run` on the library's background loop. Every
(span, scorer) pair of a job ends in exactly one counted decision, and a span held for
enriched export is released once all its scorers are done, whatever happened.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from otel_scorers import names as n
from otel_scorers.backends import Evaluated, SinkQueue
from otel_scorers.capture import (
    Captured,
    CaptureMapping,
    Extractor,
    Limits,
    agent_name,
    capture_span,
)
from otel_scorers.capture.advice import content_fix
from otel_scorers.capture.pieces import Piece
from otel_scorers.capture.trace import TraceBuffer
from otel_scorers.emit.attributes import result_attributes
from otel_scorers.emit.enriched import EnrichedExport
from otel_scorers.emit.metrics import ScorerMetrics
from otel_scorers.emit.spans import Emitter
from otel_scorers.errors import JudgeTimeoutError
from otel_scorers.names import Decision, Reason
from otel_scorers.pipeline.cache import ResultCache
from otel_scorers.pipeline.counts import DecisionCounts
from otel_scorers.pipeline.health import Health
from otel_scorers.pipeline.isolated import IsolatedScorers
from otel_scorers.pipeline.sessions import SessionJob, Sessions
from otel_scorers.pipeline.slots import Slot
from otel_scorers.policy import ContentPolicy
from otel_scorers.scorers.base import Scorer
from otel_scorers.scorers.fused import Member, call_batches, judged
from otel_scorers.scorers.result import ScoreError, ScoreResult
from otel_scorers.scorers.rubric import RubricLike
from otel_scorers.scorers.run import ScorerRun

__all__ = ["Evaluation", "Job", "check_prices", "decision_of"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Job:
    """An ended span to evaluate, the scorers that sampled it, and its attributes as they were
    when it ended (``None``: read them from the span). ``attempt`` counts the times the job
    came back after waiting for log records that carry its content; ``agent`` names the
    interaction's agent when its span does not (a workflow root holding named agents).
    ``session_key``: the run is a turn of that sampled session (``session_slots`` judge it
    later), kept once captured; ``session``: the job judges a whole session instead."""

    span: ReadableSpan
    slots: tuple[Slot, ...]
    attributes: Mapping[str, Any] | None = None
    attempt: int = 0
    agent: str | None = None
    session_key: str | None = None
    session_slots: tuple[str, ...] = ()
    session: SessionJob | None = None


@dataclass
class Evaluation:
    """Everything one evaluation needs; :meth:`run` evaluates one job."""

    counts: DecisionCounts
    metrics: ScorerMetrics
    emitter: Emitter
    policy: ContentPolicy
    cache: ResultCache
    timeout_s: float
    log_once: Callable[[str, str], None]
    mapping: CaptureMapping | None = None
    extractor: Extractor | None = None
    limits: Limits = field(default_factory=Limits)
    rubrics: Mapping[str, RubricLike] | None = None
    buffer: TraceBuffer | None = None
    assemble: bool = True
    enriched: EnrichedExport | None = None
    #: Called with a job whose span had no content: ``True`` when it was set aside to come
    #: back once its log records arrive (or their wait is over), ``False`` to decide now.
    defer: Callable[[Job], bool] | None = None
    inflight: dict[str, asyncio.Future[ScoreResult]] = field(default_factory=dict)
    #: The reason counted for evaluations cancelled before they finished.
    cancel_reason: str = Reason.SHUTDOWN
    #: One judge call for the scorers judging a run with the same judge (judge.fused).
    fuse: bool = False
    #: Scorers that judge in a child process (``isolation: process``), else ``None``.
    isolated: IsolatedScorers | None = None
    #: Per-agent evaluation: a run owns only the pieces no nested agent span owns.
    per_agent: bool = False
    #: A scorer reads the steps (``ScorerRun.steps``): capture them.
    steps: bool = False
    #: Judge health per scorer: failures said once, the per-scorer view.
    health: Health = field(default_factory=Health)
    #: Result sinks (Phoenix): every scored result is offered to them, never waited for.
    sinks: SinkQueue | None = None
    #: Session scoring: turns are kept there, whole sessions judged by its scorers.
    sessions: Sessions | None = None

    def reset_after_fork(self) -> None:
        """In a forked child: no judgements in flight, an empty cache, fresh locks."""
        self.inflight = {}
        self.health.reset_after_fork()
        self.cache.reset_after_fork()
        self.metrics.reset_after_fork()

    # -- capture --------------------------------------------------------------------------
    def capture(self, span: ReadableSpan, *, attributes: Mapping[str, Any] | None = None,
                descendants: Sequence[ReadableSpan | Piece] | None = None,
                nested: int = 0, agent: str | None = None, steps: bool | None = None
                ) -> Captured:
        """The run to judge for ``span`` (no judge call, nothing counted). Without
        ``descendants``, what is buffered under it (spans and log records) is used;
        ``nested`` counts content under it that nested agent spans own (per-agent);
        ``steps`` (default: when a scorer reads them) captures what the agent did."""
        records: Sequence[Any] = ()
        pieces: Sequence[Any] = list(descendants or ())
        links: dict[int, int | None] = {}
        if descendants is None and self.buffer is not None:
            records = self.buffer.records_of(span)
            if self.assemble:
                pieces, nested = self.buffer.pieces_under(span, nested_own=not self.per_agent)
                links = self.buffer.links(span)
        agent = agent_name(span, self.mapping, attributes=attributes) or agent
        return capture_span(span, attributes=attributes, mapping=self.mapping,
                            extractor=self.extractor, limits=self.limits, descendants=pieces,
                            records=records, nested=nested,
                            rubric=self._rubric_for(span, agent), agent=agent, links=links,
                            steps=self.steps if steps is None else steps)

    def agent_of(self, span: ReadableSpan) -> str | None:
        """The agent name of ``span`` as capture reads it (the mapping's key first)."""
        return agent_name(span, self.mapping)

    def _rubric_for(self, span: ReadableSpan, agent: str | None = None) -> RubricLike | None:
        return self.rubric_for_agent(agent or self.agent_of(span))

    def rubric_for_agent(self, agent: str | None) -> RubricLike | None:
        """The configured rubric of ``agent`` (``"*"``: any agent), or ``None``."""
        if not self.rubrics:
            return None
        chosen: RubricLike | None = self.rubrics.get(agent or "", self.rubrics.get("*"))
        return chosen

    # -- one job --------------------------------------------------------------------------
    async def run(self, job: Job, *, descendants: Sequence[ReadableSpan | Piece] | None = None,
                  nested: int = 0) -> list[ScoreResult]:
        """Capture ``job.span``'s run and judge it with each of the job's scorers.

        Returns the results in scorer order; an empty list when nothing could be captured (the
        ``filtered`` decision says why).
        """
        span = job.span
        if job.session is not None:
            return await self._judge_session(job, job.session)
        try:
            captured = self.capture(span, attributes=job.attributes, descendants=descendants,
                                    nested=nested, agent=job.agent)
        except Exception:
            self.log_once("capture", "otel-scorers capture failed unexpectedly")
            captured = Captured(None, reason=Reason.INTERNAL)
        if (captured.reason == Reason.NO_CONTENT and descendants is None
                and self.defer is not None and self.defer(job)):
            return []  # back when its log records arrive, or their wait is over
        if self.buffer is not None and span.parent is None and span.context is not None:
            self.buffer.discard(span.context.trace_id)
        if job.session_key is not None:
            self._keep_turn(job, span, captured)
        if captured.run is None:
            for slot in job.slots:
                self.counts.add(slot.name, Decision.FILTERED, captured.reason or Reason.NO_CONTENT)
                self.release(span, {})
            self._say_why(span, captured, job.attributes)
            return []
        if captured.run.steps:
            try:
                self.metrics.steps(captured.run.steps, captured.agent)
            except Exception:
                self.log_once("emit", "otel-scorers could not emit an evaluation result")
        batches = (call_batches((s.name, s.scorer) for s in job.slots)
                   if self.fuse and self.isolated is None else {})
        results = await asyncio.gather(*(
            self._score(span, slot, captured,
                        batches[slot.name].join() if slot.name in batches else None)
            for slot in job.slots))
        return [result for result in results if result is not None]

    def _keep_turn(self, job: Job, span: ReadableSpan, captured: Captured) -> None:
        """The captured run is the next turn of its session (or, without content, a turn
        that could not be read)."""
        sessions, key = self.sessions, job.session_key
        if sessions is None or key is None:
            return
        try:
            if captured.run is None:
                sessions.unread(key, job.session_slots, captured.reason or Reason.NO_CONTENT)
            else:
                sessions.add_turn(key, job.session_slots, captured.run, span,
                                  agent=captured.agent,
                                  rubric=self._rubric_for(span, captured.agent))
        except Exception:
            self.log_once("session", "otel-scorers could not keep a turn of a session")

    async def _judge_session(self, job: Job, session: SessionJob) -> list[ScoreResult]:
        """Judge a whole session with the scorers that sampled it; the store learns which
        turns the evaluation covered, whatever happened."""
        captured = Captured(session.run, source="session", agent=session.agent)
        try:
            results = await asyncio.gather(*(
                self._score(job.span, slot, captured, session=session)
                for slot in job.slots))
            return [result for result in results if result is not None]
        finally:
            if self.sessions is not None:
                self.sessions.store.finished(session.key, session.last_turn)

    def _say_why(self, span: ReadableSpan, captured: Captured,
                 attributes: Mapping[str, Any] | None) -> None:
        """One warning per reason and fix, per process: what was not scored, and what to
        change (the instrumentation's content switch, for runs without content)."""
        reason = captured.reason or Reason.NO_CONTENT
        logger.debug("span %s not scored: %s (%s)", span.name, reason, captured.detail)
        if reason == Reason.NESTED_AGENT:
            return  # per-agent evaluation at work: the nested agents are judged
        if reason == Reason.NO_CONTENT:
            scope = span.instrumentation_scope.name if span.instrumentation_scope else None
            fix = content_fix(scope, attributes if attributes is not None
                              else span.attributes or {})
        elif reason == Reason.UNREADABLE:
            fix = ("keep the content of the framework's LLM calls on (their messages are read "
                   "before its serialized state), or name the attributes holding the question "
                   "and the answer with capture={'input': ..., 'output': ...}")
        elif reason == Reason.INTERNAL:
            return  # logged with its traceback where it happened
        else:
            fix = "check what the instrumentation writes (capture_limits bound what is read)"
        self.log_once(f"why:{reason}:{fix}", f"otel-scorers: {span.name!r} was not scored "
                      f"({reason}): {captured.detail}. To fix: {fix}. (Logged once; counted in "
                      "the decisions, reason " + reason + ")")

    async def _score(self, span: ReadableSpan, slot: Slot, captured: Captured,
                     member: Member | None = None, *, session: SessionJob | None = None
                     ) -> ScoreResult | None:
        """Judge one run with one scorer; counts exactly one terminal decision. With a
        ``member``, this task is one of the scorers sharing a judge call: it asks in the
        batch, or leaves it as soon as it knows it will not ask. ``session``: the run is
        that whole session."""
        try:
            return await self._score_alone(span, slot, captured, member, session)
        finally:
            if member is not None:
                member.batch.leave(member)

    async def _score_alone(self, span: ReadableSpan, slot: Slot, captured: Captured,
                           member: Member | None, session: SessionJob | None
                           ) -> ScoreResult | None:
        attributes: dict[str, Any] = {}
        counted = False
        run = captured.run
        assert run is not None
        try:
            budget = slot.sampler.budget
            if budget is not None and budget.exhausted():
                self.counts.add(slot.name, Decision.BUDGET_EXHAUSTED)
                counted = True
                self.log_once(f"budget:{slot.name}", f"otel-scorers: the judge budget of "
                              f"scorer {slot.name} is spent for this hour: runs are skipped "
                              "(decision budget_exhausted) until it frees up. To fix: raise "
                              "budget_tokens_per_hour / budget_cost_per_hour "
                              "(OTEL_SCORERS_BUDGET_TOKENS_PER_HOUR, "
                              "OTEL_SCORERS_BUDGET_COST_PER_HOUR), or sample less")
                return None
            start_ns = time.time_ns()
            key = _cache_key(slot.scorer, run) if self.cache.enabled else None
            cached = self.cache.get(key) if key is not None else None
            shared = self.inflight.get(key) if key is not None and cached is None else None
            if shared is not None:  # the same judgement is in flight: share its call
                if member is not None:  # its batch must not wait for it meanwhile
                    member.batch.leave(member)
                cached = await asyncio.shield(shared)
            if cached is not None:
                result = cached.model_copy(update={"run_id": run.run_id, "cached": True})
                decision, reason, error_type = decision_of(result)
                if decision == Decision.SCORED:
                    decision = Decision.CACHED
            else:
                result = await self._judge_once(slot, run, key, member)
                self._spend(slot, result)
                self.health.record(slot.name, result, getattr(slot.scorer, "judge", None))
                decision, reason, error_type = decision_of(result)
            self.counts.add(slot.name, decision, reason, error_type)
            warning = skip_warning(reason, slot.name, captured.agent)
            if warning is not None:
                self.log_once(f"{reason}:{slot.name}", warning)
            counted = True
            if decision != Decision.FILTERED:
                attributes = self._emit(span, slot, captured, result, start_ns, session)
            return result
        except asyncio.CancelledError:
            if not counted:
                self.counts.add(slot.name, Decision.DROPPED, self.cancel_reason)
            raise
        except Exception:
            if not counted:
                self.counts.add(slot.name, Decision.ERROR, None, Reason.INTERNAL)
            self.log_once(f"score:{slot.name}", f"otel-scorers scorer {slot.name} failed "
                          "unexpectedly")
            return None
        finally:
            if session is None:  # a session result holds no span for enriched export
                self.release(span, attributes)

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

    async def _judge_once(self, slot: Slot, run: ScorerRun, key: str | None,
                          member: Member | None = None) -> ScoreResult:
        """Judge ``run``; identical evaluations arriving meanwhile wait for this call (single
        flight) instead of making their own, and a success is cached for later ones."""
        if key is None:
            return await self._judge(slot, run, member)
        future: asyncio.Future[ScoreResult] = asyncio.get_running_loop().create_future()
        self.inflight[key] = future
        try:
            result = await self._judge(slot, run, member)
            self.cache.put(key, result)
            future.set_result(result)
            return result
        except asyncio.CancelledError:
            future.cancel()
            raise
        except Exception as exc:
            future.set_exception(exc)
            future.exception()  # retrieved here: followers re-raise it, nobody else logs it
            raise
        finally:
            self.inflight.pop(key, None)

    async def _judge(self, slot: Slot, run: ScorerRun, member: Member | None = None
                     ) -> ScoreResult:
        try:
            return await asyncio.wait_for(self._arun(slot, run, member),
                                          timeout=self.timeout_s)
        except asyncio.TimeoutError:
            error = JudgeTimeoutError(
                f"evaluation exceeded evaluation_timeout_s={self.timeout_s:g}")
            return ScoreResult(run_id=run.run_id, scorer=slot.name,
                               scale=float(getattr(slot.scorer, "scale", 1.0)),
                               error=ScoreError.from_exception(error),
                               reason=f"Not scored: {error}")

    async def _arun(self, slot: Slot, run: ScorerRun, member: Member | None) -> ScoreResult:
        isolated = self.isolated
        if isolated is not None and isolated.handles(slot.name):
            try:
                return await isolated.arun(slot.name, run)
            except LookupError:  # the child could not rebuild this scorer: judge it here
                pass
        return await judged(slot.scorer, run, member)

    async def close(self) -> None:
        """Stop the judging process, if any (its evaluations are over or abandoned)."""
        if self.isolated is not None:
            await self.isolated.close()

    def _emit(self, span: ReadableSpan, slot: Slot, captured: Captured, result: ScoreResult,
              start_ns: int, session: SessionJob | None = None) -> dict[str, Any]:
        """Metrics, evaluation span and event; returns the attributes for enriched export."""
        try:
            self.metrics.result(result, captured.agent, turns=(
                len(session.run.turns) if session is not None else None))
            self.emitter.emit(span, result, agent=captured.agent, source=captured.source,
                              start_ns=start_ns, end_ns=time.time_ns(),
                              extra=session.attributes() if session is not None else None)
            if self.sinks is not None and result.score is not None and span.context:
                self.sinks.offer(Evaluated(
                    trace_id=f"{span.context.trace_id:032x}",
                    span_id=f"{span.context.span_id:016x}", result=result,
                    kind=getattr(slot.scorer, "kind", "llm"), agent=captured.agent))
        except Exception:
            self.log_once("emit", "otel-scorers could not emit an evaluation result")
        return result_attributes(result, f"{n.PREFIX}{slot.name}.", self.policy)

    def release(self, span: ReadableSpan, attributes: dict[str, Any]) -> None:
        """One scorer is done with ``span``: hand its attributes to enriched export."""
        if self.enriched is not None and span.context is not None:
            self.enriched.add(span.context.span_id, attributes)


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


def _cache_key(scorer: Scorer, run: ScorerRun) -> str | None:
    key_of = getattr(scorer, "cache_key", None)
    if key_of is None:
        return None
    key = key_of(run)
    return None if key is None else f"{getattr(scorer, 'name', '')}:{key}"


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

