"""Judging on demand, beside the SDK hooks: what offline re-scoring needs.

``rescore`` (and anyone judging spans that did not end in this process) asks a processor's
:attr:`~otel_scorers.pipeline.ScoringSpanProcessor.on_demand` whether a span is selected, what
it would capture, and to judge it now, bypassing sampling and the queue, with the same capture,
scorers, cache, budget and emission as live runs (and the same for whole sessions).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from otel_scorers import background_loop
from otel_scorers.capture import Captured, attribute_dict
from otel_scorers.capture.pieces import Piece
from otel_scorers.capture.sessions import (
    DEFAULT_SESSION_KEYS,
    scope_of,
    scoped_key,
    session_key,
)
from otel_scorers.pipeline.counts import DecisionCounts
from otel_scorers.pipeline.evaluation import Evaluation, Job
from otel_scorers.pipeline.selection import Selector, is_llm_call, is_own
from otel_scorers.pipeline.sessions import SessionJob, SessionLane, StoredTurn
from otel_scorers.pipeline.slots import Slot
from otel_scorers.scorers.result import ScoreResult

__all__ = ["OnDemand"]


class OnDemand:
    """Selection, capture and judging of one span (or session) now, by a processor's parts."""

    def __init__(self, *, selector: Selector, slots: tuple[Slot, ...], evaluation: Evaluation,
                 counts: DecisionCounts, sessions: SessionLane | None) -> None:
        self._selector, self._slots, self._evaluation = selector, slots, evaluation
        self._counts, self._sessions = counts, sessions

    def selects(self, span: ReadableSpan) -> bool:
        """Whether ``span`` is a candidate this processor would consider (selection only:
        no sampling, nothing counted). This library's own evaluation spans never are."""
        return self.candidate_kind(span) is not None

    def candidate_kind(self, span: ReadableSpan) -> str | None:
        """What ``span`` is a candidate as (``agent``, ``chain``, ``llm``), or ``None``."""
        if is_own(span):
            return None
        return self._selector.kind_of(span, attribute_dict(span))

    def is_agent_span(self, span: ReadableSpan) -> bool:
        """Whether ``span`` is selected as an agent run (not as an LLM call): the spans that
        own the LLM calls under them when runs are assembled per agent."""
        return self.selects(span) and not is_llm_call(attribute_dict(span))

    @property
    def per_agent(self) -> bool:
        """Whether every agent span is judged on its own (else each interaction once)."""
        return self._selector.selection.per_agent

    def keeps(self, agents: set[str]) -> bool:
        """Whether an interaction of ``agents`` passes the ``agents`` selection."""
        return self._selector.keeps(agents)

    async def evaluate(self, span: ReadableSpan, *,
                       descendants: Sequence[ReadableSpan | Piece] | None = None,
                       nested: int = 0, scorers: Sequence[str] | None = None,
                       agent: str | None = None,
                       links: Mapping[int, int | None] | None = None) -> list[ScoreResult]:
        """Capture and judge ``span`` with every scorer now, bypassing sampling and the queue
        (the decisions are counted and results emitted as for live runs). ``descendants`` are
        the content under it (spans or pieces), when its own attributes lack the
        conversation (``links``: their trace's child -> parent span ids, naming the agent of
        each step); ``nested`` counts content under it that nested agent spans own;
        ``scorers`` (names) limits the judging to some of the scorers; ``agent`` names the
        interaction's agent when its span does not.

        Returns the results in scorer order; an empty list when nothing could be captured
        (the ``filtered`` decision says why). Runs on the library's background loop.
        """
        slots = self._slots if scorers is None else tuple(
            slot for slot in self._slots if slot.name in scorers)
        self._counts.select(tuple(slot.name for slot in slots), [])
        return await background_loop.on_loop(
            self._evaluation.run(Job(span, slots, agent=agent), descendants=descendants or [],
                                 nested=nested, links=links))

    def capture(self, span: ReadableSpan, *,
                descendants: Sequence[ReadableSpan | Piece] | None = None,
                nested: int = 0, agent: str | None = None, steps: bool | None = None,
                links: Mapping[int, int | None] | None = None) -> Captured:
        """The run this processor would judge for ``span`` (no judge call, nothing counted);
        ``steps=True`` captures what the agent did even when no scorer reads it."""
        return self._evaluation.reader.capture(span, descendants=descendants, nested=nested,
                                               agent=agent, steps=steps, links=links)

    def agent_of(self, span: ReadableSpan) -> str | None:
        """The agent name of ``span`` as capture reads it (the mapping's key first)."""
        return self._evaluation.reader.agent_of(span)

    # -- sessions -------------------------------------------------------------------------
    @property
    def session_scorers(self) -> tuple[str, ...]:
        """The names of the session scorers (empty: none)."""
        return tuple(slot.name for slot in self._sessions.slots) if self._sessions else ()

    @property
    def sessions(self) -> SessionLane | None:
        """The session lane: its scorers, the store and its policy (``None``: no session
        scorer)."""
        return self._sessions

    def session_key_of(self, attributes: Sequence[Mapping[str, Any]],
                       resource: Mapping[str, Any] | None = None) -> str | None:
        """The session key an interaction's spans carry (their attributes, the root's
        first), scoped by their ``resource``, as live scoring reads it."""
        if self._sessions is None:
            return session_key(attributes, DEFAULT_SESSION_KEYS)
        key = session_key(attributes, self._sessions.key_attributes)
        return scoped_key(key, scope_of(resource, self._sessions.scope_attributes))

    def session_turn(self, run: Any, span: ReadableSpan, agent: str | None
                     ) -> tuple[StoredTurn, Any]:
        """A captured run as the turn a session keeps, and the rubric configured for its
        agent (session scorers only)."""
        assert self._sessions is not None
        return (self._sessions.turn_of(run, span, agent),
                self._evaluation.reader.rubric_for_agent(agent))

    async def evaluate_session(self, session: SessionJob) -> list[ScoreResult]:
        """Judge a whole session now with the session scorers it names (counted and emitted
        as live; no sampling, no rate limit)."""
        assert self._sessions is not None
        self._counts.select(tuple(slot.name for slot in session.slots), [])
        return await background_loop.on_loop(self._sessions.judge(session))
