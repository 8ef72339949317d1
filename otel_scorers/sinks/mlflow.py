"""MLflow 3: results as assessments (Feedback) on the trace (REST
``/api/3.0/mlflow/traces/{trace_id}/assessments``).

MLflow ingests OTLP traces (``/v1/traces`` with the ``x-mlflow-experiment-id`` header) under the
id ``"tr-" + <32-hex OTel trace id>``. Each result becomes a Feedback on that trace, on the
evaluated span (``span_id``): ``assessment_name`` the scorer's name, ``feedback.value`` the
score, ``rationale`` the reason (under the reasons switch), ``source`` ``LLM_JUDGE`` or ``CODE``
with ``source_id`` ``otel-scorers``, ``metadata`` the label and the rest as strings (MLflow's
metadata is a string map; criteria as JSON). MLflow has no upsert, so the sink makes one: it
reads the trace's assessments and updates ours (same name, our source id) instead of adding a
second; a retry or a re-score overwrites. A trace MLflow has not ingested yet (404) is retried:
the span is usually exported while, or after, it is judged.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import aiohttp

from otel_scorers.errors import ConfigError
from otel_scorers.policy import ContentPolicy
from otel_scorers.sinks.base import IDENTIFIER, Evaluated, SinkError, metadata_of, shown_url

__all__ = ["MLflowSink"]

#: What an assessment id may be (MLflow's are ``a-<32 hex>``).
_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
MAX_BATCH = 20
REQUEST_TIMEOUT_S = 10.0
MAX_ANSWER_BYTES = 1_048_576  # a trace's info with its assessments; more is not an answer


class MLflowSink:
    """Feedback assessments in the MLflow tracking server at ``tracking_uri``."""

    name = "mlflow"
    max_batch = MAX_BATCH

    def __init__(self, tracking_uri: str, *, experiment: str | None = None,
                 policy: ContentPolicy | None = None) -> None:
        if not tracking_uri.startswith(("http://", "https://")):
            raise ConfigError("the MLflow tracking URI must be an http(s) URL of a tracking "
                              f"server, got {tracking_uri!r}")
        self.tracking_uri = tracking_uri.rstrip("/")
        self.experiment = experiment
        self.policy = policy or ContentPolicy()

    def assessment(self, item: Evaluated) -> dict[str, Any]:
        result = item.result
        metadata: dict[str, str] = {}
        for key, value in metadata_of(item, self.policy).items():
            metadata[key] = value if isinstance(value, str) else json.dumps(value)
        if result.label is not None:
            metadata["label"] = result.label
        body: dict[str, Any] = {
            "assessment_name": result.scorer, "trace_id": f"tr-{item.trace_id}",
            "span_id": item.span_id, "feedback": {"value": result.score},
            "source": {"source_type": "CODE" if item.kind == "code" else "LLM_JUDGE",
                       "source_id": IDENTIFIER},
            "metadata": metadata}
        rationale = self.policy.text(result.reason)
        if rationale is not None:
            body["rationale"] = rationale
        return body

    async def write(self, session: aiohttp.ClientSession, batch: Sequence[Evaluated]) -> None:
        for item in batch:  # no batch endpoint: one upsert each (a retry redoes them: idempotent)
            await self._upsert(session, item)

    async def _upsert(self, session: aiohttp.ClientSession, item: Evaluated) -> None:
        trace = f"tr-{item.trace_id}"
        base = f"{self.tracking_uri}/api/3.0/mlflow/traces/{trace}"
        info = await self._call(session, "GET", base, None)
        existing = next((a for a in info.get("trace", {}).get("trace_info", {})
                         .get("assessments", [])
                         if a.get("assessment_name") == item.result.scorer
                         and a.get("source", {}).get("source_id") == IDENTIFIER
                         and a.get("valid", True)), None)
        body = self.assessment(item)
        if existing is None:
            await self._call(session, "POST", f"{base}/assessments", {"assessment": body})
            return
        ident = existing.get("assessment_id")
        if not isinstance(ident, str) or not _ID.fullmatch(ident):  # it goes into a URL path
            raise SinkError(f"MLflow at {shown_url(self.tracking_uri)} answered an assessment "
                            "id that is not one", retryable=False, reason="invalid_response")
        body["assessment_id"] = ident
        mask = ",".join(key for key in ("feedback", "rationale", "metadata") if key in body)
        await self._call(session, "PATCH", f"{base}/assessments/{ident}",
                         {"assessment": body, "update_mask": mask})

    async def _call(self, session: aiohttp.ClientSession, method: str, url: str,
                    body: dict[str, Any] | None) -> dict[str, Any]:
        try:
            async with session.request(
                    method, url, data=None if body is None else json.dumps(body),
                    headers={"Content-Type": "application/json"}, allow_redirects=False,
                    timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)) as response:
                raw = await response.content.read(MAX_ANSWER_BYTES)
                status = response.status
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise SinkError(f"MLflow at {shown_url(self.tracking_uri)} unreachable "
                            f"({type(exc).__name__})", retryable=True,
                            reason="unreachable") from None
        if status == 404:  # the trace is not ingested yet: it usually is soon
            raise SinkError(f"MLflow at {shown_url(self.tracking_uri)} does not have the trace "
                            "(yet)", retryable=True, reason="trace_not_found")
        if not 200 <= status < 300:
            raise SinkError(f"MLflow at {shown_url(self.tracking_uri)} answered HTTP {status}",
                            retryable=status in (408, 429) or status >= 500,
                            reason=f"http_{status}")
        try:
            decoded = json.loads(raw or b"{}")
        except ValueError:
            raise SinkError(f"MLflow at {shown_url(self.tracking_uri)} answered something that "
                            "is not "
                            "JSON", retryable=False, reason="invalid_response") from None
        return decoded if isinstance(decoded, dict) else {}

    def __repr__(self) -> str:
        return (f"MLflowSink(tracking_uri={shown_url(self.tracking_uri)!r}, "
                f"experiment={self.experiment!r})")
