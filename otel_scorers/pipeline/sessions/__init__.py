"""Sessions, in their own lane: turns of each conversation kept live (:mod:`.store`), whole
sessions judged when idle, asked for, or at exit (:mod:`.lane`), and a gateway fleet's turns sent
to the gateway judging their session (:mod:`.forward`).

Each interaction that carries a session key (:mod:`otel_scorers.capture.sessions`) and belongs
to a sampled session becomes a *turn* of it once captured (its question, its answer, the agent;
its steps when a session scorer reads them). A session is judged, by every session scorer that
sampled it, when no turn has come for ``sessions.idle_s``, on an explicit
:meth:`~otel_scorers.pipeline.ScoringSpanProcessor.score_sessions`, and at exit (within
``exit_timeout_s``). A session that resumes after it was judged is judged again, whole; the
result says which turns it covers and how many are new.
"""

from otel_scorers.pipeline.sessions.forward import TurnForwarder
from otel_scorers.pipeline.sessions.lane import SessionJob, SessionLane
from otel_scorers.pipeline.sessions.store import (
    OpenSession,
    SessionPolicy,
    SessionStore,
    StoredTurn,
)

__all__ = ["OpenSession", "SessionJob", "SessionLane", "SessionPolicy", "SessionStore",
           "StoredTurn", "TurnForwarder"]
