"""Scorers judging one run together: the scorers that share a judge get one fused judge call
(:mod:`otel_scorers.judge.fused` says how the call is built, split and failed).

The caller makes the batches for a run's scorers with :func:`call_batches` and runs each
scorer, in a task of its own, inside :func:`judging_in` its batch (``None``: alone).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator

from otel_scorers.judge.fused import MEMBER, CallBatch

__all__ = ["CallBatch", "call_batches", "judging_in", "not_asking"]


def call_batches(named: Iterable[tuple[str, object]]) -> dict[str, CallBatch]:
    """One batch per judge shared by two or more of the ``(name, scorer)`` pairs, by name."""
    groups: dict[str, list[str]] = {}
    for name, scorer in named:
        judge = getattr(scorer, "judge", None)
        key = getattr(judge, "fusion_key", None)
        if isinstance(key, str):
            groups.setdefault(key, []).append(name)
    batches: dict[str, CallBatch] = {}
    for key, names in groups.items():
        if len(names) > 1:
            batch = CallBatch(len(names), key)
            batches.update(dict.fromkeys(names, batch))
    return batches


@contextlib.contextmanager
def judging_in(batch: CallBatch | None) -> Iterator[None]:
    """Within: this task's first judge call may go out with the batch's others. On leaving
    without having asked, the batch stops waiting for this scorer."""
    if batch is None:
        yield
        return
    member = batch.join()
    MEMBER.set(member)  # the task's own context: each scorer runs in a task of its own
    try:
        yield
    finally:
        batch.leave(member)


def not_asking() -> None:
    """This task will not ask the judge after all (it waits for an identical evaluation in
    flight elsewhere): its batch stops waiting for it now. Otherwise two identical runs judged
    at once could each hold the question the other's batch waits for, until both timed out."""
    member = MEMBER.get()
    if member is not None:
        member.batch.leave(member)
