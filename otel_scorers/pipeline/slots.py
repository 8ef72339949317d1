"""A processor's scorers: each with its own sampling policy."""

from __future__ import annotations

from dataclasses import dataclass

from otel_scorers.pipeline.sampling import Sampler, Sampling
from otel_scorers.scorers.base import Scorer

__all__ = ["ScorerSpec", "Slot"]


@dataclass(frozen=True)
class ScorerSpec:
    """A scorer with its own sampling policy (otherwise the processor's applies)."""

    scorer: Scorer
    sampling: Sampling | None = None
    #: ``batch``: judged through the provider's batch API, emitted late (pipeline.batch)
    lane: str = "live"


@dataclass(frozen=True)
class Slot:
    """One scorer of a processor, with its sampler (ratio, rate limit, budget)."""

    name: str
    scorer: Scorer
    sampler: Sampler
    lane: str = "live"
