"""Sessions live: the turns of each conversation held until it goes idle, then judged whole.

Each interaction that carries a session key (:mod:`otel_scorers.capture.sessions`) and belongs
to a sampled session becomes a *turn* of it once captured (its question, its answer, the
agent; its steps when a session scorer reads them). A session is judged, by every session
scorer that sampled it, when no turn has come for ``sessions.idle_s``, on an explicit
:meth:`~otel_scorers.pipeline.ScoringSpanProcessor.score_sessions`, and at exit (within
``exit_timeout_s``). A session that resumes after it was judged is judged again, whole; the
result says which turns it covers and how many are new.

Memory is bounded, and whatever a bound costs is counted:

- ``max_turns`` and ``max_chars`` per session: past either, the oldest turns after the first
  (the first holds the user's goal) are dropped (``otel_scorers.session.turns_dropped``,
  reasons ``turn_limit``, ``byte_limit``), and the transcript names the gap;
- ``max_sessions`` held at once: the least recently active session makes room (judged at once
  when it has turns not judged yet, else forgotten: ``otel_scorers.sessions.evicted``); at most
  :func:`eviction_backlog` of them wait to be judged, past that they are forgotten too (their
  turns counted as dropped, reason ``session_limit``), so a flood of new sessions cannot grow
  memory past the bound;
- a session judged and idle for ``keep_s`` is forgotten (a later turn starts it afresh).

Sampling is per session (:meth:`Sampler.sampled_key`: the key, not the trace), so a sampled
session is judged whole; the decision is taken at its first turn. Every session evaluation is
one selected run of each session scorer in the decision counts.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, TraceFlags

from otel_scorers import names as n
from otel_scorers.capture.sessions import DEFAULT_SESSION_KEYS
from otel_scorers.names import Decision, Reason
from otel_scorers.pipeline.counts import DecisionCounts
from otel_scorers.pipeline.slots import Slot
from otel_scorers.pipeline.turn_records import TurnForwarder, turn_of_record
from otel_scorers.scorers.run import ScorerRun
from otel_scorers.scorers.session import session_run
from otel_scorers.scorers.steps import Step
from otel_scorers.scorers.turns import Turn

__all__ = ["SessionJob", "SessionPolicy", "SessionStore", "Sessions", "StoredTurn"]

#: Steps kept per turn (when a session scorer reads them), and characters of each text field.
MAX_TURN_STEPS = 20
MAX_STEP_CHARS = 600
#: Session keys remembered as not sampled (so a session sampled out is counted once).
MAX_UNSAMPLED = 10_000


@dataclass(frozen=True)
class SessionPolicy:
    """Where session keys are read and the store's timings and bounds (the ``sessions.*``
    settings; docs/configuration.md)."""

    key_attributes: tuple[str, ...] = DEFAULT_SESSION_KEYS
    idle_s: float = 300.0
    keep_s: float = 3600.0
    max_sessions: int = 10_000
    max_turns: int = 100
    max_chars: int = 262_144


def eviction_backlog(policy: SessionPolicy) -> int:
    """How many sessions evicted with turns not judged may wait to be judged at once."""
    return max(16, policy.max_sessions // 100)


@dataclass(frozen=True)
class StoredTurn:
    """A turn as the store keeps it: the turn, when its interaction started, and the span a
    session result is reported on when it is the last turn (its trace and span ids, name)."""

    turn: Turn
    start_ns: int
    trace_id: int
    span_id: int
    span_name: str

    @property
    def size(self) -> int:
        return self.turn.size + 200


@dataclass
class OpenSession:
    """One conversation in the store."""

    key: str
    slots: tuple[str, ...]
    turns: list[StoredTurn] = field(default_factory=list)
    chars: int = 0
    #: turns left out after the first (bounds), so numbers after the gap stay true
    dropped: int = 0
    #: interactions of the session that could not be read (no content)
    unread: int = 0
    #: the number of turns the last finished evaluation covered
    judged: int = 0
    last_seen: float = 0.0
    system: str | None = None
    agent: str | None = None
    rubric: Any = None

    @property
    def count(self) -> int:
        """Turns seen (kept and dropped)."""
        return len(self.turns) + self.dropped

    @property
    def pending(self) -> int:
        """Turns not covered by a finished evaluation."""
        return self.count - self.judged


@dataclass(frozen=True)
class SessionJob:
    """A session to judge now: its run (the conversation), who judges it, and what it covers."""

    key: str
    run: ScorerRun
    slots: tuple[str, ...]
    span: ReadableSpan
    agent: str | None
    first_turn: int
    last_turn: int
    new_turns: int
    dropped_turns: int
    unread_turns: int
    trigger: str

    def attributes(self) -> dict[str, Any]:
        """What the evaluation span and event say about the session."""
        out: dict[str, Any] = {
            n.GEN_AI_CONVERSATION_ID: self.key,
            n.PREFIX + n.ATTR_SESSION_ID: self.key,
            n.PREFIX + n.ATTR_SESSION_FIRST_TURN: self.first_turn,
            n.PREFIX + n.ATTR_SESSION_LAST_TURN: self.last_turn,
            n.PREFIX + n.ATTR_SESSION_TURNS: len(self.run.turns),
            n.PREFIX + n.ATTR_SESSION_NEW_TURNS: self.new_turns,
            n.PREFIX + n.ATTR_SESSION_TRIGGER: self.trigger,
        }
        if self.dropped_turns:
            out[n.PREFIX + n.ATTR_SESSION_DROPPED_TURNS] = self.dropped_turns
        if self.unread_turns:
            out[n.PREFIX + n.ATTR_SESSION_UNREAD_TURNS] = self.unread_turns
        return out


class SessionStore:
    """The open sessions, bounded (see the module docstring). Thread-safe."""

    def __init__(self, policy: SessionPolicy, *, count_dropped: Callable[[str, int], None],
                 count_evicted: Callable[[bool], None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.policy = policy
        self._count_dropped = count_dropped
        self._count_evicted = count_evicted
        self._clock = clock
        self._reset()

    def _reset(self) -> None:
        #: sessions with turns not judged yet, least recently active first
        self._active: OrderedDict[str, OpenSession] = OrderedDict()
        #: sessions all judged (kept for a resume), least recently active first
        self._resting: OrderedDict[str, OpenSession] = OrderedDict()
        #: sessions being judged now
        self._judging: dict[str, OpenSession] = {}
        #: sessions that made room for others with turns not judged yet: judged next
        self._evicted: list[OpenSession] = []
        self._lock = threading.Lock()

    def reset_after_fork(self) -> None:
        self._reset()

    def __len__(self) -> int:
        return len(self._active) + len(self._resting) + len(self._judging)

    # -- turns in ----------------------------------------------------------------------------
    def add(self, key: str, slots: tuple[str, ...], turn: StoredTurn, *,
            system: str | None = None, agent: str | None = None, rubric: Any = None) -> None:
        """A captured turn of session ``key`` (sampled by ``slots``), kept in start order."""
        with self._lock:
            now = self._clock()
            judging = key in self._judging
            session = self._find(key)
            if session is not None and turn.span_id and any(
                    t.span_id == turn.span_id and t.trace_id == turn.trace_id
                    for t in session.turns):
                return  # the same interaction again (a retried delivery): one turn
            if session is None:
                self._make_room()
                session = OpenSession(key, slots)
            elif not judging:  # moved to the end: the most recently active
                self._active.pop(key, None)
                self._resting.pop(key, None)
            starts = [t.start_ns for t in session.turns]
            session.turns.insert(bisect.bisect_right(starts, turn.start_ns), turn)
            session.chars += turn.size
            session.system = system or session.system
            session.agent = agent or session.agent
            session.rubric = rubric if rubric is not None else session.rubric
            session.last_seen = now
            self._bound(session)
            if not judging:
                self._active[key] = session

    def _find(self, key: str) -> OpenSession | None:
        return self._judging.get(key) or self._active.get(key) or self._resting.get(key)

    def unread(self, key: str) -> None:
        """An interaction of session ``key`` had no content to read."""
        with self._lock:
            session = self._find(key)
            if session is not None:
                session.unread += 1

    def _bound(self, session: OpenSession) -> None:
        policy = self.policy
        while len(session.turns) > 2 and (len(session.turns) > policy.max_turns
                                          or session.chars > policy.max_chars):
            reason = (Reason.TURN_LIMIT if len(session.turns) > policy.max_turns
                      else Reason.SESSION_BYTE_LIMIT)
            gone = session.turns.pop(1)
            session.chars -= gone.size
            session.dropped += 1
            self._count_dropped(reason, 1)

    def _make_room(self) -> None:
        # (evicted sessions wait for the next periodic pass, at most a fraction of a second)
        while len(self) >= self.policy.max_sessions:
            if self._resting:
                self._resting.popitem(last=False)
                self._count_evicted(False)
            elif self._active:
                _, session = self._active.popitem(last=False)
                if len(self._evicted) < eviction_backlog(self.policy):
                    self._evicted.append(session)
                    self._count_evicted(True)
                else:  # a flood of new sessions: forgotten, its turns counted as lost
                    self._count_evicted(False)
                    self._count_dropped(Reason.SESSION_LIMIT, session.pending)
            else:
                return

    # -- sessions out ------------------------------------------------------------------------
    def due(self) -> list[tuple[OpenSession, str]]:
        """The sessions to judge now: idle ones (and ones evicted with turns not judged), each
        with its trigger; sessions judged and idle past ``keep_s`` are forgotten."""
        with self._lock:
            now = self._clock()
            out = [(session, "evicted") for session in self._evicted]
            self._evicted = []
            idle = now - self.policy.idle_s
            while self._active:
                key, session = next(iter(self._active.items()))
                if session.last_seen > idle:
                    break
                del self._active[key]
                self._judging[key] = session
                out.append((session, "idle"))
            stale = now - self.policy.keep_s
            while self._resting:
                key, session = next(iter(self._resting.items()))
                if session.last_seen > stale:
                    break
                del self._resting[key]
            return out

    def take(self, key: str | None = None, trigger: str = "requested"
             ) -> list[tuple[OpenSession, str]]:
        """Sessions with turns not judged yet, now (``key``: only that one)."""
        with self._lock:
            out = [(session, "evicted") for session in self._evicted
                   if key is None or session.key == key]
            self._evicted = [s for s in self._evicted if key is not None and s.key != key]
            for name in ([key] if key is not None else list(self._active)):
                session = self._active.pop(name, None)
                if session is not None:
                    self._judging[name] = session
                    out.append((session, trigger))
            return out

    def finished(self, key: str, judged: int) -> None:
        """An evaluation of ``key`` covering its first ``judged`` turns is over."""
        with self._lock:
            session = self._judging.pop(key, None)
            if session is None:
                return
            session.judged = max(session.judged, judged)
            if session.pending:
                self._active[key] = session  # turns came meanwhile: judged again when idle
            else:
                self._resting[key] = session

    def open_count(self) -> int:
        """Sessions with turns not judged yet."""
        return len(self._active) + len(self._evicted) + len(self._judging)


class Sessions:
    """Session scoring in a processor: which sessions are sampled, their turns, their jobs."""

    def __init__(self, slots: Sequence[Slot], store: SessionStore, counts: DecisionCounts, *,
                 keep_steps: bool, forward: TurnForwarder | None = None,
                 rubric_for: Callable[[str | None], Any] | None = None) -> None:
        self.slots = tuple(slots)
        self.store = store
        self.counts = counts
        self.key_attributes = store.policy.key_attributes
        self.keep_steps = keep_steps
        #: a gateway fleet: turns go there (to the gateway judging their session), not here
        self.forward = forward
        self._rubric_for = rubric_for or (lambda _agent: None)
        #: turn records received that could not be read
        self.invalid_records = 0
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

    def no_key(self) -> None:
        """An interaction without a session key: for each session scorer, a selected run
        filtered for that reason (``no_session``), so a session scorer that never judges
        anything says why."""
        self.counts.select(self._names, [])
        for name in self._names:
            self.counts.add(name, Decision.FILTERED, Reason.NO_SESSION)

    def unread(self, key: str, slots: tuple[str, ...], reason: str) -> None:
        """An interaction of session ``key`` that could not be read (``reason``: no content,
        unreadable, ...): noted on the session, and for each session scorer that samples it a
        selected run filtered for that reason, so a session whose turns are never readable
        (content capture off) is counted, not silent."""
        self.store.unread(key)
        self.counts.select(slots, [])
        for name in slots:
            self.counts.add(name, Decision.FILTERED, reason)

    def no_key_warning(self) -> str:
        return (f"otel-scorers: session scorer(s) {', '.join(self._names)} judge nothing: "
                "interactions arrive without a session key (looked for "
                f"{', '.join(self.key_attributes)}; decision filtered, reason no_session). "
                "To fix: put the conversation's id on your agent spans (OpenInference "
                "using_session, gen_ai.conversation.id), or name the attribute holding it "
                "with sessions.key_attributes (OTEL_SCORERS_SESSION_KEY)")

    def sampled(self, key: str) -> tuple[str, ...]:
        """The session scorers that judge session ``key`` (empty: none; counted once as
        sampled out, at its first turn)."""
        chosen = tuple(slot.name for slot in self.slots if slot.sampler.sampled_key(key))
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

    def turn_of(self, run: ScorerRun, span: ReadableSpan, agent: str | None) -> StoredTurn:
        """The captured run of an interaction as a turn, the way a session keeps it."""
        context = span.context
        turn = Turn.of(0, run.user_prompt or "", run.response, agent=agent,
                       steps=self._kept(run.steps))
        trace_id, span_id = (context.trace_id, context.span_id) if context else (0, 0)
        return StoredTurn(turn, span.start_time or 0, trace_id, span_id, span.name)

    def add_turn(self, key: str, slots: tuple[str, ...], run: ScorerRun, span: ReadableSpan,
                 *, agent: str | None, rubric: Any = None) -> None:
        """The captured run of an interaction of session ``key``, as its next turn (sent to
        the fleet instead, with a forward endpoint)."""
        stored = self.turn_of(run, span, agent)
        if self.forward is not None:
            self.forward.send(key, stored.turn, start_ns=stored.start_ns,
                              trace_id=stored.trace_id, span_id=stored.span_id,
                              span_name=stored.span_name, system=run.system_prompt)
            return
        self.store.add(key, slots, stored, system=run.system_prompt, agent=agent,
                       rubric=rubric)

    def receive(self, attributes: Mapping[str, Any], body: Any, trace_id: int,
                span_id: int) -> bool:
        """A turn record from another gateway (:mod:`.turn_records`): kept when its session
        is sampled here; ``False`` when it cannot be read (counted)."""
        received = turn_of_record(attributes, body, trace_id, span_id)
        if received is None:
            self.invalid_records += 1
            return False
        slots = self.sampled(received.key)
        if slots:
            turn = received.turn.model_copy(update={"steps": self._kept(received.turn.steps)})
            self.store.add(received.key, slots, StoredTurn(
                turn, received.start_ns, received.trace_id, received.span_id,
                received.span_name), system=received.system, agent=turn.agent,
                rubric=self._rubric_for(turn.agent))
        return True

    def _kept(self, steps: Sequence[Step]) -> tuple[Step, ...]:
        """What a session keeps of a turn's steps: none unless a session scorer reads them;
        then its tool calls, retrievals and handoffs, cut short."""
        if not self.keep_steps:
            return ()
        return tuple(_small(step) for step in steps if step.kind != "llm")[:MAX_TURN_STEPS]

    def jobs(self, due: Sequence[tuple[OpenSession, str]]) -> list[SessionJob]:
        """Each due session as a job of the scorers that sampled it (rate limits applied and
        every decision counted here: a session evaluation is one selected run per scorer)."""
        jobs = []
        for session, trigger in due:
            chosen: list[str] = []
            decisions: list[tuple[str, str]] = []
            for name in self._names:
                slot = self._by_name[name]
                if name not in session.slots:
                    decisions.append((name, Decision.SAMPLED_OUT))
                elif slot.sampler.limiter is not None and not slot.sampler.limiter.allow():
                    decisions.append((name, Decision.RATE_LIMITED))
                else:
                    chosen.append(name)
            self.counts.select(self._names, decisions)
            if not chosen or not session.turns:
                self.store.finished(session.key, session.count)
                continue
            jobs.append(job_of(session, tuple(chosen), trigger))
        return jobs


def job_of(session: OpenSession, slots: tuple[str, ...], trigger: str) -> SessionJob:
    """The session as it is now, as one run (turn numbers true across dropped turns)."""
    turns = []
    for position, stored in enumerate(session.turns):
        number = position + 1 + (session.dropped if position else 0)
        turns.append(stored.turn.model_copy(update={"index": number}))
    last = session.turns[-1]
    context = {"rubric": session.rubric} if session.rubric is not None else {}
    run = session_run(turns, session_id=session.key, system=session.system,
                      run_id=f"{last.trace_id:032x}-{last.span_id:016x}", context=context)
    return SessionJob(
        key=session.key, run=run, slots=slots, span=_span_ref(last), agent=session.agent,
        first_turn=turns[0].index, last_turn=turns[-1].index,
        new_turns=session.count - session.judged, dropped_turns=session.dropped,
        unread_turns=session.unread, trigger=trigger)


def _span_ref(turn: StoredTurn) -> ReadableSpan:
    """A stand-in for the last turn's span (results are reported on it): its ids and name,
    nothing of its content (the store never keeps spans)."""
    return ReadableSpan(name=turn.span_name, context=SpanContext(
        trace_id=turn.trace_id, span_id=turn.span_id, is_remote=False,
        trace_flags=TraceFlags(TraceFlags.SAMPLED)))


def _small(step: Step) -> Step:
    """A step as a session keeps it: its text fields cut to what the judge is shown."""
    def cut(text: str | None) -> str | None:
        return text if text is None or len(text) <= MAX_STEP_CHARS else text[:MAX_STEP_CHARS]
    return step.model_copy(update={"arguments": cut(step.arguments), "result": cut(step.result),
                                   "error": cut(step.error), "documents": ()})
