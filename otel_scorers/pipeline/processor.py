"""``ScoringSpanProcessor``: judge agent runs live inside the OpenTelemetry SDK pipeline.

The SDK hooks, flush, exit, shutdown and fork; everything else is a part built in
:mod:`.build` and only delegated to. ``on_end`` is the hot path and never blocks or raises: one
set test (the selector's ``watched`` keys) tells a span that may matter (handed, with its
attributes, to the worker's bounded intake) from any other (passed on, or, while something
agent-related is in flight, handed over as a parent link). :mod:`.decide` turns the intake
into jobs, each judged in three steps (:mod:`.evaluation`); sessions go through their lane
(:mod:`.sessions`). Every selected (span, scorer) pair ends in one counted decision.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
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
from otel_scorers.capture.strip import StripPolicy
from otel_scorers.names import Reason
from otel_scorers.pipeline import build, health
from otel_scorers.pipeline.flow import Flow
from otel_scorers.pipeline.logs import ScoringLogProcessor
from otel_scorers.pipeline.sampling import Sampling
from otel_scorers.pipeline.selection import Selection
from otel_scorers.pipeline.sessions import SessionPolicy
from otel_scorers.pipeline.slots import ScorerSpec, Slot
from otel_scorers.scorers.base import Scorer
from otel_scorers.scorers.criteria import RubricLike

__all__ = ["ScorerSpec", "ScoringSpanProcessor"]

logger = logging.getLogger(__name__)


class ScoringSpanProcessor(SpanProcessor):
    """Scores selected spans in the background and emits the results as OTel telemetry:
    ``scorers`` (or :class:`ScorerSpec`; default: the configured ones), ``selection``,
    ``sampling``, ``capture`` (a :class:`CaptureMapping` or a callable), ``rubrics`` per agent,
    ``exporter`` (enriched export), the providers, ``capture_limits``, ``config`` (YAML),
    ``sessions`` and every pipeline setting of docs/configuration.md, an argument winning over
    its variable and the file."""

    def __init__(self, scorers: Sequence[Scorer | ScorerSpec] | None = None, *,
                 selection: Selection | None = None, sampling: Sampling | None = None,
                 capture: CaptureMapping | Extractor | None = None,
                 rubrics: Mapping[str, RubricLike] | None = None,
                 exporter: SpanExporter | None = None,
                 tracer_provider: TracerProvider | None = None,
                 meter_provider: MeterProvider | None = None,
                 logger_provider: LoggerProvider | None = None,
                 capture_limits: Limits | None = None, config: str | Path | None = None,
                 sessions: SessionPolicy | None = None,
                 **pipeline: Unpack[build.PipelineSettings]) -> None:
        settings, problems = build.resolve_settings(pipeline, config)
        #: The resolved settings; ``disabled_because``: why scoring is off (bad variables).
        self.settings, self.disabled_because = settings, problems
        self._log_once = health.LogOnce(logger)
        parts = build.parts_from(
            settings, scorers=scorers, selection=selection, sampling=sampling,
            capture=capture, rubrics=rubrics, exporter=exporter,
            tracer_provider=tracer_provider, meter_provider=meter_provider,
            logger_provider=logger_provider, capture_limits=capture_limits,
            log_once=self._log_once, queue_depth=lambda: self._worker.depth if
            hasattr(self, "_worker") else 0,
            sessions=sessions)
        self._parts, self._buffer, self.counts = parts, parts.buffer, parts.counts
        self._slots, self._sessions, self._timeouts = parts.slots, parts.sessions, parts.timeouts
        self._enriched, self._stripper = parts.enriched, parts.stripper
        #: Judging on demand, beside the SDK hooks (``rescore``): :class:`.on_demand.OnDemand`.
        self.on_demand = parts.on_demand
        self._shutdown, self._shutdown_lock = False, threading.Lock()
        self._flow = Flow(parts, queue_size=settings.queue_size,
                          concurrency=settings.concurrency, log_wait_s=settings.log_wait_s,
                          log_once=self._log_once, stopped=lambda: self._shutdown)
        self._worker, self._forward = self._flow.worker, self._flow.decider.forward
        self._offer = self._worker.offer
        self._watched = parts.selector.watched
        if problems:  # scoring off: every span goes on (to enriched export, if any)
            logger.error("otel-scorers: scoring is disabled: %s", "; ".join(problems))
            self.on_end = self._forward  # type: ignore[method-assign]
        #: judge canaries (``canary`` settings) and ``check_judge``'s start check of the
        #: judges (one :class:`~otel_scorers.judge.ping.PingResult` each), on the background loop
        self.canaries = parts.canaries
        self.judge_check: Future[list[Any]] | None = build.start_background(
            parts, settings, self.scorers) if not problems else None
        if hasattr(os, "register_at_fork"):
            ref = weakref.ref(self)
            os.register_at_fork(after_in_child=lambda: _after_fork(ref))
        background_loop.at_main_thread_exit(self._at_exit)
        background_loop.before_exit(self.shutdown)

    @property
    def scorers(self) -> tuple[Scorer, ...]:
        return tuple(slot.scorer for slot in self._all_slots())

    @property
    def strip_policy(self) -> StripPolicy | None:
        """What ``exported_content: strip`` removes (``None``: content is kept); the gateway
        strips what it forwards by the same policy."""
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
        """Per scorer its decisions with their reasons, judge calls, tokens, spend, failures
        by kind and the last error; runs pending, sessions held, sinks (:mod:`.health`)."""
        return health.report(
            self._parts.evaluation.emission.health,
            {slot.name: self.counts.by_reason(slot.name) for slot in self._all_slots()},
            pending=self._worker.depth + self._worker.inflight, sessions=self._sessions,
            turn_records_dropped=self._flow.turn_records_dropped, sinks=self._parts.sinks,
            disabled_because=self.disabled_because, batch=self._parts.evaluation.batch,
            canaries=self.canaries.report() if self.canaries is not None else None)

    def log_processor(self) -> ScoringLogProcessor:
        """The log side, to register first on the ``LoggerProvider``: GenAI content from log
        records (``EVENT_ONLY``), stripped with ``exported_content: strip`` (``install()``
        registers both sides)."""
        return self._flow.log_processor(lambda: self._shutdown or bool(self.disabled_because))

    def observe_record(self, record: Any) -> None:
        """A log record with possible GenAI content from elsewhere than a LoggerProvider (the
        gateway's decoded OTLP records), as the log side would see it."""
        self.log_processor().observe(record)

    # -- the hot path -----------------------------------------------------------------------
    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return

    def on_end(self, span: ReadableSpan) -> None:
        try:
            try:  # an ended SDK span's attributes, read directly (see attribute_dict)
                attrs = span._attributes._dict  # type: ignore[union-attr]
            except AttributeError:
                attrs = attribute_dict(span)
            if not self._watched.isdisjoint(attrs):  # a candidate, a piece, or a pattern's
                link: Mapping[str, Any] | None = attrs  # pick: the worker decides
            elif ((self._worker.intake or self._buffer.traces)  # something agent-related is
                  and (context := span.context) is not None  # in flight: this span may be a
                  and (self._worker.intake or context.trace_id in self._buffer.traces)):
                link = None  # parent link, or the root that decides a trace
            else:  # neither: passed straight on
                if self._stripper is not None:
                    self._stripper.strip_if_content(span, attrs)
                if self._enriched is not None:
                    self._enriched.forward(span)
                return
            if self._stripper is not None:  # only stripping cannot wait for the worker
                self._stripper.strip_if_content(span, attrs)  # attrs stays whole
            if not self._offer((span, link)):
                self._flow.decide_now(span, link)
        except Exception:
            self._log_once("on_end", "otel-scorers could not process a span; it was passed on "
                                     "unscored")
            self._forward(span)

    def wait_for_results(self, timeout_millis: int) -> bool:
        """Wait until every result is written to its backends or dropped, retries included
        (unlike ``force_flush``: a batch command's end, ``rescore``); ``True``: none left."""
        sinks = self._parts.sinks
        return sinks is None or sinks.flush(timeout_millis / 1000.0, patient=True)

    # -- sessions ---------------------------------------------------------------------------
    def score_sessions(self, key: str | None = None, timeout_millis: int = 30_000) -> bool:
        """Judge every session with turns not judged yet now (``key``: that one); ``True`` when
        every evaluation finished in time (docs/sessions.md)."""
        return self._flow.score_sessions(key, time.monotonic() + timeout_millis / 1000.0)

    def receive_turns(self, records: Sequence[Any], *, authenticated: bool = False) -> None:
        """Turn records of a gateway fleet, each kept as the next turn of its session when
        sampled here and its sender vouched for (:meth:`.flow.Flow.receive_turns`)."""
        self._flow.receive_turns(records, authenticated)

    # -- flush, exit and shutdown -----------------------------------------------------------
    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Decide every run seen so far and wait for its evaluations (and export enriched
        spans) within the timeout; ``True`` only when every run has its decision."""
        deadline = time.monotonic() + timeout_millis / 1000.0
        done = self._flow.settle(deadline)
        self._flow.decider.warn_unselected()
        return self._flow.flush_out(deadline) and done

    def _at_exit(self) -> None:
        """The main thread finished: pending evaluations (and sessions, which end with the
        process) finish within ``exit_timeout_s``, before the SDK's providers shut down; what
        is left is dropped, counted and said."""
        if not self._shutdown and not self._flow.exit(
                time.monotonic() + self._timeouts.exit_s):
            self._flow.stop(0.0, Reason.EXIT)

    def shutdown(self) -> None:
        """Stop taking spans, drain queued evaluations (bounded), export everything held, and
        let go of the buffered traces (the SDK's exit hook keeps a stopped processor)."""
        with self._shutdown_lock:
            if self._shutdown:
                return
            self._flow.last_turns(self._timeouts.shutdown_s / 2)
            self._shutdown = True
        if self.canaries is not None:
            self.canaries.stop()
        self._flow.stop(self._timeouts.shutdown_s, Reason.SHUTDOWN)
        self._flow.close(self._timeouts.shutdown_s)

    def _after_fork(self) -> None:
        """In a forked child (gunicorn, celery): every lock is new and the parent's buffered
        content, counts, cache, waiting runs and held spans are dropped."""
        self._shutdown_lock = threading.Lock()
        self._flow.reset_after_fork()


def _after_fork(ref: weakref.ReferenceType[ScoringSpanProcessor]) -> None:
    processor = ref()
    if processor is not None:
        processor._after_fork()
