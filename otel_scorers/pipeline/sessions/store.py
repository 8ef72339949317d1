"""The session store: the turns of each conversation held until it goes idle.

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
- ``max_sessions`` held at once, and ``max_bytes`` of turns held in all: the least recently
  active session makes room (judged at once
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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from otel_scorers.capture.sessions import conversation_of
from otel_scorers.config.settings import SessionSettings
from otel_scorers.names import Reason
from otel_scorers.scorers.turns import Turn

__all__ = ["OpenSession", "SessionPolicy", "SessionStore", "StoredTurn", "eviction_backlog"]

#: The store's policy: where session keys are read, its timings and bounds (the
#: ``sessions.*`` settings; docs/configuration.md).
SessionPolicy = SessionSettings


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
        self._lock = threading.Lock()
        self._empty()

    def _empty(self) -> None:
        #: sessions with turns not judged yet, least recently active first
        self._active: OrderedDict[str, OpenSession] = OrderedDict()
        #: sessions all judged (kept for a resume), least recently active first
        self._resting: OrderedDict[str, OpenSession] = OrderedDict()
        #: sessions being judged now
        self._judging: dict[str, OpenSession] = {}
        #: sessions that made room for others with turns not judged yet: judged next
        self._evicted: list[OpenSession] = []
        #: the size of every turn held (all sessions): bounded by ``max_bytes``
        self.bytes = 0

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
                session = OpenSession(key, slots)
            elif not judging:  # moved to the end: the most recently active
                self._active.pop(key, None)
                self._resting.pop(key, None)
            self._make_room(turn.size, new=len(session.turns) == 0)
            starts = [t.start_ns for t in session.turns]
            session.turns.insert(bisect.bisect_right(starts, turn.start_ns), turn)
            session.chars += turn.size
            self.bytes += turn.size
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
            self.bytes -= gone.size
            session.dropped += 1
            self._count_dropped(reason, 1)

    def _make_room(self, size: int, *, new: bool) -> None:
        """Room for a turn of ``size`` (of a ``new`` session): past ``max_sessions`` or
        ``max_bytes`` the least recently active sessions make room, resting ones first (their
        turns all judged: forgotten), then active ones (judged at once, at most
        :func:`eviction_backlog` of them waiting, the rest forgotten with their turns
        counted). The session the turn is for is never one of them. ``bytes`` counts the
        sessions held; the few waiting to be judged after making room (each at most
        ``max_chars``) come on top until the next periodic pass takes them."""
        # (evicted sessions wait for the next periodic pass, at most a fraction of a second)
        policy = self.policy
        while (new and len(self) >= policy.max_sessions) or (
                self.bytes + size > policy.max_bytes):
            if self._resting:
                _, session = self._resting.popitem(last=False)
                self.bytes -= session.chars
                self._count_evicted(False)
            elif self._active:
                _, session = self._active.popitem(last=False)
                self.bytes -= session.chars  # judged next, or forgotten: not held
                if len(self._evicted) < eviction_backlog(policy):
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
                self.bytes -= session.chars
            return out

    def take(self, key: str | None = None, trigger: str = "requested"
             ) -> list[tuple[OpenSession, str]]:
        """Sessions with turns not judged yet, now (``key``: only that one, by its scoped key
        or its conversation id: every service's session of that id)."""
        def chosen(name: str) -> bool:
            return key is None or name == key or conversation_of(name)[1] == key
        with self._lock:
            out = [(session, "evicted") for session in self._evicted if chosen(session.key)]
            self._evicted = [s for s in self._evicted if not chosen(s.key)]
            for name in [name for name in self._active if chosen(name)]:
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

    def clear(self, reason: str) -> None:
        """Let go of every session (the processor stopped; see
        :meth:`~otel_scorers.capture.trace.TraceBuffer.clear`): turns not judged yet of a
        session no evaluation holds are counted as dropped for ``reason`` (one being judged
        was counted with its job)."""
        with self._lock:
            for session in (*self._active.values(), *self._evicted):
                if session.pending:
                    self._count_dropped(reason, session.pending)
            self._empty()

    def open_count(self) -> int:
        """Sessions with turns not judged yet."""
        return len(self._active) + len(self._evicted) + len(self._judging)
