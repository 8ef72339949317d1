"""How the batch lane settles one submitted batch, whatever the provider answers (the lane's
promise is in :mod:`.lane`).

- ``GET /v1/batches/{id}`` answers 404 or 410: the provider lost the batch (deleted, expired
  out of its store, another account's): counted ``lost``, its requests asked again in a later
  batch (an attempt each, at most ``batch.max_attempts``, then ``batch_lost`` error results).
- Any other failure to read the batch (another status, no JSON, no connection): tried again at
  the next round while the batch is younger than ``batch.give_up_after_s``; past it the batch is
  given up (below). The round goes on with the other batches and the new submissions.
- Not finished ``batch.give_up_after_s`` after it was created: given up: cancelled at the
  provider (``POST /v1/batches/{id}/cancel``, best effort: ``cancelled`` or ``cancel_failed``
  counted; what the provider finished before is billed), its requests asked again or, past their
  attempts, ``batch_expired`` error results.
- Finished: its output and error files are read line by line (:mod:`otel_scorers.judge.
  batch_output`); each answered request is emitted, each failed one asked again. A file the
  provider answers 404 for (``missing_files``), a line that does not read (``unreadable_lines``)
  or a request no line answers: that request is asked again. A ``custom_id`` seen twice keeps
  its first line (``duplicates``). An output file over the 256 MB bound (``truncated``): the
  lines within the bound are used and the batch's other requests end as ``batch_failed`` error
  results at once (asked again they would make the same file), so the file is read once.
- A record written before ``create`` with no batch id yet (an ``intent``; the process died
  during the ``POST /v1/batches``, or the record's second write failed): the provider's batch
  with that intent in its ``metadata`` is adopted (``adopted``); none there (the call never
  reached it), the intent is dropped and its requests wait for the next batch.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from otel_scorers.errors import JudgeError, JudgeRequestError

__all__ = ["INTENT_KEY", "Polling"]

logger = logging.getLogger(__name__)

#: The batch's ``metadata`` key carrying the intent of its record (found after a crash).
INTENT_KEY = "otel_scorers_intent"
#: The states of a batch or file the provider no longer has.
GONE = frozenset({404, 410})
#: Answers of a provider without a batches list (an intent cannot be looked up there).
NO_LIST = frozenset({404, 405, 501})


class Polling:
    """The batch lane's settling of its batches (a part of :class:`~.lane.BatchLane`)."""

    parts: Any
    counts: dict[str, int]
    _log_once: Callable[[str, str], None]
    #: intents this process created a batch for, with its id (while its record may lack it)
    _created: dict[str, str]

    async def _again(self, entry: dict[str, Any], reason: str, *, final: bool = False,
                     message: str | None = None) -> None:
        raise NotImplementedError

    async def _emit(self, entry: dict[str, Any], body: dict[str, Any]) -> None:
        raise NotImplementedError

    def _line_failed(self, entry: dict[str, Any]) -> None:
        raise NotImplementedError

    async def _poll(self, batch: dict[str, Any]) -> None:
        if not isinstance(batch.get("id"), str):
            await self._resolve_intent(batch)
            return
        api = self.parts.api
        late = time.time() - float(batch.get("created", 0)) > self.parts.give_up_after_s
        try:
            state = await api.retrieve(batch["id"])
        except JudgeRequestError as exc:
            if exc.status_code in GONE:
                self.counts["lost"] += 1
                self._log_once("batch:lost", f"otel-scorers: the provider no longer knows a "
                               f"batch ({exc}): its requests are asked again in a later batch "
                               "(counted lost)")
                await self._settle(batch, set(), "batch_lost")
                return
            if not late:
                raise
            state = {}
        except JudgeError:
            if not late:
                raise
            state = {}
        status = state.get("status")
        if status not in self.parts.finished:
            if late:
                await self._give_up(batch)
            return
        await self._read(batch, state, late)

    async def _read(self, batch: dict[str, Any], state: dict[str, Any], late: bool) -> None:
        entries = {str(ident) for ident in batch.get("entries", ())}
        handled: set[str] = set()
        spool = self.parts.spool

        async def handle(ident: str, body: dict[str, Any] | None, reason: str) -> None:
            if ident not in entries or ident in handled:
                return  # an id the lane never sent is never used
            handled.add(ident)
            entry = await asyncio.to_thread(spool.get, ident)
            if entry is None:
                return  # emitted already (a restart after the emission)
            try:
                if body is not None:
                    await self._emit(entry, body)
                else:
                    await self._again(entry, reason)
            except Exception:  # one line that cannot be emitted never holds the others
                logger.debug("batch line not emitted", exc_info=True)
                self._line_failed(entry)

        try:
            reading = await self.parts.read_answers(self.parts.api, state, handle,
                                                    directory=spool.root)
        except (JudgeError, OSError):
            if not late:
                raise  # tried again next round (the lines handled are gone from the spool)
            reading = None  # given up: what was not handled is settled below
        if reading is not None:
            self._count_reading(reading)
        reason = "batch_expired" if state.get("status") == "expired" or late else "batch_failed"
        if reading is not None and reading.truncated:
            self._log_once("batch:truncated", "otel-scorers: a batch's output file is over "
                           "the 256 MB bound: the lines within it are used, the batch's "
                           "other requests are error results (batch_failed); send smaller "
                           "batches (batch.max_lines, OTEL_SCORERS_BATCH_MAX_LINES)")
            await self._settle(batch, handled, "batch_failed", final=True,
                               message="its batch's output file was over the bound")
            return
        await self._settle(batch, handled, reason)

    def _count_reading(self, reading: Any) -> None:
        for name, value in (("unreadable_lines", reading.unreadable),
                            ("duplicates", reading.duplicates),
                            ("missing_files", len(reading.missing)),
                            ("truncated", int(reading.truncated))):
            self.counts[name] += value
        if reading.duplicates:
            self._log_once("batch:duplicates", "otel-scorers: a batch's output file answers "
                           "one request twice: the first line is used, the others are not "
                           "(counted duplicates)")
        if reading.missing:
            self._log_once("batch:missing", "otel-scorers: the provider answered 404 for a "
                           "finished batch's output file: its requests are asked again "
                           "(counted missing_files)")

    async def _settle(self, batch: dict[str, Any], handled: set[str], reason: str, *,
                      final: bool = False, message: str | None = None) -> None:
        """Every request of ``batch`` not in ``handled`` asked again (or, ``final`` or past
        its attempts, an error result for ``reason``); then the batch's record dropped."""
        spool = self.parts.spool
        for ident in batch.get("entries", ()):
            if str(ident) in handled:
                continue
            entry = await asyncio.to_thread(spool.get, str(ident))
            if entry is None:
                continue
            try:
                await self._again(entry, reason, final=final, message=message)
            except Exception:
                logger.debug("batch line not settled", exc_info=True)
                self._line_failed(entry)
        await asyncio.to_thread(spool.drop_batch, batch)

    async def _give_up(self, batch: dict[str, Any]) -> None:
        self.counts["given_up"] += 1
        try:
            await self.parts.api.cancel(batch["id"])
            self.counts["cancelled"] += 1
        except JudgeError as exc:  # best effort: the provider may have ended it already
            logger.debug("batch not cancelled", exc_info=exc)
            self.counts["cancel_failed"] += 1
        self._log_once("batch:give_up", "otel-scorers: a batch was not done "
                       "batch.give_up_after_s after its creation: given up and cancelled at "
                       "the provider; its requests are asked again or end as batch_expired "
                       "(raise OTEL_SCORERS_BATCH_GIVE_UP_AFTER_S if the provider is slow)")
        await self._settle(batch, set(), "batch_expired")

    async def _resolve_intent(self, batch: dict[str, Any]) -> None:
        """A record with no batch id yet: its batch adopted, or the intent dropped."""
        token = str(batch.get("intent"))
        ident = self._created.get(token)
        if ident is None:
            late = time.time() - float(batch.get("created", 0)) > self.parts.give_up_after_s
            try:
                ident = await self.parts.api.find(INTENT_KEY, token)
            except JudgeRequestError as exc:
                if exc.status_code not in NO_LIST and not late:
                    raise
            except JudgeError:
                if not late:
                    raise
            if ident is None:  # never created (or not findable): its requests wait again
                self.counts["intents_dropped"] += 1
                await asyncio.to_thread(self.parts.spool.drop_batch, batch)
                return
            self.counts["adopted"] += 1
            logger.info("otel-scorers: batch %s adopted: created before this process's "
                        "record of it was written (a crash or a full disk)", ident[:64])
        record = {**batch, "id": ident}
        try:
            await asyncio.to_thread(self.parts.spool.save_batch, record)
            self._created.pop(token, None)
        except OSError as exc:  # a full disk: polled from memory meanwhile, nothing resent
            self._created[token] = ident
            self.record_failed(exc)
        await self._poll(record)

    def record_failed(self, exc: OSError) -> None:
        self.counts["record_failed"] += 1
        self._log_once("batch:record", "otel-scorers: the batch lane could not write a "
                       f"batch's record in its spool ({exc.strerror or exc}): the batch is "
                       "followed from memory and no request is sent again; free space under "
                       "batch.directory (OTEL_SCORERS_BATCH_DIR)")
