"""What a result backend writes, the protocol every writer follows, and the HTTP calls they
share.

A backend writes evaluation results into its own evaluation objects (Phoenix span annotations,
MLflow assessments), beside the OTel telemetry. Like a judge transport (httpx's
``AsyncBaseTransport`` is the model), a writer is one small object with one method: a batch of
:class:`Evaluated` in, written or a :class:`~otel_scorers.errors.SinkError` out; queueing,
batching, retries and counting are :class:`~otel_scorers.backends.queue.SinkQueue`'s, never the
writer's. Every backend talks HTTP through :func:`call`: the library's shared session for
backends (:mod:`otel_scorers.http`), no redirects followed, a timeout per request, the answer
read whole to a bound, every failure one classified :class:`SinkError` that names the backend
by a URL without credentials.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from otel_scorers import http
from otel_scorers.errors import ConfigError, SinkError
from otel_scorers.http import shown_url
from otel_scorers.policy import ContentPolicy
from otel_scorers.scorers.analysis import rendering
from otel_scorers.scorers.result import ScoreResult

__all__ = ["IDENTIFIER", "Evaluated", "ResultSink", "SinkError", "base_url", "call",
           "metadata_of", "shown_url"]

#: The identifier every result is written under: with the scorer's name and the span, the key a
#: backend upserts on, so a retry or a re-score overwrites instead of adding a duplicate.
IDENTIFIER = "otel-scorers"
REQUEST_TIMEOUT_S = 10.0
#: The largest answer read from a backend (a trace with its assessments, a page of spans).
MAX_ANSWER_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Evaluated:
    """One scored result about one span: ids in lower-case hex (trace 32, span 16 digits),
    the scorer's kind (``llm`` or ``code``: the annotator), the agent when known."""

    trace_id: str
    span_id: str
    result: ScoreResult
    kind: str = "llm"
    agent: str | None = None


class ResultSink(Protocol):
    """Writes batches of results into one backend."""

    name: str
    max_batch: int

    async def write(self, batch: Sequence[Evaluated]) -> None:
        """Write ``batch``; raise :class:`SinkError` when it was not written."""


def base_url(url: str, what: str) -> str:
    """``url`` without its trailing slash, when it is an http(s) URL; else a
    :class:`~otel_scorers.errors.ConfigError` naming ``what`` it should be (the URL shown
    without credentials)."""
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"{what} must be an http(s) URL, got {shown_url(url)!r}")
    return url.rstrip("/")


def metadata_of(item: Evaluated, policy: ContentPolicy) -> dict[str, Any]:
    """What a result carries besides score, label and explanation, as plain JSON values: the
    scale, pass verdict, mode, judge model, the evaluator (id, type, fingerprint, the score's
    minimum), the agent, the trace, and what its analysis says
    of itself (a rubric's criteria: id, verdict, part score; their text and reasoning only
    when the reasons switch lets content out)."""
    result = item.result
    out: dict[str, Any] = {"source": IDENTIFIER, "trace_id": item.trace_id,
                           "scale": result.scale}
    evaluator = result.evaluator
    for key, value in (("passed", result.passed), ("mode", result.mode), ("agent", item.agent),
                       ("judge_model", result.judge.model if result.judge else
                        evaluator.judge_model if evaluator else None),
                       ("evaluator_id", evaluator.id if evaluator else None),
                       ("evaluator_type", evaluator.type if evaluator else None),
                       ("evaluator_fingerprint", evaluator.fingerprint if evaluator else None),
                       ("score_min", evaluator.score_min if evaluator else None)):
        if value is not None:
            out[key] = value
    out.update(rendering(result.analysis).metadata(policy))
    return out


def _session() -> Any:
    import aiohttp

    return aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar())


async def call(backend: str, base: str, method: str, path: str, *,
               body: Any = None, params: Sequence[tuple[str, str]] | None = None,
               headers: Mapping[str, str] | None = None, missing: str | None = None,
               max_bytes: int = MAX_ANSWER_BYTES) -> Any:
    """One JSON request to ``backend`` at ``base`` and its decoded answer (``None`` for an
    empty one). ``missing``: a 404 means the object ``missing`` names is not there *yet* (a
    trace the backend has not ingested): retryable, reason ``<missing>_not_found``. Every
    failure is a :class:`SinkError`."""
    import aiohttp

    where = f"{backend} at {shown_url(base)}"
    session = http.shared("backends", _session)
    try:
        async with session.request(
                method, base + path, params=list(params or ()),
                data=None if body is None else json.dumps(body),
                headers={"Content-Type": "application/json", **(headers or {})},
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)) as response:
            status = response.status
            raw = await http.read_bounded(response, max_bytes)
    except http.TooLarge:
        raise SinkError(f"{where} answered more than {max_bytes // (1024 * 1024)} MB",
                        retryable=False, reason="answer_too_large") from None
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise SinkError(f"{where} unreachable ({type(exc).__name__})", retryable=True,
                        reason="unreachable") from None
    if status == 404 and missing is not None:
        raise SinkError(f"{where} does not have the {missing} (yet)", retryable=True,
                        reason=f"{missing}_not_found", expected=True)
    if not 200 <= status < 300:
        raise SinkError(f"{where} answered HTTP {status}",
                        retryable=status in (408, 429) or status >= 500, reason=f"http_{status}")
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        raise SinkError(f"{where} answered something that is not JSON", retryable=False,
                        reason="invalid_response") from None
