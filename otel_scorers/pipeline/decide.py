"""The worker's side of ``on_end``, in one pass: intake, selection, interactions, sampling, jobs.

Each ended span the hot path handed over is sorted into the trace buffer as what it is (a
candidate that may be an interaction, a piece of one, a parent link); when a trace's local root
ends (or the trace goes idle, or at a flush) its interactions are resolved
(:func:`otel_scorers.capture.interactions.resolve`), each is sampled per scorer, counted, and
becomes a :class:`~otel_scorers.pipeline.evaluation.Job`. The stages hand on and never call
back: spans that wait for no score are passed to enriched export here, every decision is
counted here. With per-agent evaluation, every selected agent span is a job when it ends.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from otel_scorers.capture.interactions import Candidate, Interaction, is_local_root, resolve
from otel_scorers.capture.kinds import CHAIN, LLM, span_kind
from otel_scorers.capture.logs import has_genai_events
from otel_scorers.capture.sessions import scope_of, scoped_key, session_key
from otel_scorers.capture.trace import CONTENT_KEY_SET, Pending, TraceBuffer
from otel_scorers.emit.enriched import EnrichedExport
from otel_scorers.emit.spans import Emitter, Subject
from otel_scorers.names import GEN_AI_AGENT_NAME, Decision, Reason
from otel_scorers.pipeline.counts import DecisionCounts
from otel_scorers.pipeline.evaluation import Job
from otel_scorers.pipeline.selection import Selector, is_llm_call, is_own
from otel_scorers.pipeline.sessions import SessionJob, SessionLane
from otel_scorers.pipeline.slots import Slot
from otel_scorers.pipeline.unselected import Unselected

__all__ = ["RESOLVE_ALL", "Decider"]

#: The worker's signal to decide every trace still waiting for its root (flush, exit, stop).
RESOLVE_ALL = object()


def _events(span: ReadableSpan) -> Sequence[Any]:
    """A span's events without the SDK property's copy (most spans have none)."""
    events = getattr(span, "_events", None)
    return events if events else ()


@dataclass
class Decider:
    """Turns ended spans into jobs (see the module docstring); ``log_side`` tells whether a
    log side is attached (a run's content may then come later)."""

    selector: Selector
    buffer: TraceBuffer
    slots: tuple[Slot, ...]
    counts: DecisionCounts
    enriched: EnrichedExport | None
    log_once: Callable[[str, str], None]
    log_side: Callable[[], bool]
    unselected: Unselected
    #: keep step spans (tools, retrievals, LLM calls without content) for scorers reading steps
    keep_steps: bool = False
    #: session scoring: each interaction of a sampled session is kept as a turn
    sessions: SessionLane | None = None
    #: writes an unjudged run's marker span (``Emitter.due``, ``Emitter.unjudged``)
    mark: Emitter | None = None

    def __post_init__(self) -> None:
        self.names = tuple(slot.name for slot in self.slots)
        self.per_agent = self.selector.selection.per_agent

    def warn_unselected(self) -> None:
        message = self.unselected.message()
        if message is not None:
            self.log_once("unselected", message)

    def lost(self, pending: Pending) -> None:
        """A trace left the buffer undecided (evicted, expired): its interactions are counted
        as dropped for that reason and their spans passed on."""
        self.jobs_of(pending, lost=pending.reason or Reason.TRACE_LIMIT)

    def decide(self, item: tuple[ReadableSpan, Mapping[str, Any] | None] | object
                ) -> Sequence[Job]:
        """One ended span, in the order spans ended: buffered as what it is (a candidate, a
        piece, a parent link), and the jobs to evaluate now (often none: candidates wait for
        their trace's local root)."""
        if item is RESOLVE_ALL:
            return self.resolve_all()
        span, attrs = item  # type: ignore[misc]
        try:
            if is_own(span):
                self.forward(span)
                return ()
            if self.per_agent:
                return self._decide_agent(span, attrs)
            if attrs is None:
                self.buffer.observe(span, None)  # a parent link, when its trace is buffered
            else:
                kind = span_kind(attrs)
                candidate = (self.selector.kind_of(span, attrs)
                             if self.selector.could_match(attrs, kind) else None)
                if candidate is not None:
                    if self.buffer.add_candidate(Candidate(span, attrs, candidate)):
                        return self._resolve(span) if is_local_root(span) else ()
                else:
                    self.buffer.observe(span, attrs, piece=kind is not None and (
                        self.keep_steps or has_genai_events(_events(span))), llm=kind == LLM)
            self.forward(span)
            return self._resolve(span) if is_local_root(span) else ()
        except Exception:
            self.log_once("on_end", "otel-scorers could not process a span; it was passed on "
                                     "unscored")
            self.forward(span)
            return ()

    def shed(self, span: ReadableSpan, attrs: Mapping[str, Any]) -> bool:
        """A span ended while the queue is full. ``True``: it was decided here and its runs
        dropped, counted as :meth:`decide` then :meth:`dropped` would count them: a candidate
        that is its whole trace (a local root, nothing of its trace buffered, not a chain) needs
        no trace buffer, no resolving and no job, and this runs on an overloaded application
        thread. ``False``: any other span; decide it as usual."""
        try:
            return self._shed(span, attrs)
        except Exception:  # as in decide: said once, the span passed on unscored
            self.log_once("on_end", "otel-scorers could not process a span; it was passed on "
                                    "unscored")
            self.forward(span)
            return True

    def _shed(self, span: ReadableSpan, attrs: Mapping[str, Any]) -> bool:
        if self.per_agent or not is_local_root(span) or is_own(span):
            return False
        kind = (self.selector.kind_of(span, attrs)
                if self.selector.could_match(attrs, span_kind(attrs)) else None)
        context = span.context
        if (kind is None or kind == CHAIN  # (a chain alone owns no LLM call: no interaction)
                or context is None or context.trace_id in self.buffer.traces):
            return False
        run = Interaction(Candidate(span, attrs, kind))
        if self.selector.filters_agents and not self.selector.keeps(run.agents, span.name):
            self.forward(span)
            self._say_filter()
            return True
        chosen, decisions = self._choose(span)
        _, session_slots = self._session_of((attrs,), span)
        self.counts.select(self.names, decisions, dropped=[slot.name for slot in chosen])
        if not chosen:
            self.forward(span)
        elif self.enriched is not None:  # held, then let go: as a dropped job's span
            self.enriched.hold(span, len(chosen))
            self.enriched.release(context.span_id)
        if chosen or session_slots:
            self._say_full()
        if self.mark is not None:
            for slot in chosen:
                if self.mark.due(slot.name, Decision.DROPPED):
                    self._mark_dropped(span, attrs, run.agent, slot.name)
        return True

    def _decide_agent(self, span: ReadableSpan, attrs: Mapping[str, Any] | None
                      ) -> Sequence[Job]:
        """Per-agent evaluation: every selected agent span is a run, decided when it ends."""
        buffer = self.buffer
        if attrs is None:
            buffer.observe(span, None)
            self.forward(span)
            return ()
        selected = self.selector.matches(span, attrs)
        # with a log side, a run's content may come later, by time: keep its window
        agent = selected and not is_llm_call(attrs)
        create = agent and self.log_side()
        if create or buffer.traces or not CONTENT_KEY_SET.isdisjoint(attrs) or span_kind(attrs):
            buffer.observe(span, attrs, keep_content=not selected, agent=agent, create=create,
                           piece=not selected and span_kind(attrs) is not None)
        chosen = self._sample(span) if selected else ()
        key, session_slots = self._session_of((attrs,), span) if selected else (None, ())
        if not chosen:
            if not selected and not self.unselected.chain and span_kind(attrs) == CHAIN:
                self.unselected.chain = span.name[:80]
            if not selected and self.unselected.note(span.name, attrs):
                self.warn_unselected()
            if not selected:
                self._say_filter()
            self.forward(span)
            return (self._job(span, (), attrs, session_key=key, session_slots=session_slots),) \
                if session_slots else ()
        if self.enriched is not None:
            self.enriched.hold(span, len(chosen))
        return (self._job(span, chosen, attrs, session_key=key, session_slots=session_slots),)

    def _job(self, span: ReadableSpan, slots: tuple[Slot, ...], attrs: Mapping[str, Any] | None,
             **kwargs: Any) -> Job:
        """A job for the queue; its trace is held in the buffer until the job reads it (an
        evaluation waits minutes under a slow judge: its steps must still be there)."""
        if span.context is not None:
            self.buffer.hold(span.context.trace_id)
        return Job(span, slots, attrs, **kwargs)

    def _say_filter(self) -> None:
        """The agents filter turned an interaction away: said once while it keeps none."""
        message = self.selector.filter_warning()
        if message is not None:
            self.log_once("agents_filter", message)

    def _session_of(self, attributes: Sequence[Mapping[str, Any]], span: ReadableSpan
                    ) -> tuple[str | None, tuple[str, ...]]:
        """The session key of an interaction (its spans' attributes, the root's first; scoped
        by ``span``'s resource) and the session scorers that sampled the session (none: not
        kept as a turn)."""
        sessions = self.sessions
        if sessions is None:
            return None, ()
        key = session_key(attributes, sessions.key_attributes)
        if key is None:
            sessions.no_key()
            self.log_once("no_session", sessions.no_key_warning())
            return None, ()
        resource = span.resource.attributes if span.resource is not None else None
        key = scoped_key(key, scope_of(resource, sessions.scope_attributes))
        assert key is not None
        return key, sessions.sampled(key)

    def _resolve(self, span: ReadableSpan) -> Sequence[Job]:
        """``span``'s trace is complete (its local root ended): its interactions are decided."""
        context = span.context
        if context is None:
            return ()
        pending = self.buffer.take_pending(context.trace_id)
        if pending is None:
            self._note_unjudged(context.trace_id, span.name)
            return ()
        jobs = self.jobs_of(pending)
        if not jobs and span.parent is None:  # the whole trace ended and nobody reads it (all
            self.buffer.discard(context.trace_id)  # sampled out): it goes now, not in minutes
        return jobs

    def resolve_all(self, idle_since: float | None = None) -> list[Job]:
        """Decide every trace still waiting (flush, exit; ``idle_since``: only idle ones)."""
        jobs: list[Job] = []
        for trace_id in self.buffer.pending_traces(idle_since):
            pending = self.buffer.take_pending(trace_id)
            if pending is not None:
                jobs.extend(self.jobs_of(pending))
        return jobs

    def jobs_of(self, pending: Pending, lost: str | None = None) -> list[Job]:
        """The interactions among a trace's candidates, sampled (every other candidate is
        passed on); ``lost``: the trace was evicted before it could be judged, each interaction
        is counted as dropped for that reason."""
        interactions, rest = resolve(pending.candidates, pending.parents, pending.llm_spans)
        for candidate in rest:
            self.forward(candidate.span)
        if not interactions:
            self._note_unjudged(pending.trace_id, pending.candidates[0].span.name)
        return self._jobs(interactions, lost)

    def _jobs(self, interactions: Sequence[Interaction], lost: str | None = None) -> list[Job]:
        jobs: list[Job] = []
        for interaction in interactions:
            for candidate in interaction.inner:
                self.forward(candidate.span)
            root = interaction.root
            if self.selector.filters_agents and not self.selector.keeps(
                    interaction.agents, root.span.name):
                self.forward(root.span)
                self._say_filter()
                continue
            if lost is not None:
                self.counts.select(self.names, [])
                for slot in self.slots:
                    self.counts.add(slot.name, Decision.DROPPED, lost)
                self.forward(root.span)
                continue
            chosen = self._sample(root.span)
            key, session_slots = self._session_of(
                [c.attributes for c in (root, *interaction.inner)], root.span)
            if not chosen:
                self.forward(root.span)
                if session_slots:  # captured only to be a turn of its session
                    jobs.append(self._job(root.span, (), root.attributes,
                                          agent=interaction.agent, session_key=key,
                                          session_slots=session_slots))
                continue
            if self.enriched is not None:
                self.enriched.hold(root.span, len(chosen))
            jobs.append(self._job(root.span, chosen, root.attributes, agent=interaction.agent,
                                  session_key=key, session_slots=session_slots))
        return jobs

    def _note_unjudged(self, trace_id: int, name: str) -> None:
        """A trace ended with no interaction: its LLM calls went unjudged (counted for the
        warning that says what to select)."""
        count = self.buffer.content_count(trace_id)
        if count and self.unselected.note(name, None, record=True, count=count):
            self.warn_unselected()

    def _sample(self, span: ReadableSpan) -> tuple[Slot, ...]:
        """The scorers that will judge a selected span; the others' decisions are counted."""
        chosen, decisions = self._choose(span)
        self.counts.select(self.names, decisions)
        return chosen

    def _choose(self, span: ReadableSpan) -> tuple[tuple[Slot, ...], list[tuple[str, str]]]:
        """The scorers that will judge a selected span, and the others' decisions."""
        self.unselected.selected = True
        chosen: list[Slot] = []
        decisions: list[tuple[str, str]] = []
        for slot in self.slots:
            sampler = slot.sampler
            if not sampler.sampled(span) or not sampler.paced(span):  # (the budget's pace)
                decisions.append((slot.name, Decision.SAMPLED_OUT))
            elif sampler.limiter is not None and not sampler.limiter.allow():
                decisions.append((slot.name, Decision.RATE_LIMITED))
            else:
                chosen.append(slot)
        return tuple(chosen), decisions

    def forward(self, span: ReadableSpan) -> None:
        """Pass a span that is not waiting for scores on to enriched export, if enabled."""
        if self.enriched is not None:
            self.enriched.forward(span)

    def dropped(self, job: Job | SessionJob) -> None:
        """The queue had no room for ``job``: count it, release its span and its trace's
        buffered content, say so once (a session job's turns count as handled: judged again
        only if the session goes on)."""
        self._say_full()
        if isinstance(job, SessionJob):
            if self.sessions is not None:
                self.sessions.dropped(job, Reason.QUEUE_FULL)
            return
        for slot in job.slots:
            self.counts.add(slot.name, Decision.DROPPED, Reason.QUEUE_FULL)
            if self.mark is not None and self.mark.due(slot.name, Decision.DROPPED):
                self._mark_dropped(job.span, job.attributes, job.agent, slot.name)
        context = job.span.context
        if self.enriched is not None and context is not None:
            self.enriched.release(context.span_id)
        if context is not None:  # as an evaluated run's: what its trace held goes now (once
            # no other queued run holds it), not in minutes
            self.buffer.release(context.trace_id, root=job.span.parent is None)

    def _mark_dropped(self, span: ReadableSpan, attrs: Mapping[str, Any] | None,
                      agent: str | None, scorer: str) -> None:
        """An example of the runs the full queue dropped, for the alert's link."""
        subject = Subject.of(span)
        if subject is None or self.mark is None:
            return
        named = (attrs or span.attributes or {}).get(GEN_AI_AGENT_NAME)
        self.mark.unjudged(subject, scorer, Decision.DROPPED, Reason.QUEUE_FULL,
                           agent=agent or (named if isinstance(named, str) else None))

    def _say_full(self) -> None:
        self.log_once("queue_full", "otel-scorers queue is full: runs are dropped unscored "
                                     "(see the dropped decisions; raise queue_size or "
                                     "concurrency, or sample less)")

