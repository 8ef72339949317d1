"""Step two of an evaluation: the judge asked, once per judge and run.

The scorers whose judgement must be asked (step one, :mod:`.check`) are grouped before any
call is made: with ``fuse_judge_calls``, the LLM scorers of a run that share a judge make one
call between them (:func:`otel_scorers.scorers.fused.judge_together`); every other scorer is
asked alone (its own ``arun``, or in the judging process with ``isolation: process``). Each
group's call runs as one task, bounded by ``evaluation_timeout_s``: past it every scorer of the
group gets a ``timeout`` result (a run judged by one scorer alone is asked in its evaluation's
own task: a task of its own and a ``gather`` to await it were 2 % of the loop thread's
instructions per evaluation). A judge failure is an error result, never raised; an
unexpected exception reaches each scorer of its group (counted there as an internal error).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from typing import Any

from otel_scorers.background_loop import within
from otel_scorers.errors import JudgeTimeoutError
from otel_scorers.pipeline.isolated import IsolatedScorers
from otel_scorers.pipeline.slots import Slot
from otel_scorers.scorers.fused import fusion_groups, judge_together
from otel_scorers.scorers.result import ScoreError, ScoreResult
from otel_scorers.scorers.run import ScorerRun

__all__ = ["Asker", "Asking"]

Results = dict[str, ScoreResult]


class Asking:
    """The calls of one run in flight: each asked scorer's result, by name."""

    def __init__(self, tasks: dict[str, asyncio.Task[Results]],
                 shared: frozenset[str] = frozenset(),
                 alone: tuple[str, Coroutine[Any, Any, Results]] | None = None) -> None:
        self._tasks = tasks
        self._shared = shared
        self._alone = alone

    async def result(self, name: str) -> ScoreResult:
        alone = self._alone
        if alone is not None and alone[0] == name:  # its one reader awaits the call itself
            self._alone = None
            return (await alone[1])[name]
        task = self._tasks[name]
        if name in self._shared:  # one scorer cancelled never cancels its group's call
            return (await asyncio.shield(task))[name]
        return (await task)[name]

    def cancel(self) -> None:
        """Stop what is still asking (the evaluation was cancelled: shutdown, exit)."""
        if self._alone is not None:  # never awaited: closed, not left to warn
            self._alone[1].close()
            self._alone = None
        for task in set(self._tasks.values()):
            if not task.done():
                task.cancel()


class Asker:
    """How the judge is asked: ``timeout_s`` per evaluation, ``fuse`` the scorers sharing a
    judge into one call, ``isolated`` scorers judged in a child process."""

    def __init__(self, *, timeout_s: float, fuse: bool = False,
                 isolated: IsolatedScorers | None = None) -> None:
        self.timeout_s = timeout_s
        self.fuse = fuse and isolated is None
        self.isolated = isolated

    def ask(self, run: ScorerRun, slots: Sequence[Slot], *, alone: bool = False) -> Asking:
        """Start the calls for ``slots`` (a task per group); their results come through the
        returned :class:`Asking`. ``alone``: the run has no other scorer, and one reader
        awaits the one slot's result: the call runs in that reader's task (no task of its
        own), from its first ``result``."""
        if alone and len(slots) == 1:
            return Asking({}, alone=(slots[0].name, self._bounded(slots, run)))
        by_name = {slot.name: slot for slot in slots}
        groups = (fusion_groups((slot.name, slot.scorer) for slot in slots) if self.fuse
                  else [[slot.name] for slot in slots])
        loop = asyncio.get_running_loop()
        tasks: dict[str, asyncio.Task[Results]] = {}
        shared: set[str] = set()
        for group in groups:
            task = loop.create_task(self._bounded([by_name[name] for name in group], run))
            tasks.update(dict.fromkeys(group, task))
            if len(group) > 1:
                shared.update(group)
        return Asking(tasks, frozenset(shared))

    async def _bounded(self, group: Sequence[Slot], run: ScorerRun) -> Results:
        try:
            return await within(self._call(group, run), self.timeout_s)
        except asyncio.TimeoutError:
            error = JudgeTimeoutError(
                f"evaluation exceeded evaluation_timeout_s={self.timeout_s:g}")
            return {slot.name: ScoreResult(
                run_id=run.run_id, scorer=slot.name,
                scale=float(getattr(slot.scorer, "scale", 1.0)),
                error=ScoreError.from_exception(error), reason=f"Not scored: {error}")
                for slot in group}

    async def _call(self, group: Sequence[Slot], run: ScorerRun) -> Results:
        if len(group) > 1:
            return await judge_together({slot.name: slot.scorer for slot in group}, run)
        slot = group[0]
        isolated = self.isolated
        if isolated is not None and isolated.handles(slot.name):
            try:
                return {slot.name: await isolated.arun(slot.name, run)}
            except LookupError:  # the child could not rebuild this scorer: judge it here
                pass
        return {slot.name: await slot.scorer.arun(run)}

    async def close(self) -> None:
        """Stop the judging process, if any (its evaluations are over or abandoned)."""
        if self.isolated is not None:
            await self.isolated.close()
