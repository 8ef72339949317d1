"""Sessions in exported files: the interactions that carry a session key, collected as the
turns of their conversations while the files are read, and judged once every file is read.

A re-score has no idle time (the file is the whole record): every session is judged once, at
the end, whole. The live bounds apply (``sessions.max_turns``, ``max_chars``, ``max_sessions``):
a session that has to make room for others is judged at once, with the turns read so far, and a
later turn of it starts it afresh (the result lines say which turns each judgement covers).
"""

from __future__ import annotations

import math

from otel_scorers.pipeline.processor import ScoringSpanProcessor
from otel_scorers.pipeline.sessions import SessionJob, SessionStore
from otel_scorers.pipeline.sessions.lane import job_of
from otel_scorers.rescore.runs import RunRef
from otel_scorers.scorers.run import ScorerRun

__all__ = ["FileSessions"]


class FileSessions:
    """The sessions of the runs read from files, for one processor's session scorers."""

    def __init__(self, processor: ScoringSpanProcessor) -> None:
        self.on_demand = processor.on_demand
        sessions = self.on_demand.sessions
        assert sessions is not None
        self.slots = sessions.slots
        self.names = tuple(slot.name for slot in self.slots)
        self.dropped_turns = 0
        self.evicted = 0
        self.store = SessionStore(
            sessions.store.policy.model_copy(update={"idle_s": math.inf, "keep_s": math.inf}),
            count_dropped=self._dropped, count_evicted=self._evicted)

    def _dropped(self, _reason: str, count: int) -> None:
        self.dropped_turns += count

    def _evicted(self, _judged: bool) -> None:
        self.evicted += 1

    def add(self, ref: RunRef, run: ScorerRun, agent: str | None) -> None:
        """The captured run of ``ref`` (an interaction of session ``ref.session``)."""
        assert ref.session is not None
        turn, rubric = self.on_demand.session_turn(run, ref.span, agent)
        self.store.add(ref.session, self.names, turn, system=run.system_prompt, agent=agent,
                       rubric=rubric)

    def unread(self, ref: RunRef) -> None:
        if ref.session is not None:
            self.store.unread(ref.session)

    def due(self, *, final: bool = False) -> list[SessionJob]:
        """The sessions to judge now: those that made room for others; at the end, all."""
        taken = self.store.take(trigger="rescore") if final else self.store.due()
        jobs = []
        for session, trigger in taken:
            if session.turns:
                jobs.append(job_of(session, self.slots, trigger))
            self.store.finished(session.key, session.count)
        return jobs
