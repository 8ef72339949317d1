"""``ScoringSpanProcessor``: judge agent runs live inside the OpenTelemetry SDK pipeline.

This module holds the SDK hooks only. ``on_end`` is the hot path and never blocks or raises:
one lookup and one set test tell a possible run (appended, with its attributes, to the
worker's bounded intake), an LLM span with content (buffered for trace assembly at once) and
any other span (a parent link at most) apart, and it returns. The worker (:mod:`.worker`) then
decides each possible run in order (:meth:`ScoringSpanProcessor._decide`: this library's own
spans skipped, selection, sampling, counting, enriched holds) and runs one
:class:`~.evaluation.Evaluation` per job on the library's background loop; the parts are built
from arguments and settings in :mod:`.build`.

Every selected (span, scorer) pair ends in exactly one counted decision (see
:class:`~otel_scorers.emit.names.Decision`); :meth:`ScoringSpanProcessor.stats` shows them.

The log side is :mod:`.logs`, the direct use (offline re-scoring) :mod:`.direct`. This file is
over 400 lines because the constructor takes one keyword argument per setting, each documented
in the class docstring, and flush, exit, shutdown and fork each need their own care; the hooks
themselves fit a screen each.
"""

from __future__ import annotations

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
from otel_scorers.capture import CaptureMapping, Extractor, Limits, attribute_dict
from otel_scorers.capture.interactions import Candidate, is_local_root, resolve
from otel_scorers.capture.kinds import KIND_KEYS, span_kind
from otel_scorers.capture.trace import CONTENT_KEY_SET, Pending
from otel_scorers.emit.names import Decision, Reason
from otel_scorers.pipeline import build
from otel_scorers.pipeline.deferral import Deferred
from otel_scorers.pipeline.direct import DirectUse, is_own
from otel_scorers.pipeline.evaluation import Job, check_prices
from otel_scorers.pipeline.logs import ScoringLogProcessor
from otel_scorers.pipeline.sampling import Sampling
from otel_scorers.pipeline.selection import Selection, is_llm_call
from otel_scorers.pipeline.slots import ScorerSpec, Slot
from otel_scorers.pipeline.unselected import Unselected
from otel_scorers.pipeline.worker import Worker
from otel_scorers.scorers.base import Scorer
from otel_scorers.scorers.rubric import RubricLike

__all__ = ["ScorerSpec", "ScoringSpanProcessor"]

logger = logging.getLogger(__name__)

ContentMode = Literal["full", "truncate", "none"]

#: The worker's signal to decide every trace still waiting for its root (flush, exit, stop).
RESOLVE_ALL = object()


