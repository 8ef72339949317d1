"""``ScoringSpanProcessor``: judge agent runs live inside the OpenTelemetry SDK pipeline.

This module holds the SDK hooks only. ``on_end`` is the hot path and never blocks or raises:
one set test tells a span that may matter (a possible interaction or a piece of one: handed,
with its attributes, to the worker's bounded intake) from any other span (passed on, or, while
something agent-related is in flight, handed over as a parent link), and it returns. The
worker (:mod:`.worker`) takes the intake in order and the stages of :mod:`.decide` turn it into
jobs (buffering, selection, interactions, sampling, counting), each judged by an
:class:`~otel_scorers.pipeline.evaluation.Evaluation` on the library's background loop; the
parts are built from arguments and settings in :mod:`.build`. Flush, exit, shutdown and fork
are here too, each with its own care.

Every selected (span, scorer) pair ends in exactly one counted decision (see
:class:`~otel_scorers.names.Decision`); :meth:`ScoringSpanProcessor.stats` shows them.
The log side is :mod:`.logs`, judging on demand (offline re-scoring) :mod:`.on_demand`.
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
from typing import Any

from opentelemetry._logs import LoggerProvider
from opentelemetry.context import Context
from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter
from opentelemetry.trace import TracerProvider
from typing_extensions import Unpack

from otel_scorers import background_loop
from otel_scorers.capture import CaptureMapping, Extractor, Limits, attribute_dict
from otel_scorers.capture.kinds import KIND_KEYS
from otel_scorers.capture.strip import StripPolicy
from otel_scorers.capture.trace import CONTENT_KEY_SET
from otel_scorers.names import Decision, Reason
from otel_scorers.pipeline import build
from otel_scorers.pipeline.decide import RESOLVE_ALL, Decider
from otel_scorers.pipeline.deferral import Deferred
from otel_scorers.pipeline.evaluation import Job, check_prices
from otel_scorers.pipeline.logs import ScoringLogProcessor
from otel_scorers.pipeline.on_demand import OnDemand
from otel_scorers.pipeline.sampling import Sampling
from otel_scorers.pipeline.selection import Selection
from otel_scorers.pipeline.sessions import OpenSession, SessionPolicy
from otel_scorers.pipeline.slots import ScorerSpec, Slot
from otel_scorers.pipeline.unselected import Unselected
from otel_scorers.pipeline.worker import Worker
from otel_scorers.scorers.base import Scorer
from otel_scorers.scorers.rubric import RubricLike

__all__ = ["ScorerSpec", "ScoringSpanProcessor"]

logger = logging.getLogger(__name__)



class ScoringSpanProcessor(OnDemand, SpanProcessor):
    """Scores selected spans in the background and emits the results as OTel telemetry.

    Arguments (all keyword-only but ``scorers``):

    - ``scorers``: scorer objects (or :class:`ScorerSpec` with their own sampling).
    - ``selection`` / ``sampling``: which spans, and which share of them (defaults: the
      agent-run and workflow conventions, every trace).
    - ``capture``: a :class:`CaptureMapping` of your own attribute names, or a callable that
      reads a run from a span. ``rubrics``: rubric per agent name (``"*"`` for any agent) for
      rubric scorers without static criteria; an ``otel_scorers.rubric`` span attribute wins.
    - ``exporter``: enables enriched export (see :mod:`otel_scorers.emit.enriched`).
    - ``tracer_provider`` / ``meter_provider`` / ``logger_provider``: where evaluation spans,
      metrics and events go (default: the global providers).
    - ``capture_limits``: bounds on what capture reads; ``config``: a YAML settings file.
    - ``sessions``: a :class:`~otel_scorers.pipeline.sessions.SessionPolicy` for the session
      scorers (where the key is read, when a session is judged, what is held; default: the
      ``sessions.*`` settings). Session scorers (``level = "session"``: the multi-turn judge,
      rubric and prompt alignment with ``session=True``) judge each conversation once it goes
      idle, at exit, and on :meth:`score_sessions`.
    - every pipeline setting of the settings table (:mod:`otel_scorers.config.params`,
      docs/configuration.md: ``queue_size``, ``concurrency``, ``reasons``, ``isolation``,
      ...), typed by :class:`~otel_scorers.config.params.PipelineSettings`; an argument wins
      over its environment variable and the file.
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
        capture_limits: Limits | None = None,
        config: str | Path | None = None,
        sessions: SessionPolicy | None = None,
        **pipeline: Unpack[build.PipelineSettings],
    ) -> None:
        settings, problems = build.resolve_settings(pipeline, config)
        self.settings = settings
        #: Why scoring is off (bad ``OTEL_SCORERS_*`` variables), or empty.
        self.disabled_because = problems
        if problems:
            logger.error("otel-scorers: scoring is disabled: %s", "; ".join(problems))
            self.on_end = self._pass_on  # type: ignore[method-assign]
        self._errors_logged: set[str] = set()
        parts = build.parts_from(
            settings, scorers=scorers, selection=selection, sampling=sampling,
            capture=capture, rubrics=rubrics, exporter=exporter,
            tracer_provider=tracer_provider, meter_provider=meter_provider,
            logger_provider=logger_provider, capture_limits=capture_limits,
            log_once=self._log_once, queue_depth=lambda: self._worker.depth,
            defer=self._defer, sessions=sessions)
        self._assemble(parts, settings)
        self._shutdown = False
        self._shutdown_lock = threading.Lock()
        #: turn records received with no session scorer to keep them (dropped)
        self.turn_records_dropped = 0
        self._register()

    def _assemble(self, parts: build.Parts, settings: build.Settings) -> None:
        """The parts in place: the worker, its decisions, the hot path's first test."""
        self._slots, self._selector, self._buffer = parts.slots, parts.selector, parts.buffer
        self._evaluation, self._enriched = parts.evaluation, parts.enriched
        self._sinks = parts.sinks
        self._sessions = parts.sessions
        self._stripper, self.counts = parts.stripper, parts.counts
        self._deferred = Deferred(settings.log_wait_s, settings.queue_size)
        self._log_side: ScoringLogProcessor | None = None
        self._decider = Decider(parts.selector, parts.buffer, parts.slots, parts.counts,
                                parts.enriched, self._log_once,
                                log_side=lambda: self._log_side is not None,
                                unselected=Unselected(), keep_steps=parts.evaluation.steps,
                                sessions=parts.sessions)
        self._worker: Worker[Job] = Worker(self._evaluation.run, queue_size=settings.queue_size,
                                           concurrency=settings.concurrency,
                                           periodic=self._periodic, admit=self._decider.decide,
                                           rejected=self._decider.dropped)
        self._forward = self._decider.forward
        self._per_agent = self._selector.selection.per_agent
        keys = self._selector.could_match_keys
        #: on_end's first test: a span with none of these keys is neither a possible run nor
        #: a piece of one (``None``: any span may be a run, by name pattern or predicate);
        #: tests/pipeline/test_shortcuts.py proves it a necessary condition
        self._watched = None if keys is None else keys | CONTENT_KEY_SET | KIND_KEYS

    def _register(self) -> None:
        """Fresh workers in forked children, pending evaluations at exit, shutdown before the
        loop stops; and, with a cost budget, a check of the judges' prices."""
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
        return tuple(slot.scorer for slot in self._all_slots())

    @property
    def strip_policy(self) -> StripPolicy | None:
        """What ``exported_content: strip`` removes (``None`` when content is kept); the
        gateway strips what it forwards by the same policy."""
        return self._stripper.policy if self._stripper is not None else None

    @property
    def queue_depth(self) -> int:
        """Runs waiting for a free evaluation slot."""
        return self._worker.depth

    def _all_slots(self) -> tuple[Slot, ...]:
        """The turn scorers' slots, then the session scorers'."""
        return (*self._slots, *(self._sessions.slots if self._sessions is not None else ()))

    def stats(self) -> dict[str, dict[str, int]]:
        """Decision totals per scorer: why each selected run (a session scorer: each session
        evaluation) was, or was not, scored."""
        return {slot.name: self.counts.totals(slot.name) for slot in self._all_slots()}

    def health(self) -> dict[str, Any]:
        """Per scorer: decisions with their reasons (``filtered: {no_content: 3}``, ``error:
        {auth: 2}``), judge calls, retries, tokens and spend, failures by kind and the last
        error with its time; ``pending``: runs not decided yet (queued, in flight);
        ``sessions``: sessions held and not judged yet."""
        decisions = {slot.name: self.counts.by_reason(slot.name) for slot in self._all_slots()}
        view = self._evaluation.health.view(decisions)
        sessions = self._sessions
        return {"scorers": view, "pending": self._worker.depth + self._worker.inflight,
                **({"sessions": {"open": sessions.store.open_count(),
                                 "held": len(sessions.store),
                                 **({"invalid_records": sessions.invalid_records}
                                    if sessions.invalid_records else {})}}
                   if sessions is not None else {}),
                **({"turn_records_dropped": self.turn_records_dropped}
                   if self.turn_records_dropped else {}),
                **({"sinks": self._sinks.totals()} if self._sinks is not None else {}),
                **({"disabled_because": self.disabled_because}
                   if self.disabled_because else {})}

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
        self._submit(self._decider.decide((span, attrs)))

    def _submit(self, jobs: Sequence[Job]) -> None:
        for job in jobs:
            if not self._worker.submit(job):
                self._decider.dropped(job)

    def _pass_on(self, span: ReadableSpan) -> None:
        """``on_end`` with scoring off: the span goes on to enriched export, if any."""
        if self._enriched is not None:
            self._enriched.forward(span)

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
                self._decider.dropped(again)

    # -- sessions -------------------------------------------------------------------------
    def score_sessions(self, key: str | None = None, timeout_millis: int = 30_000) -> bool:
        """Judge every session with turns not judged yet now (``key``: that one), without
        waiting for it to go idle: the interactions seen so far are decided first, so their
        turns are in. ``True`` when every evaluation finished within the timeout. A session
        that goes on is judged again, whole, when it next goes idle."""
        if self._sessions is None:
            return True
        deadline = time.monotonic() + timeout_millis / 1000.0
        if not self._settle(deadline):
            return False
        self._judge_sessions(self._sessions.store.take(key))
        return self._settle(deadline)

    def receive_turns(self, records: Sequence[Any]) -> None:
        """Turn records sent by a gateway of the fleet (records with ``attributes``,
        ``body``, ``trace_id`` and ``span_id``): each is kept as the next turn of its session,
        when sampled here. Without a session scorer they are dropped, counted, and said
        once: they carry content, and are never forwarded."""
        sessions = self._sessions
        if sessions is None:
            self.turn_records_dropped += len(records)
            self._log_once("turns", "otel-scorers: turn records of a session fleet arrived, "
                           "but no session scorer is configured here: they were dropped. To "
                           "fix: configure the same scorers on every gateway of the fleet")
            return
        self._worker.start()  # its periodic pass judges the sessions that go idle
        for record in records:
            if not sessions.receive(record.attributes, record.body, record.trace_id,
                                    record.span_id):
                self._log_once("turn_invalid", "otel-scorers: a turn record could not be "
                               "read (no session key, or no answer): it was dropped (counted "
                               "in health()['sessions']['invalid_records'])")

    def _judge_sessions(self, due: Sequence[tuple[OpenSession, str]]) -> None:
        sessions = self._sessions
        if sessions is None or not due:
            return
        by_name = {slot.name: slot for slot in sessions.slots}
        for session in sessions.jobs(due):
            job = Job(session.span, tuple(by_name[name] for name in session.slots),
                      session=session)
            if not self._worker.submit(job):
                self._decider.dropped(job)

    # -- housekeeping ---------------------------------------------------------------------
    def _periodic(self) -> None:
        if not self._per_agent:
            self._submit(self._decider.resolve_all(
                time.monotonic() - self.settings.interaction_wait_s))
        if self._sessions is not None:
            self._judge_sessions(self._sessions.store.due())
        self._buffer.sweep()
        for pending in self._buffer.take_evicted():
            self._decider.lost(pending)
        if self._enriched is not None:
            self._enriched.sweep()
        if len(self._deferred):
            self._resubmit(self._deferred.due())

    def _log_once(self, key: str, message: str) -> None:
        if key in self._errors_logged:
            return
        self._errors_logged.add(key)
        logger.warning(message, exc_info=key in ("on_end", "capture") or key.startswith("score:"))


    # -- flush, exit and shutdown -----------------------------------------------------------
    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Decide every run seen so far and wait for its evaluations (and export enriched
        spans) within the timeout; ``True`` only when every run has its decision. Interactions
        whose trace is still open are decided with what has ended; runs waiting for log
        records are decided now (in one process, the records came already)."""
        deadline = time.monotonic() + timeout_millis / 1000.0
        done = self._settle(deadline)
        self._decider.warn_unselected()
        if self._enriched is not None:
            remaining_ms = max(0, int((deadline - time.monotonic()) * 1000))
            done = self._enriched.force_flush(remaining_ms) and done
        if self._sinks is not None:  # the results written where they go (Phoenix)
            done = self._sinks.flush(deadline - time.monotonic()) and done
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
            self._submit(self._decider.resolve_all())

    def _at_exit(self) -> None:
        """The main thread finished: let pending evaluations finish within ``exit_timeout_s``
        (before the SDK's providers shut down), and drop and count what is left."""
        if self._shutdown:
            return
        deadline = time.monotonic() + self.settings.exit_timeout_s
        settled = self._settle(deadline)
        if self._sessions is not None:  # conversations end with the process (what the
            # deadline leaves no time for is dropped and counted below, with the rest)
            self._judge_sessions(self._sessions.store.take(trigger="exit"))
            settled = self._settle(deadline) and settled
            if self._sessions.forward is not None:  # the turns on their way to the fleet
                self._sessions.forward.flush(deadline - time.monotonic())
        self._decider.warn_unselected()
        if self._sinks is not None:
            self._sinks.close(deadline - time.monotonic())
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
            if self._sessions is not None:
                self._worker.flush(self.settings.shutdown_timeout_s / 2)  # the last turns in
                self._judge_sessions(self._sessions.store.take(trigger="shutdown"))
            self._shutdown = True
        abandoned = self._worker.stop(self.settings.shutdown_timeout_s)
        for job in abandoned:
            for slot in job.slots:
                self.counts.add(slot.name, Decision.DROPPED, Reason.SHUTDOWN)
        if self._enriched is not None:
            self._enriched.release_all(Reason.SHUTDOWN)
            self._enriched.shutdown()
        if self._sinks is not None:
            self._sinks.close(self.settings.shutdown_timeout_s)
        if self._sessions is not None and self._sessions.forward is not None:
            self._sessions.forward.shutdown()
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
        if self._sinks is not None:
            self._sinks.reset_after_fork()
        if self._sessions is not None:
            self._sessions.reset_after_fork()
        for slot in self._all_slots():
            slot.sampler.reset_after_fork()


def _after_fork(ref: weakref.ReferenceType[ScoringSpanProcessor]) -> None:
    processor = ref()
    if processor is not None:
        processor._after_fork()
