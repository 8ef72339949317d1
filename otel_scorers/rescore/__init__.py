"""Offline re-scoring: judge agent runs in spans that were already exported to files.

The files are read with :mod:`otel_scorers.otlp` (OTLP JSON lines or protobuf, as the
Collector ``file`` exporter writes them), streamed (:mod:`.runs`: one record at a time, a
bounded window of open traces), so memory is bounded by concurrency and the largest record,
not by the file. Selection, capture, scorers, cache and budget are the live processor's (a
:class:`~otel_scorers.pipeline.ScoringSpanProcessor` built from the same configuration judges
each run through :meth:`~ScoringSpanProcessor.evaluate`), so a run scores the same offline as
live. Differences, on purpose:

- sampling and the rate limit do not apply: a backfill judges every selected run (``limit``
  caps how many); the hourly judge budget does apply;
- results are JSON lines, one per (evaluated span, scorer), carrying the span's trace and span
  ids (:mod:`.results`); with an output file, re-running judges only the (span, scorer) pairs
  not yet in it: a span whose rubric result is there and whose alignment result failed gets
  only the alignment judged again. The later line of a pair is the one that counts;
- an unreadable input (bad JSON, a bad record, a truncated or corrupt gzip stream) stops the
  run with one line naming the file, the line or record, and the reason; what was written
  stays written;
- session scorers judge each session of the files once, whole, after the last file is read
  (:mod:`.sessions`: no idle time offline); their lines are on the session's last turn's span
  and say which turns they cover (``session``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from otel_scorers import background_loop
from otel_scorers.errors import ConfigError
from otel_scorers.pipeline.processor import ScoringSpanProcessor
from otel_scorers.pipeline.sessions import SessionJob
from otel_scorers.rescore.estimate import DryRunEstimate, add_hint, estimate
from otel_scorers.rescore.results import done_pairs, ends_torn, result_line, write_line
from otel_scorers.rescore.runs import RunRef, RunStream
from otel_scorers.rescore.sessions import FileSessions

__all__ = ["DryRunEstimate", "OutputError", "Plan", "Rescorer", "RunRef", "done_pairs",
           "ends_torn", "result_line", "write_line"]

logger = logging.getLogger(__name__)

Pairs = set[tuple[str, str, str]]


class OutputError(OSError):
    """A result could not be written (a closed pipe, a full disk): the run stopped there, no
    more judge calls were made, and the runs in flight were abandoned."""


@dataclass
class Plan:
    """What a pass over the files found: spans, selected runs, runs already done, and the
    runs to judge (at most ``limit``)."""

    spans: int = 0
    runs: int = 0
    done: int = 0
    to_judge: int = 0
    unselected: int = 0
    outcome: dict[str, int] = field(default_factory=lambda: {
        "scored": 0, "skipped": 0, "error": 0, "not_captured": 0})
    #: sessions judged (session scorers), and turns the memory bounds left out of them
    sessions: int = 0
    session_turns_dropped: int = 0


class Rescorer:
    """Judges the selected runs of OTLP files with a processor's scorers."""

    def __init__(self, processor: ScoringSpanProcessor, *, concurrency: int = 8,
                 window: int = 8, include_run: bool = False, lane: str = "live",
                 batch_state: Path | None = None, batch_timeout_s: float = 90_000.0) -> None:
        self.processor = processor
        # rescoring history is not live traffic: its processor does not run judge canaries,
        # nor a live batch lane (that would read and emit an application's spool)
        canaries = getattr(processor, "canaries", None)
        if canaries is not None:
            canaries.stop()
        live_lane = processor._parts.evaluation.batch
        if live_lane is not None:
            live_lane.stop()
            if lane != "batch":
                raise ConfigError("a scorer is configured with lane: batch: rescore it with "
                                  "--lane batch (or configure lane: live)")
        #: ``batch``: every turn scorer judged in one provider batch (:mod:`.batch`)
        self.lane, self.batch_state, self.batch_timeout_s = lane, batch_state, batch_timeout_s
        #: Write the judged run (input, system, context, output) on each line: content, off
        #: by default; ``calibrate`` turns such lines plus a ``corrected`` column into cases.
        self.include_run = include_run
        self.concurrency = max(1, concurrency)
        self.window = window
        self.session_names = set(processor.on_demand.session_scorers)
        self.names = [name for name in (str(getattr(s, "name", "")) for s in processor.scorers)
                      if name not in self.session_names]
        if lane == "batch" and self.session_names:
            raise ConfigError(f"--lane batch judges the turn scorers; the session scorers "
                              f"({', '.join(sorted(self.session_names))}) judge whole "
                              "conversations live: rescore them without --lane batch")

    def _pending(self, ref: RunRef, done: Pairs) -> list[str]:
        return [name for name in self.names if (ref.trace_id, ref.span_id, name) not in done]

    def _wanted(self, ref: RunRef, pending: list[str]) -> bool:
        """Whether ``ref`` needs reading: a turn scorer has not judged it yet, or it is a
        turn of a session the session scorers judge."""
        return bool(pending) or (ref.session is not None and bool(self.session_names))

    def _selected(self, paths: Sequence[str | Path], done: Pairs, limit: int | None,
                  stream: RunStream, plan: Plan) -> Iterator[tuple[RunRef, list[str]]]:
        for ref in stream.runs(paths):
            plan.runs += 1
            pending = self._pending(ref, done)
            if not self._wanted(ref, pending):
                plan.done += 1
            elif limit is None or plan.to_judge < limit:
                plan.to_judge += 1
                yield ref, pending
        plan.spans, plan.unselected = stream.spans, stream.unselected

    def plan(self, paths: Sequence[str | Path], *, limit: int | None = None,
             done: Pairs | None = None) -> Plan:
        """Count what a run would do, reading the files once without keeping content (and
        finding unreadable input before any judge call)."""
        plan = Plan()
        stream = RunStream(self.processor, window=self.window, keep_content=False)
        for _ in self._selected(paths, done or set(), limit, stream, plan):
            pass
        return plan

    def estimate(self, paths: Sequence[str | Path], *, limit: int | None = None,
                 done: Pairs | None = None) -> DryRunEstimate:
        """Judge calls, tokens and cost judging would take (``rescore --dry-run``)."""
        plan = Plan()
        stream = RunStream(self.processor, window=self.window)
        result = estimate(self.processor,
                          (ref for ref, _ in self._selected(paths, done or set(), limit,
                                                            stream, plan)))
        add_hint(result, stream.unselected)
        return result

    def run(self, paths: Sequence[str | Path], *, on_result: Callable[[dict[str, Any]], None],
            limit: int | None = None, done: Pairs | None = None,
            progress: Callable[[int], None] | None = None) -> Plan:
        """Judge the runs (``concurrency`` at a time; reading waits for a free slot, so
        memory stays bounded). ``on_result`` gets each JSON-lines record as it is produced;
        the returned plan's ``outcome`` counts results: scored, skipped (a scorer that judged
        nothing, e.g. no rubric), error, and runs without usable content.
        Raises :class:`~otel_scorers.otlp.OTLPDecodeError` for unreadable input, after the
        runs already started have finished and been written."""
        plan = Plan()
        stream = RunStream(self.processor, window=self.window)
        selected = self._selected(paths, done or set(), limit, stream, plan)
        sessions = FileSessions(self.processor) if self.session_names else None
        if self.lane == "batch":
            from otel_scorers.rescore.batch import judge_in_batch

            poll_s = self.processor.settings.batch.interval_s
            background_loop.run_sync(judge_in_batch(
                self, selected, _Pass(self, plan, on_result, progress, None, done or set()),
                self.batch_state, poll_s=poll_s, timeout_s=self.batch_timeout_s))
            return plan
        background_loop.run_sync(self._judge_all(selected, plan, on_result, progress,
                                                 sessions, done or set()))
        if sessions is not None:
            plan.session_turns_dropped = sessions.dropped_turns
        return plan

    async def _judge_all(self, selected: Iterator[tuple[RunRef, list[str]]], plan: Plan,
                         on_result: Callable[[dict[str, Any]], None],
                         progress: Callable[[int], None] | None,
                         sessions: FileSessions | None, done: Pairs) -> None:
        judging = _Pass(self, plan, on_result, progress, sessions, done)
        gate = asyncio.Semaphore(self.concurrency)
        tasks: set[asyncio.Task[None]] = set()
        failed = judging.failed

        async def one(ref: RunRef, names: list[str]) -> None:
            try:
                await judging.run(ref, names)
            finally:
                gate.release()

        try:
            while not failed:
                await gate.acquire()
                if failed:
                    break
                item = await asyncio.to_thread(next, selected, None)  # decoding: off the loop
                if item is None:
                    gate.release()
                    break
                task = asyncio.get_running_loop().create_task(one(*item))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                await judging.sessions_due()  # sessions that made room for others: now
            if tasks:
                await asyncio.gather(*tasks)
            await judging.sessions_due(final=True)
        finally:
            if failed:
                for task in tasks:
                    task.cancel()
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=bool(failed))
        if failed:
            error = failed[0]
            raise OutputError(error.errno, f"cannot write the results ({error.strerror or error})"
                              ) from error


