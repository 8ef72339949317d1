"""The failure digest read from the result backends: this project's Phoenix span annotations
and MLflow assessments (what the sinks wrote, ``docs/sinks.md``), for one time range, through
the backends' own bounded readers."""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from otel_scorers import background_loop, safe_json
from otel_scorers.backends.base import IDENTIFIER
from otel_scorers.backends.labels import time_ns
from otel_scorers.errors import ConfigError
from otel_scorers.http import shown_url
from otel_scorers.report.records import MAX_REASON_CHARS, Evaluation
from otel_scorers.report.sources import SourceError
from otel_scorers.report.text import utc

__all__ = ["MLflowSource", "PhoenixSource", "from_metadata"]

#: The most spans (Phoenix) or traces (MLflow) one digest reads.
MAX_READ = 5_000
#: How long before the range a trace may have started and still get a result in it (MLflow):
#: the batch lane's default give-up time (``batch.give_up_after_s``).
LATE_S = 90_000
#: The equal parts of the time read that MLflow is read by (each with its share of the bound).
SLICES = 9
#: An OTel trace id as the sinks write it: only such ids become links (a record is read back
#: from a server: nothing else of it goes into a URL).
_HEX = re.compile(r"[0-9a-f]{32}")


def _iso(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, timezone.utc).isoformat()


