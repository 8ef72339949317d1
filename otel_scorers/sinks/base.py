"""What a result sink writes and the protocol every sink follows.

A sink writes evaluation results into a backend's own evaluation objects (Phoenix span
annotations, MLflow assessments), beside the OTel telemetry. Like a judge transport (httpx's
``AsyncBaseTransport`` is the model), a sink is one small object with one method: a batch of
:class:`Evaluated` in, written or a :class:`SinkError` out; queueing, batching, retries and
counting are :class:`~otel_scorers.sinks.queue.SinkQueue`'s, never the sink's.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp

from otel_scorers.policy import ContentPolicy
from otel_scorers.scorers.analysis import rendering
from otel_scorers.scorers.result import ScoreResult

__all__ = ["IDENTIFIER", "Evaluated", "ResultSink", "SinkError", "metadata_of", "shown_url"]

#: The identifier every result is written under: with the scorer's name and the span, the key a
#: backend upserts on, so a retry or a re-score overwrites instead of adding a duplicate.
IDENTIFIER = "otel-scorers"


@dataclass(frozen=True)
class Evaluated:
    """One scored result about one span: ids in lower-case hex (trace 32, span 16 digits),
    the scorer's kind (``llm`` or ``code``: the annotator), the agent when known."""

    trace_id: str
    span_id: str
    result: ScoreResult
    kind: str = "llm"
    agent: str | None = None


class SinkError(Exception):
    """A write that failed; ``retryable`` for timeouts, connection failures, 408, 429 and
    5xx, not for a request the backend refused (400, 401, 403, 404, 413, 422)."""

    def __init__(self, message: str, *, retryable: bool, reason: str) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.reason = reason


class ResultSink(Protocol):
    """Writes batches of results into one backend."""

    name: str
    max_batch: int

    async def write(self, session: aiohttp.ClientSession, batch: Sequence[Evaluated]) -> None:
        """Write ``batch``; raise :class:`SinkError` when it was not written."""


def shown_url(url: str) -> str:
    """``url`` as it may be printed: any ``user:password@`` taken out, no query string."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", ""))


def metadata_of(item: Evaluated, policy: ContentPolicy) -> dict[str, Any]:
    """What a result carries besides score, label and explanation, as plain JSON values: the
    scale, pass verdict, mode, judge model, the agent, the trace, and per criterion its id,
    verdict (and part score); criterion text and reasoning only when the reasons switch lets
    content out."""
    result = item.result
    out: dict[str, Any] = {"source": IDENTIFIER, "trace_id": item.trace_id,
                           "scale": result.scale}
    for key, value in (("passed", result.passed), ("mode", result.mode), ("agent", item.agent),
                       ("judge_model", result.judge.model if result.judge else None)):
        if value is not None:
            out[key] = value
    out.update(rendering(result.analysis).metadata(policy))
    return out
