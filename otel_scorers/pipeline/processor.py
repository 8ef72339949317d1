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

import asyncio
import logging
import os
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import replace
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
from otel_scorers.capture.logs import content_of
from otel_scorers.capture.trace import CONTENT_KEY_SET, Piece, TraceBuffer
from otel_scorers.emit import names as n
from otel_scorers.emit.attributes import ContentPolicy
from otel_scorers.emit.enriched import EnrichedExport
from otel_scorers.emit.metrics import ScorerMetrics
from otel_scorers.emit.names import Decision, Reason
from otel_scorers.emit.spans import Emitter
from otel_scorers.pipeline import build
from otel_scorers.pipeline.build import ScorerSpec, Slot
from otel_scorers.pipeline.cache import ResultCache
from otel_scorers.pipeline.content import ContentStripper
from otel_scorers.pipeline.counts import DecisionCounts
from otel_scorers.pipeline.deferral import Deferred
from otel_scorers.pipeline.evaluation import Evaluation, Job, unpriced_warning
from otel_scorers.pipeline.logs import ScoringLogProcessor
from otel_scorers.pipeline.sampling import Sampling
from otel_scorers.pipeline.selection import Selection, Selector, is_llm_call
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
        exit_timeout_s: float | None = None,
        assemble_from_trace: bool | None = None,
        exported_content: Literal["keep", "strip"] | None = None,
        log_wait_s: float | None = None,
        max_agents: int | None = None,
        capture_limits: Limits | None = None,
        config: str | Path | None = None,
    ) -> None:
        settings, problems = build.resolve_settings({
            "evaluation_spans": evaluation_spans, "events": events, "reasons": reasons,
            "max_reason_chars": max_reason_chars, "queue_size": queue_size,
            "concurrency": concurrency, "cache_ttl_s": cache_ttl_s, "cache_size": cache_size,
            "evaluation_timeout_s": evaluation_timeout_s, "hold_timeout_s": hold_timeout_s,
            "max_held": max_held, "shutdown_timeout_s": shutdown_timeout_s,
            "exit_timeout_s": exit_timeout_s, "assemble_from_trace": assemble_from_trace,
            "exported_content": exported_content, "log_wait_s": log_wait_s,
            "max_agents": max_agents}, config)
        self.settings = settings
        #: Why scoring is off (bad ``OTEL_SCORERS_*`` variables), or empty.
        self.disabled_because = problems
        if problems:
            logger.error("otel-scorers: scoring is disabled: %s", "; ".join(problems))
            self.on_end = self._forward  # type: ignore[method-assign]
            self.observe_record = _ignore  # type: ignore[method-assign,assignment]
        self._slots = build.build_slots(
            scorers if scorers is not None else build.scorers_from(settings),
            sampling or build.sampling_from(settings.sampling))
        self._names = tuple(slot.name for slot in self._slots)
        self._selector = Selector(selection or build.selection_from(settings.selection))
        mapping, extractor = build.capture_from(settings, capture)
        self._stripper = (ContentStripper(mapping) if settings.exported_content == "strip"
                          else None)
        # The buffer holds content for trace assembly and from log records (created even
        # without assembly: a run's own log records are kept there too).
        self._buffer = TraceBuffer()
        self.counts = DecisionCounts()
        metrics = ScorerMetrics(
            meter_provider, decisions=self.counts.observe,
            queue_depth=lambda: self._worker.depth,
            held_spans=(lambda: len(self._enriched or ())) if exporter is not None else None,
            buffer_dropped=self._buffer.dropped.copy, max_agents=settings.max_agents,
            content_free=settings.reasons == "none")
        self._enriched = (EnrichedExport(exporter, hold_timeout_s=settings.hold_timeout_s,
                                         max_held=settings.max_held,
                                         on_unscored=metrics.unscored)
                          if exporter is not None else None)
        policy = ContentPolicy(settings.reasons, settings.max_reason_chars)
        self._deferred = Deferred(settings.log_wait_s, settings.queue_size)
        self._evaluation = Evaluation(
            counts=self.counts, metrics=metrics, policy=policy,
            emitter=Emitter(tracer_provider=tracer_provider, logger_provider=logger_provider,
                            policy=policy, spans=settings.evaluation_spans,
                            events=settings.events),
            cache=ResultCache(settings.cache_ttl_s, settings.cache_size),
            timeout_s=settings.evaluation_timeout_s, log_once=self._log_once,
            mapping=mapping, extractor=extractor, limits=capture_limits or Limits(),
            rubrics=build.rubrics_from(settings, rubrics), buffer=self._buffer,
            assemble=settings.assemble_from_trace, enriched=self._enriched, defer=self._defer)
        self._worker: Worker[Job] = Worker(self._evaluation.run, queue_size=settings.queue_size,
                                           concurrency=settings.concurrency,
                                           periodic=self._periodic)
        self._log_side: ScoringLogProcessor | None = None
        self._unselected = _Unselected()
        self._shutdown = False
        self._shutdown_lock = threading.Lock()
        self._errors_logged: set[str] = set()
        if hasattr(os, "register_at_fork"):
            ref = weakref.ref(self)
            os.register_at_fork(after_in_child=lambda: _after_fork(ref))
        background_loop.at_main_thread_exit(self._at_exit)
        background_loop.before_exit(self.shutdown)
        if any(slot.sampler.budget is not None and slot.sampler.budget.max_cost is not None
               for slot in self._slots):
            background_loop.submit(self._check_prices())

    async def _check_prices(self) -> None:
        """With a cost budget: warn at start-up about judge models litellm cannot price (off
        the caller's thread: it loads litellm)."""
        for slot in self._slots:
            judge = getattr(slot.scorer, "judge", None)
            budget = slot.sampler.budget
            if judge is None or budget is None or budget.max_cost is None:
                continue
            try:
                priced = await asyncio.to_thread(judge.priced)
            except Exception:
                continue
            if priced is False:
                self._log_once(f"unpriced:{slot.name}",
                               unpriced_warning(slot.name, str(getattr(judge, "model", "?"))))

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

    def log_processor(self) -> ScoringLogProcessor:
        """The log side of this processor, to register on the ``LoggerProvider`` (first, before
        any exporting processor): it reads GenAI content from log records (``EVENT_ONLY``
        instrumentations) and strips it with ``exported_content: strip``.
        :func:`otel_scorers.install` registers both sides."""
        if self._log_side is None:
            self._log_side = ScoringLogProcessor(self)
        return self._log_side

    # -- the hot path -----------------------------------------------------------------------
    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return

    def on_end(self, span: ReadableSpan) -> None:
        try:
            attrs = attribute_dict(span)
            if self._selector.could_match(attrs) or not CONTENT_KEY_SET.isdisjoint(attrs):
                self._admit(span, attrs)
                return
            # The common case: a span that cannot be selected and carries no content the
            # buffer keeps is only a parent link for trace assembly. This library's own spans
            # take this path too, harmlessly (nothing selects or buffers them here).
            buffer = self._buffer
            if buffer.traces:
                context = span.context
                if context is not None and context.trace_id in buffer.traces:
                    buffer.observe(span, None)
            if self._stripper is not None and self._stripper.has_content(attrs):
                self._stripper.strip_span(span, attrs)
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
        # with a log side, a run's content may come later, by time: keep its window
        agent = selected and not is_llm_call(attrs)
        create = agent and self._log_side is not None
        if create or buffer.traces or not CONTENT_KEY_SET.isdisjoint(attrs):
            buffer.observe(span, attrs, keep_content=not selected, agent=agent, create=create)
        if self._stripper is not None and self._stripper.has_content(attrs):
            self._stripper.strip_span(span, attrs)  # attrs itself stays whole for capture
        chosen = self._sample(span) if selected else ()
        if not chosen:
            if not selected and self._unselected.note(span.name, attrs):
                self._warn_unselected()
            self._forward(span)
            return
        enriched = self._enriched
        held = enriched is not None and enriched.hold(span, len(chosen))
        if self._worker.submit(Job(span, chosen, attrs)):
            return
        self._dropped(Job(span, chosen, attrs), held=held)

    def _sample(self, span: ReadableSpan) -> tuple[Slot, ...]:
        """The scorers that will judge a selected span; the others' decisions are counted."""
        self._unselected.selected = True
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

    def _dropped(self, job: Job, *, held: bool = True) -> None:
        """The queue had no room for ``job``: count it, release its span, say so once."""
        for slot in job.slots:
            self.counts.add(slot.name, Decision.DROPPED, Reason.QUEUE_FULL)
        self._log_once("queue_full", "otel-scorers queue is full: runs are dropped unscored "
                                     "(see the dropped decisions; raise queue_size or "
                                     "concurrency, or sample less)")
        context = job.span.context
        if held and self._enriched is not None and context is not None:
            self._enriched.release(context.span_id)

    # -- the log side -----------------------------------------------------------------------
    def observe_record(self, record: Any) -> None:
        """A log record was emitted (see :class:`ScoringLogProcessor`): keep its GenAI content
        for its span, and strip it from the record when configured to."""
        attributes = getattr(record, "attributes", None)
        event = getattr(record, "event_name", None) or ""
        if not event.startswith("gen_ai.") and not (
                attributes and ContentStripper.has_genai_key(attributes)):
            return
        content = content_of(event, attributes, getattr(record, "body", None),
                             getattr(record, "timestamp", None)
                             or getattr(record, "observed_timestamp", None))
        if content is None:
            return
        trace_id = getattr(record, "trace_id", None) or 0
        span_id = getattr(record, "span_id", None) or 0
        if trace_id and span_id and not self._shutdown:
            self._buffer.observe_record(trace_id, span_id, content)
            self._deferred.arrived(trace_id)
        if self._unselected.note(event, None, record=True):
            self._warn_unselected()
        if self._stripper is not None:
            self._stripper.strip_record(record)

    def _defer(self, job: Job) -> bool:
        return self._log_side is not None and not self._shutdown and self._deferred.add(job)

    def _resubmit(self, jobs: Sequence[Job]) -> None:
        for job in jobs:
            again = replace(job, attempt=job.attempt + 1)
            if not self._worker.submit(again):
                self._dropped(again)

    # -- direct use (offline re-scoring) ----------------------------------------------------
    def selects(self, span: ReadableSpan) -> bool:
        """Whether ``span`` is an agent run this processor would consider (selection only:
        no sampling, nothing counted). This library's own evaluation spans never are."""
        return not _is_own(span) and self._selector.matches(span, attribute_dict(span))

    def is_agent_span(self, span: ReadableSpan) -> bool:
        """Whether ``span`` is selected as an agent run (not as an LLM call): the spans that
        own the LLM calls under them when runs are assembled."""
        return self.selects(span) and not is_llm_call(attribute_dict(span))

    async def evaluate(self, span: ReadableSpan, *,
                       descendants: Sequence[ReadableSpan | Piece] | None = None,
                       nested: int = 0, scorers: Sequence[str] | None = None
                       ) -> list[ScoreResult]:
        """Capture and judge ``span`` with every scorer now, bypassing sampling and the queue
        (the decisions are counted and results emitted as for live runs). ``descendants`` are
        the content under it (spans or pieces), when its own attributes lack the
        conversation; ``nested`` counts content under it that nested agent spans own;
        ``scorers`` (names) limits the judging to some of the scorers.

        Returns the results in scorer order; an empty list when nothing could be captured
        (the ``filtered`` decision says why). Runs on the library's background loop.
        """
        slots = self._slots if scorers is None else tuple(
            slot for slot in self._slots if slot.name in scorers)
        self.counts.select(tuple(slot.name for slot in slots), [])
        return await background_loop.on_loop(
            self._evaluation.run(Job(span, slots), descendants=descendants or [],
                                 nested=nested))

    def capture(self, span: ReadableSpan, *,
                descendants: Sequence[ReadableSpan | Piece] | None = None,
                nested: int = 0) -> Captured:
        """The run this processor would judge for ``span`` (no judge call, nothing counted)."""
        return self._evaluation.capture(span, descendants=descendants, nested=nested)

    def agent_of(self, span: ReadableSpan) -> str | None:
        """The agent name of ``span`` as capture reads it (the mapping's key first)."""
        return self._evaluation.agent_of(span)

    # -- housekeeping ---------------------------------------------------------------------
    def _periodic(self) -> None:
        self._buffer.sweep()
        if self._enriched is not None:
            self._enriched.sweep()
        if len(self._deferred):
            self._resubmit(self._deferred.due())

    def _log_once(self, key: str, message: str) -> None:
        if key in self._errors_logged:
            return
        self._errors_logged.add(key)
        logger.warning(message, exc_info=key in ("on_end", "capture") or key.startswith("score:"))

    def _warn_unselected(self) -> None:
        unselected = self._unselected
        if unselected.selected or not unselected.count:
            return
        self._log_once("unselected", (
            f"otel-scorers has seen {unselected.count} spans or log records with GenAI content "
            f"(the first: {unselected.first!r}) but no agent-run span to score: the app looks "
            "traced at the LLM-client level only. To score each LLM call, set "
            "include_llm_spans=True (OTEL_SCORERS_INCLUDE_LLM_SPANS=true); to score whole "
            "runs, wrap them in an invoke_agent span, or select them by span name "
            "(OTEL_SCORERS_SPAN_NAMES)."))

    # -- flush, exit and shutdown -----------------------------------------------------------
    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Wait for queued evaluations (and export enriched spans) within the timeout. Runs
        waiting for log records are decided now (in one process, the records came already)."""
        deadline = time.monotonic() + timeout_millis / 1000.0
        self._resubmit(self._deferred.take_all())
        self._warn_unselected()
        done = self._worker.flush(max(0.0, deadline - time.monotonic()))
        if self._enriched is not None:
            remaining_ms = max(0, int((deadline - time.monotonic()) * 1000))
            done = self._enriched.force_flush(remaining_ms) and done
        return done

    def _at_exit(self) -> None:
        """The main thread finished: let pending evaluations finish within ``exit_timeout_s``
        (before the SDK's providers shut down), and drop and count what is left."""
        if self._shutdown:
            return
        self._resubmit(self._deferred.take_all())
        self._warn_unselected()
        if self._worker.flush(self.settings.exit_timeout_s):
            return
        before = self.counts.count(Decision.DROPPED, Reason.EXIT)
        self._evaluation.cancel_reason = Reason.EXIT
        for job in self._worker.stop(0.0):
            for slot in job.slots:
                self.counts.add(slot.name, Decision.DROPPED, Reason.EXIT)
                self._evaluation.release(job.span, {})
        cut = self.counts.count(Decision.DROPPED, Reason.EXIT) - before
        logger.warning("otel-scorers: %d evaluation(s) were still pending when exit_timeout_s="
                       "%gs ran out at exit; they were dropped (counted as dropped, reason "
                       "exit)", cut, self.settings.exit_timeout_s)

    def shutdown(self) -> None:
        """Stop taking spans, drain queued evaluations (bounded), export everything held."""
        with self._shutdown_lock:
            if self._shutdown:
                return
            self._resubmit(self._deferred.take_all())
            self._shutdown = True
        abandoned = self._worker.stop(self.settings.shutdown_timeout_s)
        for job in abandoned:
            for slot in job.slots:
                self.counts.add(slot.name, Decision.DROPPED, Reason.SHUTDOWN)
        if self._enriched is not None:
            self._enriched.release_all(Reason.SHUTDOWN)
            self._enriched.shutdown()

    def _after_fork(self) -> None:
        """In a forked child (gunicorn, celery): every lock is new (one held by a parent's
        thread at fork time would never be released here) and the parent's buffered
        content, counts, cache, waiting runs and held spans are dropped; workers start afresh
        on the first run."""
        self._shutdown_lock = threading.Lock()
        self._worker.reset_after_fork()
        self._buffer.reset_after_fork()
        self.counts.reset_after_fork()
        self._deferred.reset_after_fork()
        self._evaluation.reset_after_fork()
        if self._enriched is not None:
            self._enriched.reset_after_fork()
        for slot in self._slots:
            slot.sampler.reset_after_fork()


class _Unselected:
    """Content seen while nothing is selected: the makings of a "why was nothing scored?"
    warning. ``note`` is on the hot path: a flag test unless nothing was selected yet."""

    WARN_AFTER = 20

    def __init__(self) -> None:
        self.selected = False
        self.count = 0
        self.first = ""

    def note(self, name: str, attrs: Mapping[str, Any] | None, *, record: bool = False) -> bool:
        """Count a span (``attrs``) or record with content; ``True`` when it is time to warn."""
        if self.selected or (not record and (attrs is None
                                             or CONTENT_KEY_SET.isdisjoint(attrs))):
            return False
        self.count += 1
        if not self.first:
            self.first = name
        return self.count == self.WARN_AFTER


def _ignore(_record: Any) -> None:
    return


def _is_own(span: ReadableSpan) -> bool:
    """Spans this library emitted (evaluation spans): never selected, never buffered."""
    scope = span.instrumentation_scope
    return scope is not None and scope.name == n.SCOPE_NAME


def _after_fork(ref: weakref.ReferenceType[ScoringSpanProcessor]) -> None:
    processor = ref()
    if processor is not None:
        processor._after_fork()
