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
requests' ids, written with an intent token before ``POST /v1/batches``, the batch's id added
after) is on disk: submitting writes nothing else, so a crash never leaves a request both
waiting and in a batch. A line that failed, expired or never came back is asked again in a
later batch, at most ``batch.max_attempts`` times, then emitted as an error result whose
``error.type`` says why (``batch_failed``, ``batch_expired``, ``batch_lost``). A batch that is
not done ``batch.give_up_after_s`` after it was created is given up and cancelled at the
provider (:mod:`.polling` says how each answer of the provider is settled).

The lane's promise, whatever the provider answers (404s, garbage, files that never end):

- every request in the spool is decided (scored, or an error result with a counted reason)
  within ``batch.max_attempts`` attempts, each ending within ``batch.give_up_after_s`` plus one
  ``batch.interval_s`` round after its batch was created; a batch that cannot be read never
  holds the round: the other batches are polled and new requests submitted;
- no line is paid for twice, except where the provider is asked again on purpose (a line it
  failed, expired or lost) and in one window: a process killed during ``POST /v1/batches`` (or
  a create that timed out) on a provider that neither keeps the batch's ``metadata`` nor lists
  its batches, where the intent cannot be matched to the batch and its requests go out again;
- memory while reading an answer is bounded by one 64 kB download chunk plus about ten times
  one line (at most 2 MB), never by the provider's file (:mod:`otel_scorers.judge.batch_output`);
- nothing in the spool is used unless this process's user wrote it (the directory's ownership
  and mode checked at start and at each lead; :mod:`otel_scorers.judge.spool`).

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
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry.trace import SpanContext, TraceFlags

from otel_scorers import background_loop
from otel_scorers.capture import Captured
from otel_scorers.emit.spans import Subject
from otel_scorers.names import Reason
from otel_scorers.pipeline.batch.polling import INTENT_KEY, Polling
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
    #: the JSONL input of bodies by id
    batch_lines: Callable[[dict[str, Any]], bytes]
    #: a finished batch's files read line by line, each line handed on
    read_answers: Callable[..., Any]
    #: the states of a batch that is over
    finished: frozenset[str]
    #: what the spool raises when it is not this user's alone
    refused: type[Exception]
    #: the most bytes of one batch's input file (the provider's limit: OpenAI's is 200 MB)
    max_batch_bytes: int
    interval_s: float
    max_lines: int
    max_attempts: int
    window: str
    give_up_after_s: float


#: What ``health()["batch"]`` counts since the start (see :mod:`.polling` for the batches').
COUNTS = ("spooled", "submitted", "emitted", "retried", "failed", "spool_full", "lost",
          "given_up", "cancelled", "cancel_failed", "adopted", "intents_dropped",
          "record_failed", "truncated", "missing_files", "unreadable_lines", "duplicates",
          "round_errors", "untrusted")