def _flag(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return None


def from_metadata(*, scorer: str, score: Any, label: Any, reason: Any, time_ns: int,
                  metadata: Mapping[str, Any], service: str = "") -> Evaluation | None:
    """The evaluation a backend record holds (the sinks' metadata: ``trace_id``, ``agent``,
    ``passed``, ``criteria``; MLflow keeps every value as a string)."""
    if isinstance(score, bool) or not isinstance(score, int | float):
        return None
    trace_id = metadata.get("trace_id")
    criteria = metadata.get("criteria")
    if isinstance(criteria, str):
        try:
            criteria = safe_json.loads(criteria)
        except ValueError:
            criteria = None
    rows = [c for c in criteria if isinstance(c, Mapping)] if isinstance(criteria, list) else []
    unmet = tuple(str(c.get("id")) for c in rows
                  if c.get("satisfied") is False and c.get("required", True) is not False)
    agent = metadata.get("agent")
    return Evaluation(
        time_ns=time_ns, trace_id=str(trace_id or ""), scorer=scorer,
        agent=str(agent) if agent else "unknown", service=service, score=float(score),
        label=label if isinstance(label, str) else metadata.get("label")
        if isinstance(metadata.get("label"), str) else None,
        passed=_flag(metadata.get("passed")),
        reason=reason[:MAX_REASON_CHARS] if isinstance(reason, str) else "", unmet=unmet[:50],
        criterion_reasons={str(c.get("id")): str(c["reasoning"])[:MAX_REASON_CHARS]
                           for c in rows if isinstance(c.get("reasoning"), str)})


class PhoenixSource:
    """This project's span annotations in a Phoenix project (spans of the range, then their
    annotations; paged and bounded by the Phoenix reader)."""

    name = "phoenix"

    def __init__(self, endpoint: str, project: str = "default", api_key: str | None = None
                 ) -> None:
        from otel_scorers.backends.phoenix import LabelReader

        try:
            self.reader = LabelReader(endpoint, project, api_key)
        except ConfigError as exc:
            raise SourceError(str(exc)) from None
        self.endpoint, self.project = self.reader.base, project
        self.project_id: str | None = None  # read with the results: the UI's trace pages

    def read(self, start_ns: int, end_ns: int) -> tuple[list[Evaluation], list[str]]:
        try:
            return background_loop.run_sync(self._read(start_ns, end_ns))
        except ConfigError as exc:
            raise SourceError(str(exc)) from None

    async def _read(self, start_ns: int, end_ns: int) -> tuple[list[Evaluation], list[str]]:
        self.project_id = await self.reader.project_id()
        spans = await self.reader.listing(
            f"/v1/projects/{self.reader.project}/spans",
            [("start_time", _iso(start_ns)), ("end_time", _iso(end_ns))], MAX_READ)
        notes = [f"{MAX_READ} spans read (the bound): the window holds more"] \
            if len(spans) >= MAX_READ else []
        ends: dict[str, int] = {}
        for span in spans:
            context = span.get("context")
            when = time_ns(span.get("end_time"))
            if isinstance(context, dict) and isinstance(context.get("span_id"), str) and when:
                ends[context["span_id"]] = when
        found = []
        for annotation in await self.reader.annotations(list(ends), 10 * MAX_READ):
            result = annotation.get("result")
            metadata = annotation.get("metadata")
            if annotation.get("identifier") != IDENTIFIER or not isinstance(result, dict) \
                    or not isinstance(metadata, dict):
                continue
            when = ends.get(str(annotation.get("span_id")), 0)
            evaluation = from_metadata(
                scorer=str(annotation.get("name")), score=result.get("score"),
                label=result.get("label"), reason=result.get("explanation"), time_ns=when,
                metadata=metadata)
            if evaluation is not None and start_ns <= when < end_ns:
                found.append(evaluation)
        return found, notes + ([self.reader.cut] if self.reader.cut else [])

    def trace_link(self, trace_id: str) -> str | None:
        """The trace's page in Phoenix's UI (its project's id, the OTel trace id)."""
        if self.project_id is None or not _HEX.fullmatch(trace_id):
            return None
        return (f"{shown_url(self.endpoint)}/projects/"
                f"{urllib.parse.quote(self.project_id, safe='')}/traces/{trace_id}")


class MLflowSource:
    """This project's assessments on the traces of an MLflow experiment."""

    name = "mlflow"

    def __init__(self, tracking_uri: str, experiment: str) -> None:
        from otel_scorers.backends.mlflow import LabelReader

        try:
            self.reader = LabelReader(tracking_uri)
        except ConfigError as exc:
            raise SourceError(str(exc)) from None
        self.experiment = experiment

    def read(self, start_ns: int, end_ns: int) -> tuple[list[Evaluation], list[str]]:
        """The assessments written in the range, read by the time their traces started
        (MLflow searches traces by their start, the ``timestamp_ms`` filter, not assessments
        by their time): the range in :data:`SLICES` equal parts plus the :data:`LATE_S`
        before it (a batch-lane result lands up to its give-up time after its trace), each
        part's newest traces up to its share of :data:`MAX_READ`. On a busy experiment every
        part of the window is read, not only its newest hour; a part that holds more than its
        share is a sample, and the notes say which parts and how many were read."""
        late = (start_ns - LATE_S * 1_000_000_000, start_ns)
        step = max(1, (end_ns - start_ns) // SLICES)
        parts = [late] + [(start_ns + i * step, end_ns if i == SLICES - 1 else
                           start_ns + (i + 1) * step) for i in range(SLICES)]
        share = max(1, MAX_READ // (SLICES + 1))
        found: list[Evaluation] = []
        full = []
        for first, last in parts:
            try:
                traces = background_loop.run_sync(self.reader.traces(
                    self.experiment, share,
                    started=(first // 1_000_000, -(-last // 1_000_000))))
            except ConfigError as exc:
                raise SourceError(str(exc)) from None
            if len(traces) >= share:
                full.append(f"{utc(first)} to {utc(last)}")
            for info in traces:
                found += _assessments(info, start_ns, end_ns)
        notes = [f"{len(full)} of the {len(parts)} parts of the time read hold more than "
                 f"{share} traces (the bound: {MAX_READ} in {len(parts)} parts); the newest "
                 f"{share} of each were read, so their counts are a sample: "
                 + "; ".join(full[:3]) + ("; ..." if len(full) > 3 else "")] if full else []
        return found, notes

    def trace_link(self, trace_id: str) -> str | None:
        """The trace in the experiment's traces page of MLflow's UI (as its own "View trace"
        links it: the MLflow trace id, ``tr-`` and the OTel trace id)."""
        if not _HEX.fullmatch(trace_id):
            return None
        ident = f"tr-{trace_id}"
        query = urllib.parse.urlencode({"selectedEvaluationId": ident, "traceId": ident})
        return (f"{shown_url(self.reader.base)}/#/experiments/"
                f"{urllib.parse.quote(self.experiment, safe='')}/traces?{query}")


def _assessments(info: Mapping[str, Any], start_ns: int, end_ns: int) -> list[Evaluation]:
    out = []
    for assessment in info.get("assessments") or ():
        if not isinstance(assessment, dict):
            continue
        source = assessment.get("source")
        feedback = assessment.get("feedback")
        metadata = assessment.get("metadata")
        if not isinstance(source, dict) or source.get("source_id") != IDENTIFIER or \
                not isinstance(feedback, dict) or not isinstance(metadata, dict):
            continue
        when = time_ns(assessment.get("create_time")) or 0
        evaluation = from_metadata(
            scorer=str(assessment.get("assessment_name")), score=feedback.get("value"),
            label=None, reason=assessment.get("rationale"), time_ns=when, metadata=metadata)
        if evaluation is not None and start_ns <= when < end_ns:
            out.append(evaluation)
    return out
