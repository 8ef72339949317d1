"""The batch lane built from settings: the spool, the provider's batch API and the judge
layer's two halves of a judgement (the pipeline's other building is ``pipeline.build``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from otel_scorers.config.settings import BatchSettings
from otel_scorers.errors import ConfigError
from otel_scorers.judge.batch_output import read_answers
from otel_scorers.judge.batches import (
    FINISHED,
    MAX_BATCH_BYTES,
    api_for,
    batch_lines,
    replay,
    request_of,
)
from otel_scorers.judge.spool import Spool, SpoolRefused
from otel_scorers.pipeline.batch.lane import BatchLane, BatchParts
from otel_scorers.pipeline.slots import Slot

__all__ = ["batch_lane_from", "with_lanes"]

def with_lanes(slots: Sequence[Slot], settings: BatchSettings) -> tuple[Slot, ...]:
    """``slots`` with the scorers ``batch.scorers`` names in the batch lane (as ``lane: batch``
    on the scorer does); a name no scorer has is an error, never ignored."""
    names = {slot.name for slot in slots}
    unknown = sorted(set(settings.scorers) - names)
    if unknown:
        raise ConfigError(f"batch.scorers names {', '.join(unknown)}: no scorer is named so "
                          f"(the scorers: {', '.join(sorted(names))})")
    return tuple(dataclasses.replace(slot, lane="batch") if slot.name in settings.scorers
                 else slot for slot in slots)


def batch_lane_from(settings: BatchSettings, slots: Sequence[Slot], emission: Any,
                    log_once: Callable[[str, str], None]) -> BatchLane | None:
    """The lane of the scorers with ``lane: batch`` (``None`` without one). Each must judge
    with an OpenAI model or an OpenAI-compatible server (``openai/<model>``), all at one
    endpoint: the batch API is that endpoint's."""
    batched = {slot.name: slot for slot in slots if slot.lane == "batch"}
    if not batched:
        return None
    for slot in batched.values():
        if getattr(slot.scorer, "judge", None) is None:
            raise ConfigError(f"scorer {slot.name}: lane batch needs a judge model "
                              "openai/<model>; this scorer asks no judge")
    api = api_for([slot.scorer.judge for slot in batched.values()],  # type: ignore[attr-defined]
                  "lane batch")
    try:
        spool = Spool(settings.directory, settings.max_bytes)
    except SpoolRefused as exc:
        raise ConfigError(f"batch.directory {settings.directory}: the batch lane refuses this "
                          f"spool: {exc}. Set OTEL_SCORERS_BATCH_DIR to a directory owned by "
                          "this user and writable by no one else (chmod 700)") from None
    except OSError as exc:
        raise ConfigError(f"batch.directory {settings.directory}: the batch lane cannot keep "
                          f"its spool there ({exc.strerror or exc}); set "
                          "OTEL_SCORERS_BATCH_DIR to a writable, persistent directory") from None
    parts = BatchParts(spool=spool, api=api,
                       request_of=request_of, replay=replay, batch_lines=batch_lines,
                       read_answers=read_answers, finished=FINISHED,
                       refused=SpoolRefused,
                       max_batch_bytes=MAX_BATCH_BYTES, interval_s=settings.interval_s,
                       max_lines=settings.max_lines, max_attempts=settings.max_attempts,
                       window=settings.completion_window,
                       give_up_after_s=settings.give_up_after_s)
    return BatchLane(parts, batched, emission, log_once)
