"""The processor's machinery behind its hooks: ended spans in, decided into jobs, judged.

The worker (:mod:`.worker`) takes what ``on_end`` offered, in order; the decider (:mod:`.decide`)
turns it into jobs; each job is judged: an interaction by the evaluation's three steps
(:mod:`.evaluation`), a whole session by the session lane (:mod:`.sessions`). A run whose content
comes in log records waits for them (:mod:`.deferral`). The worker's periodic pass decides traces
gone quiet, judges sessions gone idle, sweeps the buffers and brings waiting runs back.
:meth:`Flow.settle` is what flush, exit and shutdown wait on; :meth:`Flow.abandon` counts what
will never run.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from otel_scorers import background_loop
from otel_scorers.names import Decision, Reason
from otel_scorers.pipeline.build import Parts
from otel_scorers.pipeline.decide import RESOLVE_ALL, Decider
from otel_scorers.pipeline.deferral import Deferred
from otel_scorers.pipeline.emission import check_prices
from otel_scorers.pipeline.evaluation import Job
from otel_scorers.pipeline.health import judge_endpoint
from otel_scorers.pipeline.logs import ScoringLogProcessor
from otel_scorers.pipeline.sessions import SessionJob
from otel_scorers.pipeline.unselected import Unselected
from otel_scorers.pipeline.worker import Worker

__all__ = ["Flow"]

logger = logging.getLogger(__name__)

AnyJob = Job | SessionJob


class Flow:
    """The worker and what feeds it (see the module docstring); ``log_side`` tells whether a
    log side is attached (a run's content may then come later), ``stopped`` whether the
    processor shut down."""

    def __init__(self, parts: Parts, *, queue_size: int, concurrency: int, log_wait_s: float,
                 log_once: Callable[[str, str], None], stopped: Callable[[], bool]) -> None:
        self.parts = parts
        self._log_once, self._stopped = log_once, stopped
        #: the log side, once asked for (:meth:`log_processor`)
        self.log_side: ScoringLogProcessor | None = None
        #: turn records received with no session scorer to keep them (dropped)
        self.turn_records_dropped = 0
        self.per_agent = parts.selector.selection.per_agent
        self.deferred = Deferred(log_wait_s, queue_size)
        self.decider = Decider(parts.selector, parts.buffer, parts.slots, parts.counts,
                               parts.enriched, log_once,
                               log_side=lambda: self.log_side is not None,
                               unselected=Unselected(self.per_agent),
                               keep_steps=parts.evaluation.reader.steps,
                               sessions=parts.sessions,
                               mark=parts.evaluation.emission.emitter)
        self.worker: Worker[AnyJob] = Worker(
            self._handle, queue_size=queue_size, concurrency=concurrency,
            periodic=self._periodic, admit=self.decider.decide, rejected=self.decider.dropped,
            shed=self._shed)
        parts.evaluation.defer = self._defer
        if any(slot.sampler.budget is not None and slot.sampler.budget.max_cost is not None
               for slot in parts.slots):  # warn about judges litellm cannot price
            background_loop.submit(check_prices(parts.slots, log_once))

    def reset_after_fork(self) -> None:
        """In a forked child: every part's state is the parent's, so every part starts anew
        (the worker on the first run)."""
        parts = self.parts
        for part in (self.worker, self.deferred, parts.buffer, parts.counts, parts.evaluation,
                     parts.enriched, parts.sinks, parts.sessions,
                     *(slot.sampler for slot in parts.slots),
                     *(slot.sampler for slot in (parts.sessions.slots if parts.sessions
                                                 else ()))):
            if part is not None:
                part.reset_after_fork()

    def log_processor(self, stopped: Callable[[], bool]) -> ScoringLogProcessor:
        """The log side, made on first use (see
        :meth:`~otel_scorers.pipeline.ScoringSpanProcessor.log_processor`)."""
        if self.log_side is None:
            self.log_side = ScoringLogProcessor(
                buffer=self.parts.buffer, deferred=self.deferred,
                stripper=self.parts.stripper, stopped=stopped)
        return self.log_side

    # -- in -----------------------------------------------------------------------------------
    def decide_now(self, span: ReadableSpan, attrs: Any) -> None:
        """The worker's intake was full (or it stopped) for an ended span (``attrs``
        ``None``: a parent link): decided on the calling thread."""
        if self._stopped():
            self.decider.forward(span)
            return
        if attrs is not None and self.worker.full and self.decider.shed(span, attrs):
            return  # its jobs are dropped: a lone run is decided without being buffered
        self.submit(self.decider.decide((span, attrs)))

    def _shed(self, item: Any) -> bool:
        """The pump's decision of an offered span when the queue is full: shed as on the
        application's thread (the pump takes less of the GIL from an overloaded application)."""
        return isinstance(item, tuple) and item[1] is not None and self.decider.shed(*item)

    def submit(self, jobs: Sequence[AnyJob]) -> None:
        for job in jobs:
            if not self.worker.submit(job):
                self.decider.dropped(job)

    async def _handle(self, job: AnyJob) -> object:
        if isinstance(job, SessionJob):
            assert self.parts.sessions is not None
            return await self.parts.sessions.judge(job)
        return await self.parts.evaluation.run(job)

    def _defer(self, job: Job) -> bool:
        return self.log_side is not None and not self._stopped() and self.deferred.add(job)

    def _resubmit(self, jobs: Sequence[Job]) -> None:
        self.submit([replace(job, attempt=job.attempt + 1) for job in jobs])

    def _periodic(self) -> None:
        parts = self.parts
        if not self.per_agent:
            self.submit(self.decider.resolve_all(
                time.monotonic() - parts.timeouts.interaction_wait_s))
        if parts.sessions is not None:
            self.submit(parts.sessions.due())
        parts.buffer.sweep()
        for pending in parts.buffer.take_evicted():
            self.decider.lost(pending)
        if parts.enriched is not None:
            parts.enriched.sweep()
        if len(self.deferred):
            self._resubmit(self.deferred.due())

    # -- out ----------------------------------------------------------------------------------
    def settle(self, deadline: float) -> bool:
        """Every trace decided, every evaluation done (a run set aside for its log records
        comes back at once), before ``deadline``; ``False`` if it passed first."""
        if not self.per_agent and not self._stopped() and not self.worker.offer(RESOLVE_ALL):
            self.submit(self.decider.resolve_all())
        while True:
            self._resubmit(self.deferred.take_all())
            if not self.worker.flush(max(0.0, deadline - time.monotonic())):
                return False
            if not len(self.deferred):
                return True

    def flush_out(self, deadline: float) -> bool:
        """The results out of the process: held spans exported, the backends written."""
        done = True
        if self.parts.enriched is not None:
            done = self.parts.enriched.force_flush(
                max(0, int((deadline - time.monotonic()) * 1000)))
        if self.parts.sinks is not None:
            done = self.parts.sinks.flush(deadline - time.monotonic()) and done
        return done

    def score_sessions(self, key: str | None, deadline: float) -> bool:
        """Every interaction seen decided, then the sessions with turns not judged yet
        (``key``: that one) judged, before ``deadline``."""
        if self.parts.sessions is None:
            return True
        if not self.settle(deadline):
            return False
        self.sessions_now(key)
        return self.settle(deadline)

    def sessions_now(self, key: str | None = None, trigger: str = "requested") -> None:
        """Judge the sessions with turns not judged yet (``key``: that one) now."""
        if self.parts.sessions is not None:
            self.submit(self.parts.sessions.take(key, trigger))

    def exit(self, deadline: float) -> bool:
        """The main thread finished: every run decided and judged, and the sessions (which
        end with the process), the turns on their way to a fleet sent, the results written,
        before ``deadline``; ``False`` when some evaluation did not finish."""
        settled = self.settle(deadline)
        lane = self.parts.sessions
        if lane is not None:
            self.sessions_now(trigger="exit")
            settled = self.settle(deadline) and settled
            if lane.forward is not None:
                lane.forward.flush(deadline - time.monotonic())
        self.decider.warn_unselected()
        if self.parts.sinks is not None:
            self.parts.sinks.close(deadline - time.monotonic())
        return settled

    def last_turns(self, timeout_s: float) -> None:
        """Shutting down: what was offered decided and queued, and the sessions, with their
        last turns in (waiting at most ``timeout_s`` for those), judged."""
        self.settle(time.monotonic())
        if self.parts.sessions is not None:
            self.worker.flush(timeout_s)
            self.sessions_now(trigger="shutdown")

    def receive_turns(self, records: Sequence[Any], authenticated: bool) -> None:
        """Turn records of a gateway fleet (``attributes``, ``body``, ``trace_id``,
        ``span_id``): each kept as the next turn of its session when sampled here and its
        sender vouched for (``sessions.turn_secret`` verified, else ``authenticated``: the
        gateway checked a token, else ``sessions.accept_turns``); otherwise, or without a
        session scorer, dropped, counted and said once (they carry content: never
        forwarded)."""
        lane = self.parts.sessions
        if lane is None:
            self.turn_records_dropped += len(records)
            self._log_once("turns", "otel-scorers: turn records of a session fleet arrived, "
                           "but no session scorer is configured here: they were dropped. To "
                           "fix: configure the same scorers on every gateway of the fleet")
            return
        if not lane.admits(authenticated):
            lane.refused(len(records))
            self._log_once("turns_refused", "otel-scorers: turn records arrived from a sender "
                           "nobody vouches for: they were dropped (counted in "
                           "health()['sessions']['refused_records']); anyone reaching this "
                           "port could add turns to any session. To fix: set the same "
                           "sessions.turn_secret (OTEL_SCORERS_SESSION_TURN_SECRET) on every "
                           "gateway of the fleet, or give the gateways a token (--token), or "
                           "on a closed network set sessions.accept_turns: true")
            return
        self.worker.start()  # its periodic pass judges the sessions that go idle
        problems = {lane.receive(r.attributes, r.body, r.trace_id, r.span_id)
                    for r in records}
        if "invalid" in problems:
            self._log_once("turn_invalid", "otel-scorers: a turn record could not be read "
                           "(no session key, or no answer): it was dropped (counted in "
                           "health()['sessions']['invalid_records'])")
        if "unsigned" in problems:
            self._log_once("turn_unsigned", "otel-scorers: a turn record was not signed with "
                           "this gateway's sessions.turn_secret: it was dropped (counted in "
                           "health()['sessions']['unsigned_records']). To fix: set the same "
                           "secret on every gateway of the fleet")

    def abandon(self, jobs: Sequence[AnyJob], reason: str) -> None:
        """Jobs that will never run: each scorer's decision dropped for ``reason``, held spans
        released."""
        emission, enriched = self.parts.evaluation.emission, self.parts.enriched
        for job in jobs:
            if isinstance(job, SessionJob):
                assert self.parts.sessions is not None
                self.parts.sessions.dropped(job, reason)
                continue
            for slot in job.slots:
                emission.dropped(slot, reason)
                if job.span.context is not None and enriched is not None:
                    enriched.add(job.span.context.span_id, {})

    def stop(self, timeout_s: float, reason: str) -> None:
        """Stop the worker, waiting ``timeout_s`` for what runs; what is left (queued, or
        cancelled in flight) is dropped for ``reason``, and at exit said in one line."""
        counts = self.parts.counts
        before = counts.count(Decision.DROPPED, reason)
        waiting = self.worker.inflight  # evaluations waiting on the judge now
        self.parts.evaluation.cancel_reason = reason
        self.abandon(self.worker.stop(timeout_s), reason)
        # the traces still buffered: their undecided runs dropped for ``reason``, and their
        # spans and content let go (the stopped processor stays referenced until exit)
        for pending in self.parts.buffer.clear(reason):
            self.decider.lost(pending)
        if self.parts.sessions is not None:  # so are the sessions' turns
            self.parts.sessions.store.clear(reason)
        cut = counts.count(Decision.DROPPED, reason) - before
        if reason == Reason.EXIT:  # at shutdown, what is left was offered every chance
            why = self._why_pending(waiting)
            logger.warning("otel-scorers: %d evaluation(s) were still pending when "
                           "exit_timeout_s=%gs ran out at exit; they were dropped (counted as "
                           "dropped, reason exit)%s", cut, self.parts.timeouts.exit_s, why)

    def _why_pending(self, waiting: int) -> str:
        """What held the evaluations cut off at exit, when it was the judge."""
        hanging = self.parts.evaluation.emission.health.timed_out()
        if hanging:
            return (f"; the judge ({', '.join(hanging)}) did not answer within its timeout: "
                    "check that it is up and not overloaded, or raise "
                    "OTEL_SCORERS_JUDGE_TIMEOUT")
        judges = sorted({judge_endpoint(judge) for slot in self.parts.slots
                         if (judge := getattr(slot.scorer, "judge", None)) is not None})
        if waiting and judges:
            return (f"; the judge ({', '.join(judges)}) had not answered the evaluations in "
                    "flight: check that it is up and not overloaded")
        return ""

    def close(self, timeout_s: float) -> None:
        """After the worker stopped: every held span exported, the results written (within
        ``timeout_s``), the fleet's turn sender and the judging process closed."""
        parts = self.parts
        if parts.evaluation.batch is not None:  # what it holds stays on disk for the next start
            parts.evaluation.batch.close(min(10.0, timeout_s / 3))
        if parts.enriched is not None:
            parts.enriched.release_all(Reason.SHUTDOWN)
            parts.enriched.shutdown()
        if parts.sinks is not None:
            parts.sinks.close(timeout_s)
        if parts.sessions is not None and parts.sessions.forward is not None:
            parts.sessions.forward.shutdown()
        if parts.evaluation.asker.isolated is not None:
            try:
                background_loop.submit(parts.evaluation.close()).result(timeout=10.0)
            except Exception:  # the loop is gone at exit: the child sees EOF and ends
                logger.debug("otel-scorers: judging process not closed", exc_info=True)
