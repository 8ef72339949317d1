"""The batch lane built from settings: the spool, the provider's batch API and the judge
layer's two halves of a judgement (the pipeline's other building is ``pipeline.build``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from otel_scorers.config.settings import BatchSettings
from otel_scorers.errors import ConfigError
from otel_scorers.judge.batches import BatchAPI, Spool, output_lines, replay, request_of
from otel_scorers.pipeline.batch.lane import BatchLane, BatchParts
from otel_scorers.pipeline.slots import Slot

__all__ = ["batch_lane_from", "with_lanes"]

OPENAI = "https://api.openai.com/v1"


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
    bases: set[str] = set()
    key: str | None = None
    for slot in batched.values():
        judge = getattr(slot.scorer, "judge", None)
        if judge is None or not str(judge.model).startswith("openai/"):
            raise ConfigError(f"scorer {slot.name}: lane batch needs a judge model "
                              "openai/<model> (OpenAI, or an OpenAI-compatible server with "
                              "the files and batches endpoints); this judge has no batch API")
        bases.add(judge.api_base or OPENAI)
        key = key or judge._api_key
    if len(bases) > 1:
        raise ConfigError("the scorers with lane batch judge at different endpoints: one "
                          "batch lane sends to one endpoint")
    parts = BatchParts(spool=Spool(settings.directory, settings.max_bytes),
                       api=BatchAPI(bases.pop(), key), request_of=request_of, replay=replay,
                       output_lines=output_lines, interval_s=settings.interval_s,
                       max_lines=settings.max_lines, max_attempts=settings.max_attempts,
                       window=settings.completion_window,
                       give_up_after_s=settings.give_up_after_s)
    return BatchLane(parts, batched, emission, log_once)