class ScoringSpanProcessor(DirectUse, SpanProcessor):
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
    - ``fuse_judge_calls``: one judge call for the scorers that judge a run with the same judge
      (see :mod:`otel_scorers.judge.fused`).
    - ``isolation``: ``"process"`` judges in a child process (:mod:`.isolated`).
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
        interaction_wait_s: float | None = None,
        max_agents: int | None = None,
        fuse_judge_calls: bool | None = None,
        isolation: Literal["thread", "process"] | None = None,
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
            "interaction_wait_s": interaction_wait_s,
            "max_agents": max_agents, "fuse_judge_calls": fuse_judge_calls,
            "isolation": isolation}, config)
        self.settings = settings
        #: Why scoring is off (bad ``OTEL_SCORERS_*`` variables), or empty.
        self.disabled_because = problems
        if problems:
            logger.error("otel-scorers: scoring is disabled: %s", "; ".join(problems))
            self.on_end = self._forward  # type: ignore[method-assign]
        self._errors_logged: set[str] = set()
        parts = build.parts_from(
            settings, scorers=scorers, selection=selection, sampling=sampling,
            capture=capture, rubrics=rubrics, exporter=exporter,
            tracer_provider=tracer_provider, meter_provider=meter_provider,
            logger_provider=logger_provider, capture_limits=capture_limits,
            log_once=self._log_once, queue_depth=lambda: self._worker.depth,
            defer=self._defer)
        self._slots, self._selector, self._buffer = parts.slots, parts.selector, parts.buffer
        self._evaluation, self._enriched = parts.evaluation, parts.enriched
        self._stripper, self.counts = parts.stripper, parts.counts
        self._names = tuple(slot.name for slot in self._slots)
        self._deferred = Deferred(settings.log_wait_s, settings.queue_size)
        self._worker: Worker[Job] = Worker(self._evaluation.run, queue_size=settings.queue_size,
                                           concurrency=settings.concurrency,
                                           periodic=self._periodic, admit=self._decide,
                                           rejected=self._dropped)
        self._could_match = self._selector.could_match
        self._per_agent = self._selector.selection.per_agent
        keys = self._selector.could_match_keys
        #: on_end's first test: a span with none of these keys is neither a possible run nor
        #: a piece of one (``None``: any span may be a run, by name pattern or predicate)
        self._watched = None if keys is None else keys | CONTENT_KEY_SET | KIND_KEYS
        self._log_side: ScoringLogProcessor | None = None
        self._unselected = Unselected()
        self._shutdown = False
        self._shutdown_lock = threading.Lock()
        if hasattr(os, "register_at_fork"):
            ref = weakref.ref(self)
            os.register_at_fork(after_in_child=lambda: _after_fork(ref))
        background_loop.at_main_thread_exit(self._at_exit)
        background_loop.before_exit(self.shutdown)
        if any(slot.sampler.budget is not None and slot.sampler.budget.max_cost is not None
               for slot in self._slots):
            background_loop.submit(check_prices(self._slots, self._log_once))

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
            self._log_side = ScoringLogProcessor(
                buffer=self._buffer, deferred=self._deferred, stripper=self._stripper,
                stopped=lambda: self._shutdown or bool(self.disabled_because))
        return self._log_side

    # -- the hot path -----------------------------------------------------------------------
    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return

    def on_end(self, span: ReadableSpan) -> None:
        try:
            try:  # an ended SDK span's attributes, read directly (see attribute_dict)
                attrs = span._attributes._dict  # type: ignore[union-attr]
            except AttributeError:
                attrs = attribute_dict(span)
            watched = self._watched
            if watched is None or not watched.isdisjoint(attrs):
                # a candidate, a piece of an interaction, or a span a name pattern or a
                # predicate may select: the worker sorts it out, in the order spans ended
                self._offer(span, attrs)
                return
            # The common case: any other span. While something agent-related is in flight it
            # may be a parent link that trace assembly needs, or the local root whose end lets
            # the worker decide its trace's interactions; otherwise it is passed on at once.
            # This library's own spans take this path too, harmlessly.
            worker = self._worker
            if worker.has_intake or self._buffer.traces:
                context = span.context
                if context is not None and (worker.has_intake
                                            or context.trace_id in self._buffer.traces):
                    if self._stripper is not None:
                        self._stripper.strip_if_content(span, attrs)
                    if not worker.offer((span, None)):
                        self._decide_now(span, None)
                    return
            if self._stripper is not None:
                self._stripper.strip_if_content(span, attrs)
            if self._enriched is not None:
                self._enriched.forward(span)
        except Exception:
            self._log_once("on_end", "otel-scorers could not process a span; it was passed on "
                                     "unscored")
            self._forward(span)

    def _offer(self, span: ReadableSpan, attrs: Mapping[str, Any]) -> None:
        """Hand a span to the worker; only stripping cannot wait for it."""
        if self._stripper is not None:
            self._stripper.strip_if_content(span, attrs)  # attrs stays whole for capture
        if not self._worker.offer((span, attrs)):
            self._decide_now(span, attrs)

    def _decide_now(self, span: ReadableSpan, attrs: Mapping[str, Any] | None) -> None:
        """The intake was full or the worker stopped: decide on the calling thread."""
        if self._shutdown:
            self._forward(span)
            return
        for job in self._decide((span, attrs)):
            if not self._worker.submit(job):
                self._dropped(job)

    # -- the worker's side of on_end --------------------------------------------------------
    def _decide(self, item: tuple[ReadableSpan, Mapping[str, Any] | None] | object
                ) -> Sequence[Job]:
        """One ended span, in the order spans ended: buffered as what it is (a candidate, a
        piece, a parent link), and the jobs to evaluate now (often none: candidates wait for
        their trace's local root)."""
        if item is RESOLVE_ALL:
            return self._resolve_all()
        span, attrs = item  # type: ignore[misc]
        try:
            if is_own(span):
                self._forward(span)
                return ()
            if self._per_agent:
                return self._decide_agent(span, attrs)
            if attrs is None:
                self._buffer.observe(span, None)  # a parent link, when its trace is buffered
            else:
                kind = span_kind(attrs)
                candidate = (self._selector.kind_of(span, attrs)
                             if self._could_match(attrs, kind) else None)
                if candidate is not None:
                    if self._buffer.add_candidate(Candidate(span, attrs, candidate)):
                        return self._resolve(span) if is_local_root(span) else ()
                else:
                    self._buffer.observe(span, attrs, piece=kind is not None)
            self._forward(span)
            return self._resolve(span) if is_local_root(span) else ()
        except Exception:
            self._log_once("on_end", "otel-scorers could not process a span; it was passed on "
                                     "unscored")
            self._forward(span)
            return ()

    def _decide_agent(self, span: ReadableSpan, attrs: Mapping[str, Any] | None
                      ) -> Sequence[Job]:
        """Per-agent evaluation: every selected agent span is a run, decided when it ends."""
        buffer = self._buffer
        if attrs is None:
            buffer.observe(span, None)
            self._forward(span)
            return ()
        selected = self._selector.matches(span, attrs)
        # with a log side, a run's content may come later, by time: keep its window
        agent = selected and not is_llm_call(attrs)
        create = agent and self._log_side is not None
        if create or buffer.traces or not CONTENT_KEY_SET.isdisjoint(attrs) or span_kind(attrs):
            buffer.observe(span, attrs, keep_content=not selected, agent=agent, create=create,
                           piece=not selected and span_kind(attrs) is not None)
        chosen = self._sample(span) if selected else ()
        if not chosen:
            if not selected and self._unselected.note(span.name, attrs):
                self._warn_unselected()
            self._forward(span)
            return ()
        if self._enriched is not None:
            self._enriched.hold(span, len(chosen))
        return (Job(span, chosen, attrs),)

    def _resolve(self, span: ReadableSpan) -> Sequence[Job]:
        """``span``'s trace is complete (its local root ended): its interactions are decided."""
        context = span.context
        if context is None:
            return ()
        pending = self._buffer.take_pending(context.trace_id)
        if pending is None:
            self._note_unjudged(context.trace_id, span.name)
            return ()
        return self._jobs_of(pending)

    def _resolve_all(self, idle_since: float | None = None) -> list[Job]:
        """Decide every trace still waiting (flush, exit; ``idle_since``: only idle ones)."""
        jobs: list[Job] = []
        for trace_id in self._buffer.pending_traces(idle_since):
            pending = self._buffer.take_pending(trace_id)
            if pending is not None:
                jobs.extend(self._jobs_of(pending))
        return jobs

    def _jobs_of(self, pending: Pending, lost: str | None = None) -> list[Job]:
        """The interactions among a trace's candidates, sampled (every other candidate is
        passed on); ``lost``: the trace was evicted before it could be judged, each interaction
        is counted as dropped for that reason."""
        interactions, rest = resolve(pending.candidates, pending.parents, pending.llm_spans)
        for candidate in rest:
            self._forward(candidate.span)
        if not interactions:
            self._note_unjudged(pending.trace_id, pending.candidates[0].span.name)
        jobs: list[Job] = []
        for interaction in interactions:
            for candidate in interaction.inner:
                self._forward(candidate.span)
            root = interaction.root
            if not self._selector.keeps(interaction.agents):
                self._forward(root.span)
                continue
            if lost is not None:
                self.counts.select(self._names, [])
                for slot in self._slots:
                    self.counts.add(slot.name, Decision.DROPPED, lost)
                self._forward(root.span)
                continue
            chosen = self._sample(root.span)
            if not chosen:
                self._forward(root.span)
                continue
            if self._enriched is not None:
                self._enriched.hold(root.span, len(chosen))
            jobs.append(Job(root.span, chosen, root.attributes, agent=interaction.agent))
        return jobs

    def _note_unjudged(self, trace_id: int, name: str) -> None:
        """A trace ended with no interaction: its LLM calls went unjudged (counted for the
        warning that says what to select)."""
        count = self._buffer.content_count(trace_id)
        if count and self._unselected.note(name, None, record=True, count=count):
            self._warn_unselected()

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

    def _dropped(self, job: Job) -> None:
        """The queue had no room for ``job``: count it, release its span, say so once."""
        for slot in job.slots:
            self.counts.add(slot.name, Decision.DROPPED, Reason.QUEUE_FULL)
        self._log_once("queue_full", "otel-scorers queue is full: runs are dropped unscored "
                                     "(see the dropped decisions; raise queue_size or "
                                     "concurrency, or sample less)")
        context = job.span.context
        if self._enriched is not None and context is not None:
            self._enriched.release(context.span_id)

    # -- the log side -----------------------------------------------------------------------
    def observe_record(self, record: Any) -> None:
        """A log record with possible GenAI content, from elsewhere than a ``LoggerProvider``
        (the gateway's decoded OTLP records): as :class:`ScoringLogProcessor` would see it."""
        self.log_processor().observe(record)

    def _defer(self, job: Job) -> bool:
        return self._log_side is not None and not self._shutdown and self._deferred.add(job)

    def _resubmit(self, jobs: Sequence[Job]) -> None:
        for job in jobs:
            again = replace(job, attempt=job.attempt + 1)
            if not self._worker.submit(again):
                self._dropped(again)

    # -- housekeeping ---------------------------------------------------------------------
    def _periodic(self) -> None:
        if not self._per_agent:
            idle = time.monotonic() - self.settings.interaction_wait_s
            for job in self._resolve_all(idle):
                if not self._worker.submit(job):
                    self._dropped(job)
        self._buffer.sweep()
        for pending in self._buffer.take_evicted():
            self._jobs_of(pending, lost=pending.reason)
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
        message = self._unselected.message()
        if message is not None:
            self._log_once("unselected", message)

    # -- flush, exit and shutdown -----------------------------------------------------------
    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Decide every run seen so far and wait for its evaluations (and export enriched
        spans) within the timeout; ``True`` only when every run has its decision. Interactions
        whose trace is still open are decided with what has ended; runs waiting for log
        records are decided now (in one process, the records came already)."""
        deadline = time.monotonic() + timeout_millis / 1000.0
        done = self._settle(deadline)
        self._warn_unselected()
        if self._enriched is not None:
            remaining_ms = max(0, int((deadline - time.monotonic()) * 1000))
            done = self._enriched.force_flush(remaining_ms) and done
        return done

    def _settle(self, deadline: float) -> bool:
        """Every trace decided, every evaluation done (a run set aside for its log records
        comes back at once), before ``deadline``; ``False`` if it passed first."""
        self._decide_all()
        while True:
            self._resubmit(self._deferred.take_all())
            if not self._worker.flush(max(0.0, deadline - time.monotonic())):
                return False
            if not len(self._deferred):
                return True

    def _decide_all(self) -> None:
        """Have the worker decide every waiting trace, after the spans already offered."""
        if self._per_agent or self._shutdown:
            return
        if not self._worker.offer(RESOLVE_ALL):
            for job in self._resolve_all():
                if not self._worker.submit(job):
                    self._dropped(job)

    def _at_exit(self) -> None:
        """The main thread finished: let pending evaluations finish within ``exit_timeout_s``
        (before the SDK's providers shut down), and drop and count what is left."""
        if self._shutdown:
            return
        settled = self._settle(time.monotonic() + self.settings.exit_timeout_s)
        self._warn_unselected()
        if settled:
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
            self._decide_all()
            self._resubmit(self._deferred.take_all())
            self._shutdown = True
        abandoned = self._worker.stop(self.settings.shutdown_timeout_s)
        for job in abandoned:
            for slot in job.slots:
                self.counts.add(slot.name, Decision.DROPPED, Reason.SHUTDOWN)
        if self._enriched is not None:
            self._enriched.release_all(Reason.SHUTDOWN)
            self._enriched.shutdown()
        if self._evaluation.isolated is not None:
            try:
                background_loop.submit(self._evaluation.close()).result(timeout=10.0)
            except Exception:  # the loop is gone at exit: the child sees EOF and ends
                logger.debug("otel-scorers: judging process not closed", exc_info=True)

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


def _after_fork(ref: weakref.ReferenceType[ScoringSpanProcessor]) -> None:
    processor = ref()
    if processor is not None:
        processor._after_fork()
