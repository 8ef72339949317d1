"""The session lane: which sessions are sampled, their turns kept, whole sessions judged.

Session scorers (``level = "session"``) judge conversations, not interactions. The turn lane
(:mod:`otel_scorers.pipeline.evaluation`) hands every captured interaction of a sampled session
to :meth:`SessionLane.keep_turn`; the store (:mod:`.store`) holds the turns, bounded, until a
session goes idle, is asked for, or the process exits; then the session is a
:class:`SessionJob` of its own type, judged by the evaluation's three steps (check, ask, emit)
and reported on its last turn's span context (its trace and span ids and name: the store keeps
no spans). A gateway fleet sends turns to the gateway judging their session instead of keeping
them (:mod:`.forward`; the wire format is :mod:`otel_scorers.otlp.turns`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, TraceFlags
from pydantic import ValidationError

from otel_scorers import names as n
from otel_scorers.capture import Captured
from otel_scorers.capture.sessions import MAX_KEY_CHARS, MAX_SCOPE_CHARS, conversation_of
from otel_scorers.emit.spans import Subject
from otel_scorers.names import Decision, Reason
from otel_scorers.otlp.turns import decode_turn, verify_turn
from otel_scorers.pipeline.counts import DecisionCounts
from otel_scorers.pipeline.evaluation import Evaluation
from otel_scorers.pipeline.sessions.forward import TurnForwarder
from otel_scorers.pipeline.sessions.store import OpenSession, SessionStore, StoredTurn
from otel_scorers.pipeline.slots import Slot
from otel_scorers.scorers.result import ScoreResult
from otel_scorers.scorers.run import ScorerRun, session_run
from otel_scorers.scorers.steps import Step, bounded
from otel_scorers.scorers.turns import MAX_TURN_CHARS, Turn

__all__ = ["SessionJob", "SessionLane"]

#: Steps kept per turn (when a session scorer reads them), and characters of each text field.
MAX_TURN_STEPS = 20
MAX_STEP_CHARS = 600
#: Session keys remembered as not sampled (so a session sampled out is counted once).
MAX_UNSAMPLED = 10_000


@dataclass(frozen=True)
class SessionJob:
    """A session to judge now: its run (the conversation), who judges it, what it covers,
    and the last turn's span it is reported on."""

    key: str
    run: ScorerRun
    slots: tuple[Slot, ...]
    context: SpanContext
    span_name: str
    agent: str | None
    first_turn: int
    last_turn: int
    new_turns: int
    dropped_turns: int
    unread_turns: int
    trigger: str

    def attributes(self) -> dict[str, Any]:
        """What the evaluation span and event say about the session."""
        scope, conversation = conversation_of(self.key)
        out: dict[str, Any] = {
            n.GEN_AI_CONVERSATION_ID: conversation,
            n.PREFIX + n.ATTR_SESSION_ID: conversation,
            n.PREFIX + n.ATTR_SESSION_FIRST_TURN: self.first_turn,
            n.PREFIX + n.ATTR_SESSION_LAST_TURN: self.last_turn,
            n.PREFIX + n.ATTR_SESSION_TURNS: len(self.run.turns),
            n.PREFIX + n.ATTR_SESSION_NEW_TURNS: self.new_turns,
            n.PREFIX + n.ATTR_SESSION_TRIGGER: self.trigger,
        }
        if scope is not None:
            out[n.PREFIX + n.ATTR_SESSION_SCOPE] = scope
        if self.dropped_turns:
            out[n.PREFIX + n.ATTR_SESSION_DROPPED_TURNS] = self.dropped_turns
        if self.unread_turns:
            out[n.PREFIX + n.ATTR_SESSION_UNREAD_TURNS] = self.unread_turns
        return out


