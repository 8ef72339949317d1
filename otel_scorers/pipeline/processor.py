"""``ScoringSpanProcessor``: judge agent runs live inside the OpenTelemetry SDK pipeline.

This module holds the SDK hooks only. ``on_end`` is the hot path and never blocks or raises:
skip this library's own spans, select, sample, enqueue a reference to the (immutable) span,
return. The worker (:mod:`.worker`) then runs one :class:`~.evaluation.Evaluation` per job on
the library's background loop; the parts are built from arguments and settings in
:mod:`.build`.

Every selected (span, scorer) pair ends in exactly one counted decision (see
:class:`~otel_scorers.emit.names.Decision`); :meth:`ScoringSpanProcessor.stats` shows them.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from opentelemetry._logs import LoggerProvider
from opentelemetry.context import Context
from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter
from opentelemetry.trace import TracerProvider

from otel_scorers import background_loop
from otel_scorers.capture import Captured, CaptureMapping, Extractor, Limits, attribute_dict
from otel_scorers.capture.trace import CONTENT_KEY_SET, TraceBuffer
from otel_scorers.emit import names as n
from otel_scorers.emit.attributes import ContentPolicy
from otel_scorers.emit.enriched import EnrichedExport
from otel_scorers.emit.metrics import ScorerMetrics
from otel_scorers.emit.names import Decision, Reason
from otel_scorers.emit.spans import Emitter
from otel_scorers.pipeline import build
from otel_scorers.pipeline.build import ScorerSpec, Slot
from otel_scorers.pipeline.cache import ResultCache
from otel_scorers.pipeline.counts import DecisionCounts
from otel_scorers.pipeline.evaluation import Evaluation, Job
from otel_scorers.pipeline.sampling import Sampling
from otel_scorers.pipeline.selection import Selection, Selector
from otel_scorers.pipeline.worker import Worker
from otel_scorers.scorers.base import Scorer
from otel_scorers.scorers.result import ScoreResult
from otel_scorers.scorers.rubric import RubricLike

__all__ = ["ScorerSpec", "ScoringSpanProcessor"]

logger = logging.getLogger(__name__)

ContentMode = Literal["full", "truncate", "none"]


class ScoringSpanProcessor(SpanProcessor):
    """Scores selected spans in the background and emits the results as OTel telemetry.

    Arguments (all keyword-only but ``scorers``):

    - ``scorers``: scorer objects (or :class:`ScorerSpec` with their own sampling).
    - ``selection`` / ``sampling``: which spans, and which share of them (defaults: agent-run
      conventions, every trace).
    - ``capture``: a :class:`CaptureMapping` of your own attribute names, or a callable that
      reads a run from a span. ``rubrics``: rubric per agent name (``"*"`` for any agent) for
      rubric scorers without static criteria; an ``otel_scorers.rubric`` span attribute wins.
    - ``exporter``: enables enriched export (see :mod:`otel_scorers.emit.enriched`).
    - ``tracer_provider`` / ``meter_provider`` / ``logger_provider``: where evaluation spans,
      metrics and events go (default: the global providers).
    - ``evaluation_spans`` / ``events``: switch those outputs off; ``reasons`` = ``full``,
      ``truncate`` (``max_reason_chars`` each) or ``none`` for content-free telemetry.
    - ``queue_size``, ``concurrency``, ``cache_ttl_s``, ``evaluation_timeout_s``,
      ``hold_timeout_s``, ``max_held``, ``shutdown_timeout_s``, ``assemble_from_trace``.
    """

    def __init__(
        self,
        scorers: Sequence[Scorer | ScorerSpec] | None = None,
        *,
        selection: Selection | None = None,
        sampling: Sampling | None = None,
        capture: CaptureMapping | Extractor | None = None,
        rubrics: Mapping[str, RubricLike] | None = None,
        exporter: SpanExporter | None = None,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        logger_provider: LoggerProvider | None = None,
        evaluation_spans: bool | None = None,
        events: bool | None = None,
        reasons: ContentMode | None = None,
        max_reason_chars: int | None = None,
        queue_size: int | None = None,
        concurrency: int | None = None,
        cache_ttl_s: float | None = None,
        cache_size: int | None = None,
        evaluation_timeout_s: float | None = None,
        hold_timeout_s: float | None = None,
        max_held: int | None = None,
        shutdown_timeout_s: float | None = None,
        assemble_from_trace: bool | None = None,
        capture_limits: Limits | None = None,
        config: str | Path | None = None,
    ) -> None:
        settings = build.resolve_settings({
            "evaluation_spans": evaluation_spans, "events": events, "reasons": reasons,
            "max_reason_chars": max_reason_chars, "queue_size": queue_size,
            "concurrency": concurrency, "cache_ttl_s": cache_ttl_s, "cache_size": cache_size,
            "evaluation_timeout_s": evaluation_timeout_s, "hold_timeout_s": hold_timeout_s,
            "max_held": max_held, "shutdown_timeout_s": shutdown_timeout_s,
            "assemble_from_trace": assemble_from_trace}, config)
        self.settings = settings
        self._slots = build.build_slots(
            scorers if scorers is not None else build.scorers_from(settings),
            sampling or build.sampling_from(settings.sampling))
        self._names = tuple(slot.name for slot in self._slots)
        self._selector = Selector(selection or build.selection_from(settings.selection))
        mapping, extractor = build.capture_from(settings, capture)
        self._buffer = TraceBuffer() if settings.assemble_from_trace else None
        self.counts = DecisionCounts()
        metrics = ScorerMetrics(
            meter_provider, decisions=self.counts.observe,
            queue_depth=lambda: self._worker.depth,
            held_spans=(lambda: len(self._enriched or ())) if exporter is not None else None,
            buffer_dropped=self._buffer.dropped.copy if self._buffer is not None else None)
        self._enriched = (EnrichedExport(exporter, hold_timeout_s=settings.hold_timeout_s,
                                         max_held=settings.max_held,
                                         on_unscored=metrics.unscored)
                          if exporter is not None else None)
        policy = ContentPolicy(settings.reasons, settings.max_reason_chars)
        self._evaluation = Evaluation(
            counts=self.counts, metrics=metrics, policy=policy,
            emitter=Emitter(tracer_provider=tracer_provider, logger_provider=logger_provider,
                            policy=policy, spans=settings.evaluation_spans,
                            events=settings.events),
            cache=ResultCache(settings.cache_ttl_s, settings.cache_size),
            timeout_s=settings.evaluation_timeout_s, log_once=self._log_once,
            mapping=mapping, extractor=extractor, limits=capture_limits or Limits(),
            rubrics=build.rubrics_from(settings, rubrics), buffer=self._buffer,
            enriched=self._enriched)
        self._worker: Worker[Job] = Worker(self._evaluation.run, queue_size=settings.queue_size,
                                           concurrency=settings.concurrency,
                                           periodic=self._periodic)
        self._shutdown = False
        self._shutdown_lock = threading.Lock()
        self._errors_logged: set[str] = set()
        if hasattr(os, "register_at_fork"):
            ref = weakref.ref(self)
            os.register_at_fork(after_in_child=lambda: _after_fork(ref))
        background_loop.before_exit(self.shutdown)

    @property
    def scorers(self) -> tuple[Scorer, ...]:
        return tuple(slot.scorer for slot in self._slots)

    @property
    def queue_depth(self) -> int:
        """Runs waiting for a free evaluation slot."""
        return self._worker.depth

    def stats(self) -> dict[str, dict[str, int]]:
        """Decision totals per scorer: why each selected run was, or was not, scored."""
        return {slot.name: self.counts.totals(slot.name) for slot in self._slots}

    # -- the hot path -----------------------------------------------------------------------
    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return

    def on_end(self, span: ReadableSpan) -> None:
        try:
            attrs = attribute_dict(span)
            if self._selector.could_match(attrs) or not CONTENT_KEY_SET.isdisjoint(attrs):
                self._admit(span, attrs)
            else:
                # The common case: a span that cannot be selected and carries no content is
                # only a parent link for trace assembly. This library's own spans take this
                # path too, harmlessly (nothing selects or buffers them here).
                buffer = self._buffer
                if buffer is not None and buffer.traces:
                    context = span.context
                    if context is not None and context.trace_id in buffer.traces:
                        buffer.observe(span, None)
                self._forward(span)
        except Exception:
            self._log_once("on_end", "otel-scorers could not process a span; it was passed on "
                                     "unscored")
            self._forward(span)

    def _admit(self, span: ReadableSpan, attrs: Mapping[str, Any]) -> None:
        """A span that may be a run or carries content: buffer, select, sample, enqueue."""
        if _is_own(span):
            self._forward(span)
            return
        buffer = self._buffer
        selected = not self._shutdown and self._selector.matches(span, attrs)
        if buffer is not None and (buffer.traces or not CONTENT_KEY_SET.isdisjoint(attrs)):
            buffer.observe(span, attrs, keep_content=not selected)
        chosen = self._sample(span) if selected else ()
        if not chosen:
            self._forward(span)
            return
        enriched = self._enriched
        held = enriched is not None and enriched.hold(span, len(chosen))
        if self._worker.submit(Job(span, chosen)):
            return
        for slot in chosen:
            self.counts.add(slot.name, Decision.DROPPED, Reason.QUEUE_FULL)
        self._log_once("queue_full", "otel-scorers queue is full: runs are dropped unscored "
                                     "(see the dropped decisions; raise queue_size or "
                                     "concurrency, or sample less)")
        if held and enriched is not None and span.context is not None:
            enriched.release(span.context.span_id)

    def _sample(self, span: ReadableSpan) -> tuple[Slot, ...]:
        """The scorers that will judge a selected span; the others' decisions are counted."""
        chosen: list[Slot] = []
        decisions: list[tuple[str, str]] = []
        for slot in self._slots:
            sampler = slot.sampler
            if not sampler.sampled(span):
                decisions.append((slot.name, Decision.SAMPLED_OUT))
            elif sampler.limiter is not None and not sampler.limiter.allow():
                decisions.append((slot.name, Decision.RATE_LIMITED))
            else:
                chosen.append(slot)
        self.counts.select(self._names, decisions)
        return tuple(chosen)

    def _forward(self, span: ReadableSpan) -> None:
        """Pass a span that is not waiting for scores on to enriched export, if enabled."""
        if self._enriched is not None:
            self._enriched.forward(span)

    # -- direct use (offline re-scoring) ----------------------------------------------------
    def selects(self, span: ReadableSpan) -> bool:
        """Whether ``span`` is an agent run this processor would consider (selection only:
        no sampling, nothing counted). This library's own evaluation spans never are."""
        return not _is_own(span) and self._selector.matches(span, attribute_dict(span))

    async def evaluate(self, span: ReadableSpan, *,
                       descendants: Sequence[ReadableSpan] | None = None) -> list[ScoreResult]:
        """Capture and judge ``span`` with every scorer now, bypassing sampling and the queue
        (the decisions are counted and results emitted as for live runs). ``descendants`` are
        the content spans under it, when its own attributes lack the conversation.

        Returns the results in scorer order; an empty list when nothing could be captured
        (the ``filtered`` decision says why). Runs on the library's background loop.
        """
        self.counts.select(self._names, [])
        return await background_loop.on_loop(
            self._evaluation.run(Job(span, self._slots), descendants=descendants))

    def capture(self, span: ReadableSpan, *,
                descendants: Sequence[ReadableSpan] | None = None) -> Captured:
        """The run this processor would judge for ``span`` (no judge call, nothing counted)."""
        return self._evaluation.capture(span, descendants=descendants)

    def agent_of(self, span: ReadableSpan) -> str | None:
        """The agent name of ``span`` as capture reads it (the mapping's key first)."""
        return self._evaluation.agent_of(span)

    # -- housekeeping ---------------------------------------------------------------------
    def _periodic(self) -> None:
        if self._buffer is not None:
            self._buffer.sweep()
        if self._enriched is not None:
            self._enriched.sweep()

    def _log_once(self, key: str, message: str) -> None:
        if key in self._errors_logged:
            return
        self._errors_logged.add(key)
        logger.warning(message, exc_info=key in ("on_end", "capture") or key.startswith("score:"))

    # -- flush and shutdown ---------------------------------------------------------------
    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Wait for queued evaluations (and export enriched spans) within the timeout."""
        deadline = time.monotonic() + timeout_millis / 1000.0
        done = self._worker.flush(max(0.0, deadline - time.monotonic()))
        if self._enriched is not None:
            remaining_ms = max(0, int((deadline - time.monotonic()) * 1000))
            done = self._enriched.force_flush(remaining_ms) and done
        return done

    def shutdown(self) -> None:
        """Stop taking spans, drain queued evaluations (bounded), export everything held."""
        with self._shutdown_lock:
            if self._shutdown:
                return
            self._shutdown = True
        abandoned = self._worker.stop(self.settings.shutdown_timeout_s)
        for job in abandoned:
            for slot in job.slots:
                self.counts.add(slot.name, Decision.DROPPED, Reason.SHUTDOWN)
        if self._enriched is not None:
            self._enriched.release_all(Reason.SHUTDOWN)
            self._enriched.shutdown()

    def _after_fork(self) -> None:
        self._worker.reset_after_fork()


def _is_own(span: ReadableSpan) -> bool:
    """Spans this library emitted (evaluation spans): never selected, never buffered."""
    scope = span.instrumentation_scope
    return scope is not None and scope.name == n.SCOPE_NAME


def _after_fork(ref: weakref.ReferenceType[ScoringSpanProcessor]) -> None:
    processor = ref()
    if processor is not None:
        processor._after_fork()