@dataclass
class _Pass:
    """One judging pass: each run's results written as they come, sessions collected and
    judged; ``failed`` holds the write error that stops it."""

    rescorer: Rescorer
    plan: Plan
    on_result: Callable[[dict[str, Any]], None]
    progress: Callable[[int], None] | None
    sessions: FileSessions | None
    done: Pairs
    failed: list[OSError] = field(default_factory=list)

    def write(self, ref: RunRef, results: list[Any], agent: str | None, run: Any,
              session: SessionJob | None = None) -> bool:
        for result in results:
            kind = ("error" if result.error is not None
                    else "skipped" if result.skipped else "scored")
            line = result_line(ref, result, agent, run, session)
            if self.failed:
                return False
            try:
                self.on_result(line)
            except OSError as exc:  # the output is gone: stop judging at once
                self.failed.append(exc)
                return False
            self.plan.outcome[kind] += 1
        return True

    async def run(self, ref: RunRef, names: list[str]) -> None:
        """Judge ``ref`` with the turn scorers ``names``; keep it as a turn of its session."""
        processor, sessions = self.rescorer.processor, self.sessions
        results = await processor.on_demand.evaluate(
            ref.span, descendants=ref.descendants, nested=ref.nested, scorers=names,
            agent=ref.agent, links=ref.links) if names else []
        agent = processor.on_demand.agent_of(ref.span) or ref.agent
        if names and not results:
            self.plan.outcome["not_captured"] += 1
        turn = sessions is not None and ref.session is not None
        run = None
        if (results and self.rescorer.include_run) or turn:
            run = processor.on_demand.capture(ref.span, descendants=ref.descendants,
                                              nested=ref.nested, agent=ref.agent,
                                              steps=True, links=ref.links).run
        if turn and sessions is not None:
            if run is not None:
                sessions.add(ref, run, agent)
            else:
                sessions.unread(ref)
        if self.write(ref, results, agent, run if self.rescorer.include_run else None) \
                and self.progress is not None:
            self.progress(1)

    async def sessions_due(self, *, final: bool = False) -> None:
        """Judge the sessions due (those that made room for others; at the end, all) that an
        earlier pass did not judge on the same last turn."""
        if self.sessions is None or self.failed:
            return
        for job in self.sessions.due(final=final):
            ref = RunRef(ReadableSpan(name=job.span_name, context=job.context))  # its last turn
            if all((ref.trace_id, ref.span_id, slot.name) in self.done for slot in job.slots):
                continue
            self.plan.sessions += 1
            if not self.write(ref, await self.rescorer.processor.on_demand.evaluate_session(job),
                              job.agent, None, job):
                return
