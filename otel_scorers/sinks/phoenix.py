"""Arize Phoenix: results as span annotations (``POST /v1/span_annotations``).

Each result becomes an annotation on the evaluated span: ``name`` the scorer's name,
``annotator_kind`` ``LLM`` or ``CODE``, ``result`` the score, label and explanation (the reason,
under the reasons switch), ``metadata`` the rest (:func:`~otel_scorers.sinks.base.metadata_of`),
``identifier`` ``otel-scorers``. Phoenix upserts on name, span and identifier, so a retry or a
re-score overwrites the earlier annotation. Posts are asynchronous on Phoenix's side
(``sync=false``): it queues them and retries for spans it has not ingested yet, so an
evaluation that arrives before its span still lands.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import aiohttp

from otel_scorers.errors import ConfigError
from otel_scorers.policy import ContentPolicy
from otel_scorers.sinks.base import IDENTIFIER, Evaluated, SinkError, metadata_of, shown_url

__all__ = ["PhoenixSink"]

#: Phoenix's limit on one request body is generous; this keeps one post small.
MAX_BATCH = 100
REQUEST_TIMEOUT_S = 10.0


class PhoenixSink:
    """Span annotations in the Phoenix at ``endpoint`` (``http://127.0.0.1:6006``)."""

    name = "phoenix"
    max_batch = MAX_BATCH

    def __init__(self, endpoint: str, *, api_key: str | None = None,
                 project: str = "default", policy: ContentPolicy | None = None) -> None:
        if not endpoint.startswith(("http://", "https://")):
            raise ConfigError(f"the Phoenix endpoint must be an http(s) URL, got {endpoint!r}")
        self.endpoint = endpoint.rstrip("/")
        self.project = project
        self._api_key = api_key
        self.policy = policy or ContentPolicy()

    def annotation(self, item: Evaluated) -> dict[str, Any]:
        result = item.result
        outcome: dict[str, Any] = {"score": result.score, "label": result.label}
        explanation = self.policy.text(result.reason)
        if explanation is not None:
            outcome["explanation"] = explanation
        return {"span_id": item.span_id, "name": result.scorer,
                "annotator_kind": "CODE" if item.kind == "code" else "LLM",
                "result": outcome, "metadata": metadata_of(item, self.policy),
                "identifier": IDENTIFIER}

    async def write(self, session: aiohttp.ClientSession, batch: Sequence[Evaluated]) -> None:
        body = json.dumps({"data": [self.annotation(item) for item in batch]})
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        try:
            async with session.post(f"{self.endpoint}/v1/span_annotations",
                                    params={"sync": "false"}, data=body, headers=headers,
                                    allow_redirects=False,
                                    timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)
                                    ) as response:
                await response.content.read(65_536)  # bounded: an answer is a few bytes
                status = response.status
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise SinkError(f"Phoenix at {shown_url(self.endpoint)} unreachable "
                            f"({type(exc).__name__})",
                            retryable=True, reason="unreachable") from None
        if 200 <= status < 300:
            return
        retryable = status in (408, 429) or status >= 500
        raise SinkError(f"Phoenix at {shown_url(self.endpoint)} answered HTTP {status}",
                        retryable=retryable, reason=f"http_{status}")

    def __repr__(self) -> str:  # never the key
        return f"PhoenixSink(endpoint={shown_url(self.endpoint)!r}, project={self.project!r})"