class SessionLane:
    """Session scoring in a processor (see the module docstring)."""

    def __init__(self, slots: Sequence[Slot], store: SessionStore, counts: DecisionCounts,
                 evaluation: Evaluation, *, keep_steps: bool,
                 forward: TurnForwarder | None = None,
                 rubric_for: Callable[[str | None], Any] | None = None) -> None:
        self.slots = tuple(slots)
        self.store = store
        self.counts = counts
        self.evaluation = evaluation
        self.key_attributes = tuple(store.policy.key_attributes)
        self.scope_attributes = tuple(store.policy.scope_attributes)
        self.keep_steps = keep_steps
        #: a gateway fleet: turns go there (to the gateway judging their session), not here
        self.forward = forward
        self._rubric_for = rubric_for or (lambda _agent: None)
        #: turn records received that could not be read; not signed with the fleet's secret;
        #: refused (no secret, no token, and ``accept_turns`` off)
        self.invalid_records = 0
        self.unsigned_records = 0
        self.refused_records = 0
        policy = store.policy
        self._secret = (policy.turn_secret.get_secret_value().encode()
                        if policy.turn_secret is not None else None)
        self._accept_any = policy.accept_turns
        self._names = tuple(slot.name for slot in self.slots)
        self._by_name = {slot.name: slot for slot in self.slots}
        self._unsampled: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def reset_after_fork(self) -> None:
        self.store.reset_after_fork()
        self._unsampled = OrderedDict()
        if self.forward is not None:  # its exporter thread is the parent's
            self.forward = self.forward.fresh()
        self._lock = threading.Lock()

    def health(self) -> dict[str, int]:
        """Sessions open (turns not judged), held, and turn records that could not be read."""
        out = {"open": self.store.open_count(), "held": len(self.store)}
        for name in ("invalid_records", "unsigned_records", "refused_records"):
            if getattr(self, name):
                out[name] = getattr(self, name)
        return out

    # -- turns in ----------------------------------------------------------------------------
    def no_key(self) -> None:
        """An interaction without a session key: for each session scorer, a selected run
        filtered for that reason (``no_session``), so a session scorer that never judges
        anything says why."""
        self.counts.select(self._names, [])
        for name in self._names:
            self.counts.add(name, Decision.FILTERED, Reason.NO_SESSION)

    def no_key_warning(self) -> str:
        return (f"otel-scorers: session scorer(s) {', '.join(self._names)} judge nothing: "
                "interactions arrive without a session key (looked for "
                f"{', '.join(self.key_attributes)}; decision filtered, reason no_session). "
                "To fix: put the conversation's id on your agent spans (OpenInference "
                "using_session, gen_ai.conversation.id), or name the attribute holding it "
                "with sessions.key_attributes (OTEL_SCORERS_SESSION_KEY)")

    def sampled(self, key: str) -> tuple[str, ...]:
        """The session scorers that judge session ``key`` (empty: none; counted once as
        sampled out, at its first turn). The decision follows the conversation id, not its
        scope: services that share a conversation sample it alike."""
        conversation = conversation_of(key)[1]
        chosen = tuple(slot.name for slot in self.slots
                       if slot.sampler.sampled_key(conversation))
        if chosen:
            return chosen
        with self._lock:
            if key in self._unsampled:
                self._unsampled.move_to_end(key)
                return ()
            self._unsampled[key] = None
            if len(self._unsampled) > MAX_UNSAMPLED:
                self._unsampled.popitem(last=False)
        self.counts.select(self._names, [(name, Decision.SAMPLED_OUT) for name in self._names])
        return ()

    def keep_turn(self, key: str, slots: tuple[str, ...], span: ReadableSpan,
                  captured: Captured) -> None:
        """A captured interaction of session ``key`` as its next turn (sent to the fleet
        instead, with a forward endpoint); one that could not be read is noted on the session
        and, for each session scorer that samples it, counted as filtered for its reason, so
        a session whose turns are never readable (content capture off) is not silent."""
        run = captured.run
        if run is None:
            self.store.unread(key)
            self.counts.select(slots, [])
            for name in slots:
                self.counts.add(name, Decision.FILTERED, captured.reason or Reason.NO_CONTENT)
            return
        stored = self.turn_of(run, span, captured.agent)
        if self.forward is not None:
            self.forward.send(key, stored.turn, start_ns=stored.start_ns,
                              trace_id=stored.trace_id, span_id=stored.span_id,
                              span_name=stored.span_name, system=run.system_prompt)
            return
        self.store.add(key, slots, stored, system=run.system_prompt, agent=captured.agent,
                       rubric=self._rubric_for(captured.agent))

    def turn_of(self, run: ScorerRun, span: ReadableSpan, agent: str | None) -> StoredTurn:
        """The captured run of an interaction as a turn, the way a session keeps it."""
        context = span.context
        kept, cut = self._kept(run.steps)
        turn = Turn.of(0, run.user_prompt or "", run.response, agent=agent, steps=kept,
                       steps_dropped=cut + run.steps_dropped)
        trace_id, span_id = (context.trace_id, context.span_id) if context else (0, 0)
        return StoredTurn(turn, span.start_time or 0, trace_id, span_id, span.name)

    def admits(self, authenticated: bool) -> bool:
        """Whether turn records may come in at all: with a turn secret (each is verified), from
        an authenticated sender (the gateway's token), or when ``accept_turns`` says so."""
        return self._secret is not None or authenticated or self._accept_any

    def refused(self, count: int) -> None:
        self.refused_records += count

    def receive(self, attributes: Mapping[str, Any], body: Any, trace_id: int,
                span_id: int) -> str | None:
        """A turn record from another gateway of the fleet: kept when its session is sampled
        here; what was wrong with it when it was dropped (counted): ``invalid`` (it cannot be
        read), ``unsigned`` (not signed with the fleet's turn secret)."""
        if self._secret is not None and not verify_turn(attributes, body, self._secret):
            self.unsigned_records += 1
            return "unsigned"
        record = decode_turn(attributes, body)
        if record is None:
            self.invalid_records += 1
            return "invalid"
        key = record.key.strip()[:MAX_SCOPE_CHARS + 1 + MAX_KEY_CHARS]
        slots = self.sampled(key)
        if slots:
            steps = []
            for item in record.steps:
                try:
                    steps.append(Step.model_validate(item))
                except ValidationError:
                    continue  # a step we cannot read: the rest of the turn still counts
            kept, cut = self._kept(steps)
            turn = Turn.of(0, record.user, record.assistant, agent=record.agent, steps=kept,
                           steps_dropped=cut + record.steps_dropped)
            system = record.system[:MAX_TURN_CHARS] if record.system else None
            self.store.add(key, slots, StoredTurn(turn, record.start_ns, trace_id, span_id,
                                                  record.span_name),
                           system=system, agent=turn.agent, rubric=self._rubric_for(turn.agent))
        return None

    def _kept(self, steps: Sequence[Step]) -> tuple[tuple[Step, ...], int]:
        """What a session keeps of a turn's steps, and how many acts it leaves out: none
        unless a session scorer reads them; then its tool calls, retrievals and handoffs, the
        first and the last of them, cut short."""
        if not self.keep_steps:
            return (), 0
        kept, cut, _ = bounded([step for step in steps if step.kind != "llm"], MAX_TURN_STEPS)
        return tuple(_small(step) for step in kept), cut

    # -- sessions out ------------------------------------------------------------------------
    def due(self) -> list[SessionJob]:
        """The sessions to judge now (idle, or evicted with turns not judged)."""
        return self.jobs(self.store.due())

    def take(self, key: str | None = None, trigger: str = "requested") -> list[SessionJob]:
        """Sessions with turns not judged yet, now (``key``: only that one)."""
        return self.jobs(self.store.take(key, trigger))

    def jobs(self, due: Sequence[tuple[OpenSession, str]]) -> list[SessionJob]:
        """Each due session as a job of the scorers that sampled it (rate limits applied and
        every decision counted here: a session evaluation is one selected run per scorer)."""
        jobs = []
        for session, trigger in due:
            chosen: list[Slot] = []
            decisions: list[tuple[str, str]] = []
            for name in self._names:
                slot = self._by_name[name]
                if name not in session.slots:
                    decisions.append((name, Decision.SAMPLED_OUT))
                elif slot.sampler.limiter is not None and not slot.sampler.limiter.allow():
                    decisions.append((name, Decision.RATE_LIMITED))
                else:
                    chosen.append(slot)
            self.counts.select(self._names, decisions)
            if not chosen or not session.turns:
                self.store.finished(session.key, session.count)
                continue
            jobs.append(job_of(session, tuple(chosen), trigger))
        return jobs

    async def judge(self, job: SessionJob) -> list[ScoreResult]:
        """Judge a whole session with its scorers (three steps, as every run), reported on
        its last turn's span; the store learns which turns it covered, whatever happened."""
        try:
            return await self.evaluation.judge(
                Subject(job.context, job.span_name), job.slots,
                Captured(job.run, source="session", agent=job.agent),
                extra=job.attributes(), turns=len(job.run.turns))
        finally:
            self.store.finished(job.key, job.last_turn)

    def dropped(self, job: SessionJob, reason: str) -> None:
        """``job`` will not be judged (the queue is full, the process exits): counted; its
        turns count as handled (judged again only if the session goes on)."""
        for slot in job.slots:
            self.counts.add(slot.name, Decision.DROPPED, reason)
        self.store.finished(job.key, job.last_turn)


