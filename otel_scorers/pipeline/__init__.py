"""The live pipeline: selection, sampling, the queue and workers, caching, sessions, the span
processor."""

from otel_scorers.pipeline.processor import ScorerSpec, ScoringSpanProcessor
from otel_scorers.pipeline.sampling import Boost, Sampling
from otel_scorers.pipeline.selection import Selection
from otel_scorers.pipeline.sessions import SessionPolicy

__all__ = ["Boost", "Sampling", "ScorerSpec", "ScoringSpanProcessor", "Selection",
           "SessionPolicy"]
