"""MLflow 3: results as assessments (Feedback) on the trace, reviewers' feedback back as
labelled cases.

MLflow ingests OTLP traces (``/v1/traces`` with the ``x-mlflow-experiment-id`` header) under the
id ``"tr-" + <32-hex OTel trace id>``. Writing (REST
``/api/3.0/mlflow/traces/{trace_id}/assessments``): each result becomes a Feedback on that
trace, on the evaluated span (``span_id``): ``assessment_name`` the scorer's name,
``feedback.value`` the score, ``rationale`` the reason (under the reasons switch), ``source``
``LLM_JUDGE`` or ``CODE`` with ``source_id`` ``otel-scorers``, ``metadata`` the label and the
rest as strings (MLflow's metadata is a string map; criteria as JSON). MLflow has no upsert, so
the writer makes one: it reads the trace's assessments and updates ours (same name, our source
id) instead of adding a second; a retry or a re-score overwrites. A trace MLflow has not
ingested yet (404) is retried: the span is usually exported while, or after, it is judged.
MLflow has no batch endpoint: each result is its own upsert, written (and retried, and counted)
on its own, so a result that fails for good (a bad trace) fails alone.

Reading (``calibrate --cases mlflow``): the experiment's traces with human feedback, a page at
a time and bounded; each human assessment named after a scorer becomes a case.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from pydantic import field_validator

from otel_scorers import background_loop
from otel_scorers.backends.base import (
    IDENTIFIER,
    Evaluated,
    base_url,
    call,
    metadata_of,
    shown_url,
)
from otel_scorers.backends.labels import captured_run, labelled, ours_span, span_for
from otel_scorers.config.settings import StrictModel
from otel_scorers.errors import ConfigError, SinkError
from otel_scorers.policy import ContentPolicy
from otel_scorers.registry import Backend, option
from otel_scorers.scorers.cases import LabelledCase

__all__ = ["MLFLOW", "LabelReader", "MLflowSettings", "MLflowSink", "mlflow_cases"]

#: What an assessment id may be (MLflow's are ``a-<32 hex>``).
_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
#: one result a write: each is its own upsert, failing or retried alone
MAX_BATCH = 1
#: The most pages of traces one reading goes through.
MAX_PAGES = 200


class MLflowSettings(StrictModel):
    """Where results are written as MLflow assessments (off without a tracking URI)."""

    tracking_uri: str | None = option(None, "write every scored result as an assessment on "
                                      "its trace (`tr-<trace id>`) in this MLflow tracking "
                                      "server (`http://127.0.0.1:5000`; off when unset)",
                                      env="OTEL_SCORERS_MLFLOW_TRACKING_URI")
    experiment: str | None = option(None, "the MLflow experiment your traces go to (its id or "
                                    "name)", env="OTEL_SCORERS_MLFLOW_EXPERIMENT")

    @field_validator("tracking_uri")
    @classmethod
    def _an_http_url(cls, value: str | None) -> str | None:
        """Refused where settings are read (check-config says so as ``install()`` does)."""
        if value:
            _base(value)
        return value or None


def _base(tracking_uri: str) -> str:
    return base_url(tracking_uri, "the MLflow tracking URI (a tracking server)")


class MLflowSink:
    """Feedback assessments in the MLflow tracking server at ``tracking_uri``."""

    name = "mlflow"
    max_batch = MAX_BATCH

    def __init__(self, tracking_uri: str, *, experiment: str | None = None,
                 policy: ContentPolicy | None = None) -> None:
        self.tracking_uri = _base(tracking_uri)
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

    async def write(self, batch: Sequence[Evaluated]) -> None:
        for item in batch:  # one (MAX_BATCH); a retry redoes the upsert: idempotent
            await self._upsert(item)

    async def _upsert(self, item: Evaluated) -> None:
        trace = f"/api/3.0/mlflow/traces/tr-{item.trace_id}"
        info = await self._call("GET", trace, None)
        trace_info = info.get("trace", {}).get("trace_info", {}) if isinstance(
            info.get("trace"), dict) else {}
        assessments = trace_info.get("assessments", []) if isinstance(trace_info, dict) else []
        existing = next((a for a in assessments if isinstance(a, dict)
                         and a.get("assessment_name") == item.result.scorer
                         and (a.get("source") or {}).get("source_id") == IDENTIFIER
                         and a.get("valid", True)), None)
        body = self.assessment(item)
        if existing is None:
            await self._call("POST", f"{trace}/assessments", {"assessment": body})
            return
        ident = existing.get("assessment_id")
        if not isinstance(ident, str) or not _ID.fullmatch(ident):  # it goes into a URL path
            raise SinkError(f"MLflow at {shown_url(self.tracking_uri)} answered an assessment "
                            "id that is not one", retryable=False, reason="invalid_response")
        body["assessment_id"] = ident
        mask = ",".join(key for key in ("feedback", "rationale", "metadata") if key in body)
        await self._call("PATCH", f"{trace}/assessments/{ident}",
                         {"assessment": body, "update_mask": mask})

    async def _call(self, method: str, path: str, body: dict[str, Any] | None
                    ) -> dict[str, Any]:
        answer = await call("MLflow", self.tracking_uri, method, path, body=body,
                            missing="trace")
        return answer if isinstance(answer, dict) else {}

    def __repr__(self) -> str:
        return (f"MLflowSink(tracking_uri={shown_url(self.tracking_uri)!r}, "
                f"experiment={self.experiment!r})")


# -- reviewers' labels --------------------------------------------------------------------------
class LabelReader:
    """The few REST calls reading labels needs (search traces, a trace with its spans)."""

    def __init__(self, tracking_uri: str) -> None:
        self.base = _base(tracking_uri)

    async def call(self, method: str, path: str, body: Mapping[str, Any] | None = None
                   ) -> dict[str, Any]:
        try:
            answer = await call("MLflow", self.base, method, path, body=body)
        except SinkError as exc:
            raise ConfigError(str(exc)) from None
        return answer if isinstance(answer, dict) else {}

    async def traces(self, experiment: str, limit: int, *,
                     started: tuple[int, int] | None = None) -> list[dict[str, Any]]:
        """The experiment's traces, at most ``limit`` of them, newest first; with
        ``started``, only those started in that range (milliseconds since the epoch, end
        excluded: the search API's ``timestamp_ms`` filter)."""
        out: list[dict[str, Any]] = []
        token: str | None = None
        seen: set[str] = set()
        for _ in range(MAX_PAGES):
            body: dict[str, Any] = {"locations": [{"type": "MLFLOW_EXPERIMENT",
                                                   "mlflow_experiment": {
                                                       "experiment_id": experiment}}],
                                    "max_results": min(500, limit - len(out)),
                                    "order_by": ["timestamp_ms DESC"]}
            if started is not None:
                body["filter"] = (f"trace.timestamp_ms >= {int(started[0])} AND "
                                  f"trace.timestamp_ms < {int(started[1])}")
            if token:
                body["page_token"] = token
            page = await self.call("POST", "/api/3.0/mlflow/traces/search", body)
            found = page.get("traces")
            if not isinstance(found, list):
                break
            out.extend(info for info in found if isinstance(info, dict)
                       and isinstance(info.get("trace_id"), str))
            token = page.get("next_page_token")
            if (not isinstance(token, str) or not token or token in seen or not found
                    or len(out) >= limit):
                break
            seen.add(token)
        return out[:limit]

    async def spans(self, trace_id: str) -> list[ReadableSpan]:
        """The trace's spans (MLflow returns them as OTLP JSON) as SDK spans."""
        from google.protobuf import json_format
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        from otel_scorers.otlp.spans import spans_of

        path = "/api/3.0/mlflow/traces/get?" + urllib.parse.urlencode({"trace_id": trace_id})
        try:  # one trace answered badly is that trace's problem (a SinkError), not the read's
            answer = await call("MLflow", self.base, "GET", path)
        except SinkError as exc:
            if exc.reason == "unreachable":
                raise ConfigError(str(exc)) from None
            raise
        answer = answer if isinstance(answer, dict) else {}
        found = answer.get("trace")
        trace: Mapping[str, Any] = found if isinstance(found, dict) else {}
        request = json_format.ParseDict(
            {"resource_spans": [{"scope_spans": [{"spans": trace.get("spans", [])}]}]},
            ExportTraceServiceRequest(), ignore_unknown_fields=True)
        return list(spans_of(request))


def mlflow_cases(tracking_uri: str, experiment: str, *, max_traces: int = 5_000
                 ) -> tuple[list[LabelledCase], list[str]]:
    """The cases the human feedback (assessments with source type ``HUMAN``) on the traces of
    ``experiment`` makes, and notes on what was left out."""
    return background_loop.run_sync(_cases(LabelReader(tracking_uri), experiment, max_traces))


async def _cases(reader: LabelReader, experiment: str, max_traces: int
                 ) -> tuple[list[LabelledCase], list[str]]:
    from google.protobuf import json_format

    notes: dict[str, int] = {}
    cases: list[LabelledCase] = []
    for info in await reader.traces(experiment, max_traces):
        try:
            cases += await _trace_cases(reader, info, notes)
        except ConfigError:
            raise
        except (SinkError, ValueError, KeyError, TypeError, AttributeError, RecursionError,
                json_format.Error) as exc:  # one bad trace is one note, never the whole read
            why = (f"a trace could not be read "
                   f"({exc.reason if isinstance(exc, SinkError) else type(exc).__name__})")
            notes[why] = notes.get(why, 0) + 1
    return cases, [f"{count} human assessment(s) left out: {why}"
                   if not why.startswith("a trace") else f"{count} x {why}"
                   for why, count in sorted(notes.items())]


async def _trace_cases(reader: LabelReader, info: Mapping[str, Any], notes: dict[str, int]
                       ) -> list[LabelledCase]:
    """The cases of one trace's human assessments (each reviewer's its own case)."""
    found = info.get("assessments")
    assessments = [a for a in found if isinstance(a, dict)] if isinstance(found, list) else []
    human = [a for a in assessments
             if _source(a).get("source_type") == "HUMAN"
             and isinstance(a.get("feedback"), dict) and a.get("valid", True)]
    if not human:
        return []
    ours = {a.get("assessment_name"): a.get("metadata") or {} for a in assessments
            if _source(a).get("source_id") == IDENTIFIER}
    spans = await reader.spans(info["trace_id"])
    cases: list[LabelledCase] = []
    for index, review in enumerate(human):
        name = str(review.get("assessment_name"))
        span = span_for(spans, review.get("span_id") or ours_span(info, name))
        run = None
        if span is not None:
            try:
                run = captured_run(span, spans)
            except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
                run = None  # said as "no run could be read"
        value = review["feedback"].get("value")
        ident = review.get("assessment_id")
        case, why = labelled(
            name, run, score=value if isinstance(value, int | float) else None,
            label=value if isinstance(value, str | bool) else None,
            explanation=review.get("rationale"),
            ident=f"mlflow-{info['trace_id']}-{name}-"
                  f"{ident if isinstance(ident, str) else index}",
            source=f"mlflow:{ident if isinstance(ident, str) else ''}",
            ours=ours.get(name, {}))
        if case is not None:
            cases.append(case)
        elif why:
            notes[why] = notes.get(why, 0) + 1
    return cases


def _source(assessment: Mapping[str, Any]) -> Mapping[str, Any]:
    found = assessment.get("source")
    return found if isinstance(found, dict) else {}


# -- the row -------------------------------------------------------------------------------------
def _labels(block: MLflowSettings, limit: int) -> tuple[list[Any], list[str]]:
    if not block.tracking_uri or not block.experiment:
        raise ConfigError("--cases mlflow reads the human feedback of an MLflow experiment: "
                          "set OTEL_SCORERS_MLFLOW_TRACKING_URI and "
                          "OTEL_SCORERS_MLFLOW_EXPERIMENT (its id)")
    return mlflow_cases(block.tracking_uri, block.experiment, max_traces=limit)


MLFLOW = Backend(
    name="mlflow", title="MLflow", settings=MLflowSettings,
    enabled=lambda block: bool(block.tracking_uri),
    writer=lambda block, policy: MLflowSink(block.tracking_uri, experiment=block.experiment,
                                            policy=policy),
    describe=lambda block: f"mlflow at {shown_url(block.tracking_uri)}"
                           + (f" (experiment {block.experiment!r})" if block.experiment else ""),
    labels=_labels)
