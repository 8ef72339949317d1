"""Evaluation spans and ``gen_ai.evaluation.result`` log events.

An ended span cannot be changed, so each scorer's result becomes a new span, a child of the
evaluated span (``gen_ai.evaluation <scorer>``), and a log event carrying the evaluated span's
trace and span ids. Both come from this library's instrumentation scope, which the processor
never selects.

Two more kinds of span give an alert something to link to where no evaluation exists: a
selected run a scorer did not judge (queue full, budget spent) gets an
``otel_scorers.unjudged <scorer>`` child span, sampled in time (one per scorer and decision
every :data:`~otel_scorers.names.UNJUDGED_MARK_INTERVAL_S`: an overload must not double the
export load it is part of); and each judge canary verdict is an ``otel_scorers.canary
<scorer>`` span of a trace of its own, with its case, label, verdict and the judge's reasons.
Neither carries ``gen_ai.evaluation.name``: nothing that reads evaluations counts them.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace
from opentelemetry._logs import LoggerProvider, get_logger
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import NonRecordingSpan, SpanContext, Status, StatusCode, TracerProvider

from otel_scorers import names as n
from otel_scorers._version import __version__
from otel_scorers.emit.attributes import (
    ContentPolicy,
    fit_attributes,
    result_attributes,
    semconv_attributes,
)
from otel_scorers.scorers.result import ScoreResult

__all__ = ["Emitter", "Subject"]


@dataclass(frozen=True)
class Subject:
    """What a result is about: the evaluated span's context and name (an interaction's span,
    or, for a whole session, its last turn's), and whether the span is held for enriched
    export until its scores are in."""

    context: SpanContext
    name: str
    held: bool = False

    @classmethod
    def of(cls, span: ReadableSpan, *, held: bool = False) -> Subject | None:
        """The subject of an ended span (``None`` for a span without a context)."""
        return None if span.context is None else cls(span.context, span.name, held)


class Emitter:
    """Writes evaluation spans and events for results about evaluated spans."""

    def __init__(self, *, tracer_provider: TracerProvider | None = None,
                 logger_provider: LoggerProvider | None = None, policy: ContentPolicy,
                 spans: bool = True, events: bool = True) -> None:
        self.policy = policy
        self.spans = spans
        self.events = events
        self._tracer_provider = tracer_provider
        self._logger_provider = logger_provider
        self._tracer: trace.Tracer | None = None
        #: (scorer, decision) -> when its last unjudged marker went out (monotonic seconds)
        self._marked: dict[tuple[str, str], float] = {}

    def _get_tracer(self) -> trace.Tracer:
        if self._tracer is None:  # resolved late: the global provider may be set after us
            self._tracer = trace.get_tracer(n.SCOPE_NAME, __version__,
                                            tracer_provider=self._tracer_provider)
        return self._tracer

    def emit(self, subject: Subject, result: ScoreResult, *, agent: str | None,
             source: str | None, start_ns: int, end_ns: int,
             extra: Mapping[str, Any] | None = None) -> None:
        """The evaluation span and event of ``result`` about ``subject``; ``extra``:
        attributes both carry (a session evaluation's key and turns)."""
        parent = trace.set_span_in_context(NonRecordingSpan(subject.context), Context())
        semconv = semconv_attributes(result, self.policy)
        if self.spans:
            attrs = {**semconv, n.GEN_AI_OPERATION_NAME: n.EVALUATION_OPERATION,
                     **result_attributes(result, n.PREFIX, self.policy)}
            attrs[n.PREFIX + n.ATTR_EVALUATED_SPAN_ID] = f"{subject.context.span_id:016x}"
            attrs[n.PREFIX + n.ATTR_EVALUATED_SPAN_NAME] = subject.name
            if agent is not None:
                attrs[n.PREFIX + n.ATTR_AGENT_NAME] = agent
                attrs[n.GEN_AI_AGENT_NAME] = agent
            if source is not None:
                attrs[n.PREFIX + n.ATTR_CAPTURE_SOURCE] = source
            if extra:
                attrs.update(extra)
            tracer = self._get_tracer()
            span = tracer.start_span(
                f"{n.EVALUATION_SPAN_PREFIX} {result.scorer}", context=parent,
                attributes=fit_attributes(attrs, _attribute_limit(tracer)),
                start_time=start_ns)
            if result.error is not None:
                span.set_status(Status(StatusCode.ERROR, result.error.type))
            span.end(end_time=max(end_ns, start_ns))
        if self.events:
            event_attrs = dict(semconv)
            if result.score is not None:
                event_attrs[n.PREFIX + n.ATTR_SCORE_NORMALIZED] = result.score / result.scale
            if result.passed is not None:
                event_attrs[n.PREFIX + n.ATTR_PASS] = result.passed
            evaluator = result.evaluator
            if evaluator is not None:  # which evaluator: never averaged with another
                event_attrs[n.PREFIX + n.ATTR_EVALUATOR_FINGERPRINT] = evaluator.fingerprint
                event_attrs[n.PREFIX + n.ATTR_SCORE_MIN] = evaluator.score_min
                event_attrs[n.PREFIX + n.ATTR_SCALE] = evaluator.score_max
                if evaluator.judge_model is not None:
                    event_attrs[n.PREFIX + n.ATTR_JUDGE_MODEL] = evaluator.judge_model
            if agent is not None:
                event_attrs[n.GEN_AI_AGENT_NAME] = agent
            if extra:
                event_attrs.update(extra)
            logger = get_logger(n.SCOPE_NAME, __version__, logger_provider=self._logger_provider)
            logger.emit(event_name=n.GEN_AI_EVALUATION_RESULT_EVENT, context=parent,
                        timestamp=end_ns, attributes=event_attrs)


    def due(self, scorer: str, decision: str) -> bool:
        """Whether an unjudged marker of ``scorer`` and ``decision`` goes out now (taken if
        so): none without evaluation spans, else one per
        :data:`~otel_scorers.names.UNJUDGED_MARK_INTERVAL_S`. Asked before anything of the
        run is read: a run dropped in an overload costs a clock read and a dict lookup."""
        if not self.spans:
            return False
        now = time.monotonic()
        key = (scorer, decision)
        last = self._marked.get(key)
        if last is not None and now - last < n.UNJUDGED_MARK_INTERVAL_S:
            return False
        self._marked[key] = now  # (two threads at once: at worst two markers)
        return True

    def unjudged(self, subject: Subject, scorer: str, decision: str, reason: str | None,
                 *, agent: str | None = None) -> None:
        """The marker span on ``subject``: ``scorer`` did not judge it (``decision``,
        ``reason``); its callers ask :meth:`due` first."""
        attrs: dict[str, Any] = {n.PREFIX + n.ATTR_SCORER: scorer,
                                 n.PREFIX + n.ATTR_DECISION: decision,
                                 n.PREFIX + n.ATTR_EVALUATED_SPAN_ID:
                                     f"{subject.context.span_id:016x}",
                                 n.PREFIX + n.ATTR_EVALUATED_SPAN_NAME: subject.name}
        if reason is not None:
            attrs[n.PREFIX + n.ATTR_DECISION_REASON] = reason
        if agent is not None:
            attrs[n.GEN_AI_AGENT_NAME] = agent
        parent = trace.set_span_in_context(NonRecordingSpan(subject.context), Context())
        self._get_tracer().start_span(f"{n.UNJUDGED_SPAN_PREFIX} {scorer}", context=parent,
                                      attributes=attrs).end()

    def canary(self, result: ScoreResult, *, case: str, expected: str, judged: str,
               start_ns: int) -> None:
        """The span of one judge canary verdict: ``case`` (its id), labelled ``expected``,
        judged ``judged`` (``pass``, ``fail`` or ``error``), with the judge's result as an
        evaluation span carries it (its reasons as the content policy allows)."""
        if not self.spans:
            return
        attrs = {**result_attributes(result, n.PREFIX, self.policy),
                 n.PREFIX + n.ATTR_SCORER: result.scorer,
                 n.PREFIX + n.ATTR_CANARY_CASE: case,
                 n.PREFIX + n.ATTR_CANARY_EXPECTED: expected,
                 n.PREFIX + n.ATTR_CANARY_JUDGED: judged,
                 n.PREFIX + n.ATTR_CANARY_AGREES: expected == judged}
        tracer = self._get_tracer()
        span = tracer.start_span(f"{n.CANARY_SPAN_PREFIX} {result.scorer}", context=Context(),
                                 attributes=fit_attributes(attrs, _attribute_limit(tracer)),
                                 start_time=start_ns)
        if result.error is not None:
            span.set_status(Status(StatusCode.ERROR, result.error.type))
        span.end()


def _attribute_limit(tracer: trace.Tracer) -> int | None:
    """The span attribute limit of an SDK tracer (``OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT``, 128 by
    default); ``None`` when unlimited. A tracer that is not the SDK's gets the default."""
    limits = getattr(tracer, "_span_limits", None)
    if limits is None:
        return 128
    value = getattr(limits, "max_span_attributes", 128)
    return value if isinstance(value, int) else None
