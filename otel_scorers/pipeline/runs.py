"""Runs read from spans for the evaluation: capture with what the processor buffered, the
rubric configured for the run's agent, and the one line that says why a run was not scored.

Capture itself is :mod:`otel_scorers.capture` (pure); this is the processor's use of it: the
pieces and log records buffered under a span (:class:`~otel_scorers.capture.trace.TraceBuffer`),
per-agent ownership, the user's mapping or extractor, the bounds, whether steps are read.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

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
from otel_scorers.names import Reason
from otel_scorers.scorers.criteria import RubricLike

__all__ = ["RunReader"]

logger = logging.getLogger(__name__)


@dataclass
class RunReader:
    """How the processor reads a run from a span (see the module docstring)."""

    log_once: Callable[[str, str], None]
    mapping: CaptureMapping | None = None
    extractor: Extractor | None = None
    limits: Limits = field(default_factory=Limits)
    rubrics: Mapping[str, RubricLike] | None = None
    buffer: TraceBuffer | None = None
    assemble: bool = True
    #: Per-agent evaluation: a run owns only the pieces no nested agent span owns.
    per_agent: bool = False
    #: A scorer reads the steps (``ScorerRun.steps``): capture them.
    steps: bool = False

    def capture(self, span: ReadableSpan, *, attributes: Mapping[str, Any] | None = None,
                descendants: Sequence[ReadableSpan | Piece] | None = None,
                nested: int = 0, agent: str | None = None, steps: bool | None = None,
                links: Mapping[int, int | None] | None = None) -> Captured:
        """The run to judge for ``span`` (no judge call, nothing counted). Without
        ``descendants``, what is buffered under it (spans and log records) is used; with them,
        ``links`` (child -> parent span ids of their trace) tell the steps their agents;
        ``nested`` counts content under it that nested agent spans own (per-agent);
        ``steps`` (default: when a scorer reads them) captures what the agent did."""
        records: Sequence[Any] = ()
        pieces: Sequence[Any] = list(descendants or ())
        links = dict(links or {})
        cut = None
        if descendants is None and self.buffer is not None:
            records = self.buffer.records_of(span)
            if self.assemble:
                pieces, nested = self.buffer.pieces_under(span, nested_own=not self.per_agent)
                links = self.buffer.links(span)
                cut = self.buffer.cut_of(span)  # a long trace's middle, counted
        agent = agent_name(span, self.mapping, attributes=attributes) or agent
        return capture_span(span, attributes=attributes, mapping=self.mapping,
                            extractor=self.extractor, limits=self.limits, descendants=pieces,
                            records=records, nested=nested,
                            rubric=self.rubric_for_agent(agent or self.agent_of(span)),
                            agent=agent, links=links, cut=cut,
                            steps=self.steps if steps is None else steps)

    def capture_safely(self, span: ReadableSpan, **kwargs: Any) -> Captured:
        """:meth:`capture`, with a bug in it an ``internal`` reason (logged once, with its
        traceback) instead of an exception."""
        try:
            return self.capture(span, **kwargs)
        except Exception:
            self.log_once("capture", "otel-scorers capture failed unexpectedly")
            return Captured(None, reason=Reason.INTERNAL)

    def agent_of(self, span: ReadableSpan) -> str | None:
        """The agent name of ``span`` as capture reads it (the mapping's key first)."""
        return agent_name(span, self.mapping)

    def rubric_for_agent(self, agent: str | None) -> RubricLike | None:
        """The configured rubric of ``agent`` (``"*"``: any agent), or ``None``."""
        if not self.rubrics:
            return None
        chosen: RubricLike | None = self.rubrics.get(agent or "", self.rubrics.get("*"))
        return chosen

    def say_why(self, span: ReadableSpan, captured: Captured,
                attributes: Mapping[str, Any] | None) -> None:
        """One warning per reason and fix, per process: what was not scored, and what to
        change (the instrumentation's content switch, for runs without content)."""
        reason = captured.reason or Reason.NO_CONTENT
        logger.debug("span %s not scored: %s (%s)", span.name, reason, captured.detail)
        if reason in (Reason.NESTED_AGENT, Reason.INTERNAL):
            return  # per-agent evaluation at work; or logged with its traceback already
        if reason == Reason.NO_CONTENT:
            scope = span.instrumentation_scope.name if span.instrumentation_scope else None
            fix = content_fix(scope, attributes if attributes is not None
                              else span.attributes or {})
        elif reason == Reason.UNREADABLE:
            fix = ("keep the content of the framework's LLM calls on (their messages are read "
                   "before its serialized state), or name the attributes holding the question "
                   "and the answer with capture={'input': ..., 'output': ...}")
        else:
            fix = "check what the instrumentation writes (capture_limits bound what is read)"
        self.log_once(f"why:{reason}:{fix}", f"otel-scorers: {span.name!r} was not scored "
                      f"({reason}): {captured.detail}. To fix: {fix}. (Logged once; counted in "
                      "the decisions, reason " + reason + ")")
