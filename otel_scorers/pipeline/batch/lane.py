"""The batch lane of the scorers with ``lane: batch``: their judgements at the batch price,
emitted late (see :mod:`otel_scorers.judge.batches` for the spool and the API).

A selected run of such a scorer is not asked now: its judge request (the scorer's own prompt)
goes to the spool with the run and the evaluated span's trace and span ids, and the evaluation
of that scorer ends there (no decision yet: ``health()["batch"]["spooled"]`` counts them). Every
``batch.interval_s`` the lane submits what waits (one JSONL file, one batch, at most
``batch.max_lines`` lines) and polls the open batches. A completed batch's answers are parsed by
the scorer's own code and emitted as any result is, late, on the evaluated span's context: the
evaluation span (a child of the evaluated span, started when the run was spooled), the
``gen_ai.evaluation.result`` event, the metrics (recorded when the answer arrives) and the
sinks; then the entry leaves the spool. A request is in a batch while that batch's record (its
id and its requests' ids) is on disk: submitting writes nothing else, so a crash never leaves a
request both waiting and in a batch. A line that failed, expired or never came back is asked
again in a later batch, at most ``batch.max_attempts`` times, then emitted as an error result
whose ``error.type`` says why (``batch_failed``, ``batch_expired``). A batch that is not done
``batch.give_up_after_s`` after it was created counts as expired.

At start the spool is read again: the entries not yet emitted and the batches in flight go on
(after a ``kill -9`` too). An entry is removed only after its result was emitted, so a crash
between the two emits it again at restart (at least once; in practice only for a result that was
being written when the process died).

Several processes on one spool (a server's workers, forked or each with its own processor):
each spools what it selects; the one that holds the spool's lock (:meth:`Spool.lead`) submits,
polls and emits for all of them, on their own trace and span ids. In a forked child the lane
starts again with its first deferred run; when the leading process ends (a stop, a crash, a
``kill -9``) another one's next round takes over. ``health()["batch"]["leading"]`` says which.

At exit the leading process submits what still waits (within a few seconds), and a process that
leaves judgements in the spool says so in one line: they are emitted by the next process on that
spool. A job that runs once and ends judges history with ``otel-scorers rescore --lane batch``,
which waits for its batch.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry.trace import SpanContext, TraceFlags

from otel_scorers import background_loop
from otel_scorers.capture import Captured
from otel_scorers.emit.spans import Subject
from otel_scorers.names import Reason
from otel_scorers.scorers.result import ScoreError, ScoreResult
from otel_scorers.scorers.run import ScorerRun

__all__ = ["BatchLane", "BatchParts"]

logger = logging.getLogger(__name__)

@dataclass(frozen=True)
class BatchParts:
    """What the lane uses from the judge layer (made by ``pipeline.batch.build``)."""

    spool: Any
    api: Any
    request_of: Callable[..., Any]
    replay: Callable[..., Any]
    #: the JSONL input of bodies by id; a finished batch's answers and failures by id
    batch_lines: Callable[[dict[str, Any]], bytes]
    answers: Callable[..., Any]
    #: the states of a batch that is over
    finished: frozenset[str]
    #: the most bytes of one batch's input file (the provider's limit: OpenAI's is 200 MB)
    max_batch_bytes: int
    interval_s: float
    max_lines: int
    max_attempts: int
    window: str
    give_up_after_s: float


class BatchLane:
    """Defers the judgements of the batch scorers and emits them when they come back."""

    def __init__(self, parts: BatchParts, slots: Mapping[str, Any], emission: Any,
                 log_once: Callable[[str, str], None]) -> None:
        self.parts, self.slots, self.emission, self._log_once = parts, slots, emission, log_once
        self.counts = {"spooled": 0, "submitted": 0, "emitted": 0, "retried": 0, "failed": 0,
                       "spool_full": 0}
        self._task: Any = None
        self._stopped = False
        self._lock = asyncio.Lock()

    def reset_after_fork(self) -> None:
        """In a forked child: a fresh lock, no rounds (they start with the child's first
        deferred run), counts of its own; the parent keeps the spool's lead while it lives."""
        self._task, self._lock = None, asyncio.Lock()
        self.counts = dict.fromkeys(self.counts, 0)
        self.parts.spool.after_fork()

    def handles(self, name: str) -> bool:
        return name in self.slots

    # -- in ------------------------------------------------------------------------------------
    async def defer(self, slot: Any, subject: Subject, captured: Captured) -> None:
        """Spool ``slot``'s judgement of ``captured``'s run about ``subject`` (or count why
        not: a full spool drops it, ``spool_full``; a scorer that asks nothing is judged now)."""
        run = captured.run
        assert run is not None
        if self._task is None and not self._stopped:  # a forked child's first: its rounds
            self.start()
        body = await self.parts.request_of(slot.scorer, run)
        if body is None:  # nothing to ask the judge: its result is final now
            result = await slot.scorer.arun(run)
            self.emission.decided(slot, subject, captured, result, judged=True,
                                  start_ns=time.time_ns())
            return
        context = subject.context
        ident = hashlib.sha256(f"{slot.name}:{context.trace_id:032x}:{context.span_id:016x}:"
                               f"{run.run_id}".encode()).hexdigest()[:32]
        entry = {"id": ident, "scorer": slot.name, "run": run.model_dump(mode="json"),
                 "trace_id": f"{context.trace_id:032x}", "span_id": f"{context.span_id:016x}",
                 "span_name": subject.name, "agent": captured.agent, "source": captured.source,
                 "body": body, "attempts": 0, "spooled_ns": time.time_ns()}
        if await asyncio.to_thread(self.parts.spool.add, entry):
            self.counts["spooled"] += 1
            return
        self.counts["spool_full"] += 1
        self.emission.dropped(slot, Reason.SPOOL_FULL)
        self._log_once("batch:full", "otel-scorers: the batch spool is full: judgements of the "
                       "batch lane are dropped (decision dropped, reason spool_full). To fix: "
                       "raise batch.max_bytes (OTEL_SCORERS_BATCH_MAX_BYTES) or sample less")

    # -- the rounds ----------------------------------------------------------------------------
    def start(self) -> None:
        if self._task is None:
            self._task = background_loop.submit(self._run())

    def stop(self) -> None:
        """Stop the rounds; what is spooled or in flight stays on disk for the next start."""
        self._stopped = True
        if self._task is not None:
            self._task.cancel()
        self.parts.spool.release()

    def close(self, timeout_s: float) -> None:
        """At shutdown (not on the loop): submit what waits if this process leads (within
        ``timeout_s``), stop, and say in one line what is left on disk."""
        self._stopped = True
        submitted = 0
        if not background_loop.in_loop():
            try:
                submitted = background_loop.submit(asyncio.wait_for(
                    self._last_round(), timeout_s)).result(timeout=timeout_s + 1)
            except Exception as exc:  # the provider unreachable or slow: left for the next
                logger.debug("batch lane: nothing submitted at exit", exc_info=exc)
        self.stop()
        waiting = self.parts.spool.recount()
        if waiting and (self.counts["spooled"] or submitted):
            logger.warning(
                "otel-scorers: %d batch-lane judgement(s) wait in the spool %s (%d submitted "
                "at exit); the next process whose batch lane uses this spool (another worker, "
                "or the next start) emits them when their batch is done. A job that runs once "
                "should judge with `otel-scorers rescore --lane batch`, which waits for its "
                "batch", waiting, self.parts.spool.root, submitted)

    async def _last_round(self) -> int:
        """What waits submitted in one batch (no polling), unless another process leads: it
        submits then (a job that ends before its first round leads now)."""
        async with self._lock:
            spool = self.parts.spool
            if not await asyncio.to_thread(spool.lead):
                return 0
            return await self._submit_waiting()

    async def _run(self) -> None:
        # one interval first: what the start's first runs spool goes in one batch
        await background_loop.every(self.parts.interval_s, self.round,
                                    lambda: self._stopped, self._failed)

    def _failed(self, exc: Exception) -> None:
        """The provider unreachable, a bad answer: said once, tried again next round."""
        logger.debug("batch round failed", exc_info=exc)
        self._log_once("batch:round", f"otel-scorers: a batch round failed ({exc}); it is "
                       "tried again every batch.interval_s")

    async def round(self) -> None:
        """Poll the open batches (emitting what came back), then submit what waits. One batch
        and one entry at a time in memory, however many wait on disk."""
        async with self._lock:
            spool = self.parts.spool
            if not await asyncio.to_thread(spool.lead):  # another process submits and emits
                await asyncio.to_thread(spool.recount)
                return
            await asyncio.to_thread(spool.recount)
            for batch in (await asyncio.to_thread(spool.batches)).values():
                await self._poll(batch)
            if not self._stopped:
                await self._submit_waiting()

    def _waiting(self) -> tuple[list[str], Path | None]:
        """The ids of what waits and its batch input in a file of the spool (in a thread):
        at most ``batch.max_lines`` lines and ``max_batch_bytes`` bytes, one entry in memory
        at a time."""
        ids: list[str] = []
        size = 0
        spool = self.parts.spool
        submitted = {ident for batch in spool.batches().values()
                     for ident in batch.get("entries", ())}
        path = spool.scratch()
        with path.open("wb") as out:
            for entry in spool.each():
                if entry["id"] in submitted or entry.get("scorer") not in self.slots:
                    continue
                line = self.parts.batch_lines({entry["id"]: entry["body"]})
                if len(ids) >= self.parts.max_lines or \
                        size + len(line) > self.parts.max_batch_bytes:
                    break
                out.write(line)
                ids.append(entry["id"])
                size += len(line)
        if not ids:
            path.unlink(missing_ok=True)
            return [], None
        return ids, path

    async def _submit_waiting(self) -> int:
        """What waits, in one batch; the number of requests submitted."""
        ids, path = await asyncio.to_thread(self._waiting)
        if path is None:
            return 0
        try:
            await self._submit(ids, path)
        finally:
            path.unlink(missing_ok=True)
        return len(ids)

    async def _submit(self, ids: list[str], lines: Path) -> None:
        api, spool = self.parts.api, self.parts.spool
        file_id = await api.upload(lines)
        batch = await api.create(file_id, self.parts.window)
        ident = batch.get("id")
        if not isinstance(ident, str):
            raise ValueError("the batch API gave the batch no id")
        # its record is what puts the requests in the batch (one synced write for them all)
        await asyncio.to_thread(spool.save_batch, {
            "id": ident, "entries": ids, "created": time.time()})
        self.counts["submitted"] += len(ids)

    async def _poll(self, batch: dict[str, Any]) -> None:
        api, spool = self.parts.api, self.parts.spool
        state = await api.retrieve(batch["id"])
        status = state.get("status")
        late = time.time() - float(batch.get("created", 0)) > self.parts.give_up_after_s
        if status not in self.parts.finished and not late:
            return
        answered, failed = await self.parts.answers(api, state)
        reason = "batch_expired" if status == "expired" or late else "batch_failed"
        for ident in batch.get("entries", ()):
            entry = await asyncio.to_thread(spool.get, str(ident))
            if entry is None:
                continue  # emitted already (a restart after the emission)
            try:
                if ident in answered:
                    await self._emit(entry, answered[ident])
                else:
                    await self._again(entry, failed.get(ident, reason))
            except Exception:  # one line that cannot be emitted never holds its batch's others
                logger.debug("batch line not emitted", exc_info=True)
                self._log_once("batch:line", "otel-scorers: a batch answer could not be "
                               "emitted (an internal error, counted as the scorer's error); "
                               "the others go on")
                slot = self.slots.get(entry["scorer"])
                if slot is not None:
                    self.emission.failed(slot)
                self.counts["failed"] += 1
                await asyncio.to_thread(spool.remove, entry["id"])
        await asyncio.to_thread(spool.drop_batch, batch["id"])

    async def _again(self, entry: dict[str, Any], reason: str) -> None:
        """A line that did not come back: asked again (once its batch's record is dropped),
        or past its attempts an error result."""
        entry["attempts"] = int(entry.get("attempts", 0)) + 1
        if entry["attempts"] < self.parts.max_attempts:
            await asyncio.to_thread(self.parts.spool.update, entry)
            self.counts["retried"] += 1
            return
        slot = self.slots.get(entry["scorer"])
        if slot is not None:
            message = (f"the batch lane got no answer after {entry['attempts']} attempt(s) "
                       f"({reason})")
            result = ScoreResult(run_id=str(entry["run"].get("run_id", "")), scorer=slot.name,
                                 scale=float(getattr(slot.scorer, "scale", 1.0)),
                                 error=ScoreError(type=reason, message=message),
                                 reason=f"Not scored: {message}")
            self._emit_result(slot, entry, result, judged=False)
        self.counts["failed"] += 1
        await asyncio.to_thread(self.parts.spool.remove, entry["id"])

    async def _emit(self, entry: dict[str, Any], body: dict[str, Any]) -> None:
        slot = self.slots.get(entry["scorer"])
        if slot is None:  # a scorer no longer configured: its answer is left on disk
            return
        run = ScorerRun.model_validate(entry["run"])
        result = await self.parts.replay(slot.scorer, run, body)  # priced as the batch tier's
        self._emit_result(slot, entry, result, judged=True)
        self.counts["emitted"] += 1
        await asyncio.to_thread(self.parts.spool.remove, entry["id"])

    def _emit_result(self, slot: Any, entry: dict[str, Any], result: ScoreResult, *,
                     judged: bool) -> None:
        context = SpanContext(int(entry["trace_id"], 16), int(entry["span_id"], 16),
                              is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
        subject = Subject(context, str(entry.get("span_name") or ""))
        run = ScorerRun.model_validate(entry["run"])
        captured = Captured(run, source=entry.get("source"), agent=entry.get("agent"))
        self.emission.decided(slot, subject, captured, result, judged=judged,
                              start_ns=int(entry.get("spooled_ns") or time.time_ns()))

    def report(self) -> dict[str, Any]:
        """For ``health()["batch"]``: what is waiting on disk and what happened since start."""
        spool = self.parts.spool
        return {**self.counts, "pending_bytes": spool.used_bytes, "leading": spool.leading}