class BatchLane(Polling):
    """Defers the judgements of the batch scorers and emits them when they come back."""

    def __init__(self, parts: BatchParts, slots: Mapping[str, Any], emission: Any,
                 log_once: Callable[[str, str], None]) -> None:
        self.parts, self.slots, self.emission, self._log_once = parts, slots, emission, log_once
        self.counts = dict.fromkeys(COUNTS, 0)
        self._created: dict[str, str] = {}
        self._task: Any = None
        self._stopped = False
        self._lock = asyncio.Lock()

    def reset_after_fork(self) -> None:
        """In a forked child: a fresh lock, no rounds (they start with the child's first
        deferred run), counts of its own; the parent keeps the spool's lead while it lives."""
        self._task, self._lock = None, asyncio.Lock()
        self.counts, self._created = dict.fromkeys(self.counts, 0), {}
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
        try:
            added = await asyncio.to_thread(self.parts.spool.add, entry)
        except OSError as exc:  # a full disk, a read-only one: the same counted reason
            self.counts["spool_full"] += 1
            self.emission.dropped(slot, Reason.SPOOL_FULL)
            self._log_once("batch:write", "otel-scorers: the batch spool cannot be written "
                           f"({exc.strerror or type(exc).__name__}): judgements of the batch "
                           "lane are dropped (decision dropped, reason spool_full). To fix: "
                           "free space under, or point batch.directory "
                           "(OTEL_SCORERS_BATCH_DIR) at, a writable disk with room")
            return
        if added:
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
        self.counts["round_errors"] += 1
        if isinstance(exc, OSError):
            self._log_once("batch:disk", "otel-scorers: the batch lane cannot write its spool "
                           f"({exc.strerror or exc}): nothing is submitted until it can; free "
                           "space under batch.directory (OTEL_SCORERS_BATCH_DIR)")
            return
        self._log_once("batch:round", f"otel-scorers: a batch round failed ({exc}); it is "
                       "tried again every batch.interval_s")

    async def round(self) -> None:
        """Poll the open batches (emitting what came back), then submit what waits. One batch
        and one entry at a time in memory, however many wait on disk; a batch that fails to
        poll is tried again next round and holds neither the others nor the submission."""
        async with self._lock:
            spool = self.parts.spool
            try:
                leading = await asyncio.to_thread(spool.lead)
            except self.parts.refused as exc:
                self.counts["untrusted"] += 1
                self._log_once("batch:untrusted", f"otel-scorers: the batch spool is refused "
                               f"({exc}): nothing in it is sent or emitted; set batch.directory "
                               "(OTEL_SCORERS_BATCH_DIR) to a directory only this user can "
                               "write")
                return
            await asyncio.to_thread(spool.recount)
            if not leading:  # another process submits and emits
                return
            for batch in (await asyncio.to_thread(spool.batches)).values():
                try:
                    await self._poll(batch)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    self._failed(exc)
            self._said_set_aside()
            if not self._stopped:
                await self._submit_waiting()

    def _said_set_aside(self) -> None:
        aside = self.parts.spool.set_aside
        if aside["unreadable"]:
            self._log_once("batch:unreadable", f"otel-scorers: {aside['unreadable']} batch "
                           "spool entr(y/ies) could not be read (truncated, empty, not of the "
                           "lane's shape) and were set aside as *.unreadable: their runs are "
                           "not judged (health()['batch']['spool_unreadable'])")
        if aside["refused"]:
            self._log_once("batch:refused", f"otel-scorers: {aside['refused']} batch spool "
                           "entr(y/ies) were not this user's regular files and were set aside "
                           "as *.refused, never sent; check who writes batch.directory "
                           "(OTEL_SCORERS_BATCH_DIR)")

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
        """One batch of ``ids``: its record (the requests and an intent token, which the batch
        carries in its ``metadata``) written before it is created, its id added after; a full
        disk before the create sends nothing, after it the batch is followed from memory."""
        api, spool = self.parts.api, self.parts.spool
        token = uuid.uuid4().hex
        record: dict[str, Any] = {"intent": token, "entries": ids, "created": time.time()}
        # the record is what puts the requests in the batch (one synced write for them all)
        await asyncio.to_thread(spool.save_batch, record)
        file_id = await api.upload(lines)
        batch = await api.create(file_id, self.parts.window, {INTENT_KEY: token})
        ident = batch.get("id")
        if not isinstance(ident, str):
            raise ValueError("the batch API gave the batch no id")
        self.counts["submitted"] += len(ids)
        try:
            await asyncio.to_thread(spool.save_batch, {**record, "id": ident})
        except OSError as exc:
            self._created[token] = ident
            self.record_failed(exc)

    async def _again(self, entry: dict[str, Any], reason: str, *, final: bool = False,
                     message: str | None = None) -> None:
        """A line that did not come back: asked again (once its batch's record is dropped),
        or (``final``, or past its attempts) an error result."""
        entry["attempts"] = int(entry.get("attempts", 0)) + 1
        if entry["attempts"] < self.parts.max_attempts and not final:
            await asyncio.to_thread(self.parts.spool.update, entry)
            self.counts["retried"] += 1
            return
        slot = self.slots.get(entry["scorer"])
        if slot is not None:
            message = (f"the batch lane got no answer after {entry['attempts']} attempt(s) "
                       f"({reason}{': ' + message if message else ''})")
            result = ScoreResult(run_id=str(entry["run"].get("run_id", "")), scorer=slot.name,
                                 scale=float(getattr(slot.scorer, "scale", 1.0)),
                                 error=ScoreError(type=reason, message=message),
                                 reason=f"Not scored: {message}")
            self._emit_result(slot, entry, result, judged=False)
        self.counts["failed"] += 1
        await asyncio.to_thread(self.parts.spool.remove, entry["id"])

    def _line_failed(self, entry: dict[str, Any]) -> None:
        """A line whose emission raised: the scorer's internal error, out of the spool."""
        self._log_once("batch:line", "otel-scorers: a batch answer could not be emitted (an "
                       "internal error, counted as the scorer's error); the others go on")
        slot = self.slots.get(entry["scorer"])
        if slot is not None:
            self.emission.failed(slot)
        self.counts["failed"] += 1
        self.parts.spool.remove(entry["id"])

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
        return {**self.counts, "spool_unreadable": spool.set_aside["unreadable"],
                "spool_refused": spool.set_aside["refused"],
                "pending_bytes": spool.used_bytes, "leading": spool.leading}