def job_of(session: OpenSession, slots: tuple[Slot, ...], trigger: str) -> SessionJob:
    """The session as it is now, as one run (turn numbers true across dropped turns)."""
    turns = []
    for position, stored in enumerate(session.turns):
        number = position + 1 + (session.dropped if position else 0)
        turns.append(stored.turn.model_copy(update={"index": number}))
    last = session.turns[-1]
    context = {"rubric": session.rubric} if session.rubric is not None else {}
    run = session_run(turns, session_id=conversation_of(session.key)[1], system=session.system,
                      run_id=f"{last.trace_id:032x}-{last.span_id:016x}", context=context)
    return SessionJob(
        key=session.key, run=run, slots=slots, span_name=last.span_name, agent=session.agent,
        context=SpanContext(trace_id=last.trace_id, span_id=last.span_id, is_remote=False,
                            trace_flags=TraceFlags(TraceFlags.SAMPLED)),
        first_turn=turns[0].index, last_turn=turns[-1].index,
        new_turns=session.count - session.judged, dropped_turns=session.dropped,
        unread_turns=session.unread, trigger=trigger)


def _small(step: Step) -> Step:
    """A step as a session keeps it: its text fields cut to what the judge is shown."""
    def cut(text: str | None) -> str | None:
        return text if text is None or len(text) <= MAX_STEP_CHARS else text[:MAX_STEP_CHARS]
    return step.model_copy(update={"arguments": cut(step.arguments), "result": cut(step.result),
                                   "error": cut(step.error), "documents": ()})
