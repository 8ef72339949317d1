"""One evaluation of one run, in three steps: check, ask, emit.

The worker hands a :class:`Job` (an ended span and the scorers that sampled it) to
:meth:`Evaluation.run` on the library's background loop. The run is captured from the span and
what was buffered under it (:mod:`.runs`); a run without content waits for its log records or is
counted with its reason. Then, for the scorers of the job:

1. **check** (:mod:`.check`): for each scorer, before anything is asked: its budget is spent,
   its judgement is cached, the same judgement is in flight elsewhere (join it), or it must be
   asked;
2. **ask** (:mod:`.ask`): the scorers that must ask are grouped by judge (one fused call per
   group with ``fuse_judge_calls``, else one call each), each group a task bounded by
   ``evaluation_timeout_s``;
3. **emit** (:mod:`.emission`): each scorer's one decision counted and its result sent out
   (metrics, evaluation span and event, result backends, enriched export).

Every (span, scorer) pair of a job ends in exactly one counted decision, and a span held for
enriched export is released once all its scorers are done, whatever happened. A whole session
(:mod:`.sessions`) is judged by the same steps through :meth:`Evaluation.judge`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from otel_scorers.capture import Captured
from otel_scorers.capture.pieces import Piece
from otel_scorers.capture.trace import TraceBuffer
from otel_scorers.emit.spans import Subject
from otel_scorers.names import Reason
from otel_scorers.pipeline.ask import Asker, Asking
from otel_scorers.pipeline.check import Checker, Plan
from otel_scorers.pipeline.emission import Emission
from otel_scorers.pipeline.runs import RunReader
from otel_scorers.pipeline.slots import Slot
from otel_scorers.scorers.result import ScoreResult

__all__ = ["Evaluation", "Job"]

#: Keeps a captured interaction of a session as its next turn: (key, the session scorers that
#: sampled it, the span, the capture).
KeepTurn = Callable[[str, tuple[str, ...], ReadableSpan, Captured], None]


@dataclass(frozen=True)
class Job:
    """An ended span to evaluate, the scorers that sampled it, and its attributes as they were
    when it ended (``None``: read them from the span). ``attempt`` counts the times the job
    came back after waiting for log records that carry its content; ``agent`` names the
    interaction's agent when its span does not (a workflow root holding named agents).
    ``session_key``: the run is a turn of that sampled session (``session_slots`` judge it
    later), kept once captured."""

    span: ReadableSpan
    slots: tuple[Slot, ...]
    attributes: Mapping[str, Any] | None = None
    attempt: int = 0
    agent: str | None = None
    session_key: str | None = None
    session_slots: tuple[str, ...] = ()


class Evaluation:
    """Everything one evaluation needs (see the module docstring); :meth:`run` evaluates one
    job. ``defer`` is called with a job whose span had no content: ``True`` when it was set
    aside to come back once its log records arrive (or their wait is over)."""

    def __init__(self, *, reader: RunReader, checker: Checker, asker: Asker,
                 emission: Emission, buffer: TraceBuffer | None = None,
                 defer: Callable[[Job], bool] | None = None,
                 keep_turn: KeepTurn | None = None) -> None:
        self.reader, self.checker, self.asker, self.emission = reader, checker, asker, emission
        self.buffer = buffer
        self.defer = defer
        self.keep_turn = keep_turn
        #: The reason counted for evaluations cancelled before they finished.
        self.cancel_reason: str = Reason.SHUTDOWN
        #: the batch lane (``pipeline.batch.lane.BatchLane``) of the scorers with lane batch
        self.batch: Any = None

    def reset_after_fork(self) -> None:
        """In a forked child: no judgements in flight, an empty cache, fresh locks."""
        self.checker.reset_after_fork()
        self.emission.reset_after_fork()
        if self.batch is not None:
            self.batch.reset_after_fork()

    async def run(self, job: Job, *, descendants: Sequence[ReadableSpan | Piece] | None = None,
                  nested: int = 0, links: Mapping[int, int | None] | None = None
                  ) -> list[ScoreResult]:
        """Capture ``job.span``'s run and judge it with each of the job's scorers.

        Returns the results in scorer order; an empty list when nothing could be captured (the
        ``filtered`` decision says why).
        """
        span = job.span
        lost = (self.buffer.lost(span.context.trace_id)
                if self.buffer is not None and span.context is not None and descendants is None
                else None)
        if lost is not None:  # its steps were let go while it waited: dropped, not judged
            return self._lost(job, lost)
        captured = self.reader.capture_safely(span, attributes=job.attributes,
                                              descendants=descendants, nested=nested,
                                              agent=job.agent, links=links)
        if (captured.reason == Reason.NO_CONTENT and descendants is None
                and self.defer is not None and self.defer(job)):
            return []  # back when its log records arrive, or their wait is over (still held)
        if self.buffer is not None and span.context is not None and descendants is None:
            # read: the hold of this job on its trace ends (an evaluated root's trace goes)
            self.buffer.release(span.context.trace_id, root=span.parent is None)
        elif self.buffer is not None and span.parent is None and span.context is not None:
            self.buffer.discard(span.context.trace_id)  # (read from the pieces given)
        if job.session_key is not None and self.keep_turn is not None:
            try:
                self.keep_turn(job.session_key, job.session_slots, span, captured)
            except Exception:
                self.emission.log_once("session", "otel-scorers could not keep a turn of a "
                                                  "session")
        subject = Subject.of(span, held=True)
        if captured.run is None or subject is None:
            self.emission.not_captured(job.slots, captured.reason or Reason.NO_CONTENT)
            if subject is not None:
                for _ in job.slots:
                    self.emission.release(subject, {})
            self.reader.say_why(span, captured, job.attributes)
            return []
        if captured.run.steps:
            try:
                self.emission.metrics.steps(captured.run.steps, captured.agent,
                                            captured.version)
            except Exception:
                self.emission.log_once("emit", "otel-scorers could not emit an evaluation "
                                               "result")
        return await self.judge(subject, job.slots, captured)

    def _lost(self, job: Job, reason: str) -> list[ScoreResult]:
        """A queued run whose trace the buffer had to let go before the run was read (held
        past ``max_hold_s``, or evicted with every other trace held): counted as dropped for
        that reason, said once with what to change, its span passed on."""
        for slot in job.slots:
            self.emission.dropped(slot, reason)
        subject = Subject.of(job.span, held=True)
        if subject is not None:
            for _ in job.slots:
                self.emission.release(subject, {})
        self.emission.log_once(f"lost:{reason}", (
            f"otel-scorers: a queued run's steps were let go before it was judged (decision "
            f"dropped, reason {reason}): the queue waited longer than the trace buffer keeps "
            "them. To fix: raise concurrency, sample fewer runs, or use a faster judge"))
        return []

    async def judge(self, subject: Subject, slots: Sequence[Slot], captured: Captured, *,
                    extra: Mapping[str, Any] | None = None, turns: int | None = None
                    ) -> list[ScoreResult]:
        """Judge a captured run with ``slots`` in the three steps; the results in scorer order
        (``extra``, ``turns``: a whole session's attributes and size)."""
        run = captured.run
        assert run is not None
        plans = [self.checker.plan(slot, run) for slot in slots]
        asking = self.asker.ask(run, [plan.slot for plan in plans if plan.step == "ask"],
                                alone=len(plans) == 1)
        try:
            if len(plans) == 1:  # one scorer: judged and emitted in this task
                results = [await self._finish(subject, plans[0], asking, captured, extra,
                                              turns)]
            else:
                results = await asyncio.gather(*(
                    self._finish(subject, plan, asking, captured, extra, turns)
                    for plan in plans))
        finally:
            asking.cancel()
        return [result for result in results if result is not None]

    async def _finish(self, subject: Subject, plan: Plan, asking: Asking, captured: Captured,
                      extra: Mapping[str, Any] | None, turns: int | None
                      ) -> ScoreResult | None:
        """One scorer's judgement awaited and emitted: exactly one counted decision."""
        slot = plan.slot
        counted = False
        attributes: dict[str, Any] = {}
        try:
            if plan.step == "budget":
                self.emission.budget_spent(slot, subject, captured.agent)
                counted = True
                return None
            if plan.step == "batch" and self.batch is not None:  # decided when it comes back
                await self.batch.defer(slot, Subject(subject.context, subject.name), captured)
                counted = True
                return None
            start_ns = time.time_ns()
            judged = plan.step == "ask"
            if judged:
                result = await self._asked(plan, asking)
            else:
                reused = plan.result if plan.shared is None else await asyncio.shield(
                    plan.shared)
                assert reused is not None and captured.run is not None
                result = reused.model_copy(update={"run_id": captured.run.run_id,
                                                   "cached": True})
            attributes = self.emission.decided(slot, subject, captured, result, judged=judged,
                                               start_ns=start_ns, extra=extra, turns=turns)
            counted = True
            return result
        except asyncio.CancelledError:
            if not counted:
                self.emission.dropped(slot, self.cancel_reason)
            raise
        except Exception:
            if not counted:
                self.emission.failed(slot)
            return None
        finally:
            self.emission.release(subject, attributes)

    async def _asked(self, plan: Plan, asking: Asking) -> ScoreResult:
        """The asked judgement; whoever joined it (single flight) gets the same end."""
        try:
            result = await asking.result(plan.slot.name)
        except BaseException as exc:
            self.checker.failed(plan, exc)
            raise
        self.checker.answered(plan, result)
        return result

    async def close(self) -> None:
        """Stop the judging process, if any (its evaluations are over or abandoned), and the
        batch lane's rounds (what it holds stays on disk)."""
        if self.batch is not None:
            self.batch.stop()
        await self.asker.close()
