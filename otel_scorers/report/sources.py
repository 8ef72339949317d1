"""Where the failure digest reads evaluation results back from: exported OTLP trace files, or
the Jaeger query API. Each source reads one time range, bounded (operations, traces, bytes),
and says what it could not read; an unreachable source is one :class:`SourceError` line."""

from __future__ import annotations

import contextlib
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from otel_scorers import background_loop, safe_json
from otel_scorers import names as n
from otel_scorers.errors import OtelScorersError, SinkError
from otel_scorers.http import shown_url
from otel_scorers.report.records import Evaluation, from_span_attributes
from otel_scorers.report.text import is_trace_id, utc

__all__ = ["FileSource", "JaegerSource", "Source", "SourceError"]

#: The most traces read per evaluation operation (scorer) from Jaeger, and the most scorers.
MAX_TRACES = 1_000
MAX_OPERATIONS = 50


class SourceError(OtelScorersError):
    """A source could not be read at all (unreachable, refused, not what it should be)."""

    error_type = "source_error"


class Source(Protocol):
    """Evaluation results of a time range (nanoseconds since the epoch, end excluded)."""

    name: str

    def read(self, start_ns: int, end_ns: int) -> tuple[list[Evaluation], list[str]]: ...

    def trace_link(self, trace_id: str) -> str | None: ...


class FileSource:
    """Exported OTLP trace files (JSON lines or protobuf, ``.gz`` too; the Collector's
    ``file`` exporter, or ``rescore --emit`` output).

    A file that holds no evaluation of the window says why in a note: no OTLP span in it at
    all (rescore's ``results.jsonl``, other JSON), spans but no evaluation span, evaluations
    that are all skips or errors, or evaluations outside the time read (when they lie)."""

    name = "files"

    def __init__(self, paths: Sequence[str]) -> None:
        self.paths = list(paths)

    def read(self, start_ns: int, end_ns: int) -> tuple[list[Evaluation], list[str]]:
        found: list[Evaluation] = []
        notes: list[str] = []
        for path in self.paths:
            tally = _Tally()
            found += self._read_one(path, start_ns, end_ns, tally, notes)
            notes += tally.notes(path, start_ns, end_ns)
        return found, notes

    @staticmethod
    def _read_one(path: str, start_ns: int, end_ns: int, tally: _Tally, notes: list[str]
                  ) -> list[Evaluation]:
        from otel_scorers.otlp import OTLPDecodeError
        from otel_scorers.otlp.files import read_requests
        from otel_scorers.otlp.spans import spans_of

        found: list[Evaluation] = []
        try:
            for request in read_requests(path):
                tally.records += 1
                for span in spans_of(request):
                    tally.spans += 1
                    evaluation = _of_span(span, tally)
                    if evaluation is None:
                        continue
                    if start_ns <= evaluation.time_ns < end_ns:
                        found.append(evaluation)
                    else:
                        tally.outside.append(evaluation.time_ns)
        except OTLPDecodeError as exc:  # what came before it is kept
            notes.append(str(exc))
        return found

    def trace_link(self, trace_id: str) -> str | None:
        return None


class _Tally:
    """What one file held, for the notes of a file with nothing to digest."""

    def __init__(self) -> None:
        self.records = self.spans = self.evaluation_spans = self.unjudged = 0
        self.outside: list[int] = []

    def notes(self, path: str, start_ns: int, end_ns: int) -> list[str]:
        judged = self.evaluation_spans - self.unjudged
        if not self.spans:
            return [f"{path}: {self.records} record(s), no OTLP span in them: not an OTLP "
                    "trace export (report reads the evaluation spans of trace files, e.g. the "
                    "Collector's file exporter or what `rescore --emit` sends; rescore's "
                    "results.jsonl is read by `calibrate --cases`)"]
        if not self.evaluation_spans:
            return [f"{path}: {self.spans} spans read, none of them an evaluation span "
                    f"({n.EVALUATION_SPAN_PREFIX} <scorer>): export the traces after they "
                    "were scored (the evaluation spans are children of the runs)"]
        notes = []
        if self.unjudged:
            notes.append(f"{path}: {self.unjudged} of {self.evaluation_spans} evaluation "
                         "spans are skips or errors: no verdict to digest")
        if self.outside:
            notes.append(f"{path}: {len(self.outside)} of {judged} evaluations lie outside "
                         f"the time read ({utc(start_ns)} to {utc(end_ns)}: this window "
                         f"and the one before); theirs run from {utc(min(self.outside))} to "
                         f"{utc(max(self.outside))}: widen --window")
        return notes


def _of_span(span: Any, tally: _Tally) -> Evaluation | None:
    if not span.name.startswith(n.EVALUATION_SPAN_PREFIX + " ") or span.context is None:
        return None
    tally.evaluation_spans += 1
    when = span.end_time or span.start_time or 0
    service = span.resource.attributes.get("service.name", "") if span.resource else ""
    evaluation = from_span_attributes(dict(span.attributes or {}), time_ns=when,
                                      trace_id=f"{span.context.trace_id:032x}",
                                      service=str(service))
    if evaluation is None:
        tally.unjudged += 1
    return evaluation


class JaegerSource:
    """The Jaeger query API (``/api/traces``) at ``url`` (the UI's base URL), for one service:
    each ``gen_ai.evaluation <scorer>`` operation read up to :data:`MAX_TRACES` traces."""

    name = "jaeger"

    def __init__(self, url: str, service: str) -> None:
        from otel_scorers.backends.base import base_url

        self.url = base_url(url, "the Jaeger URL")
        self.service = service

    def _get(self, path: str, params: Sequence[tuple[str, str]] = ()) -> Any:
        from otel_scorers.backends.base import call

        try:
            return background_loop.run_sync(call("Jaeger", self.url, "GET", path,
                                                 params=params))
        except SinkError as exc:
            raise SourceError(str(exc)) from None

    def read(self, start_ns: int, end_ns: int) -> tuple[list[Evaluation], list[str]]:
        quoted = urllib.parse.quote(self.service, safe="")
        answer = self._get(f"/api/services/{quoted}/operations")
        names = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(names, list):
            raise SourceError(f"Jaeger at {shown_url(self.url)} answered no operation list for "
                              f"service {self.service!r}")
        operations = sorted(name for name in names if isinstance(name, str)
                            and name.startswith(n.EVALUATION_SPAN_PREFIX + " "))
        notes = [] if operations else [
            f"service {self.service!r} has no {n.EVALUATION_SPAN_PREFIX} <scorer> operation "
            f"in Jaeger at {shown_url(self.url)}: its runs were not scored, or the evaluation "
            "spans go to another service (the evaluated span's resource)"]
        if len(operations) > MAX_OPERATIONS:
            notes.append(f"{len(operations)} evaluation operations: the first "
                         f"{MAX_OPERATIONS} read")
            operations = operations[:MAX_OPERATIONS]
        found: list[Evaluation] = []
        for operation in operations:
            answer = self._get("/api/traces", [
                ("service", self.service), ("operation", operation),
                ("start", str(start_ns // 1000)), ("end", str(end_ns // 1000)),
                ("limit", str(MAX_TRACES))])
            traces = answer.get("data") if isinstance(answer, dict) else None
            if not isinstance(traces, list):
                notes.append(f"{operation}: Jaeger answered no trace list")
                continue
            if len(traces) >= MAX_TRACES:
                notes.append(f"{operation}: {MAX_TRACES} traces read (the bound): the window "
                             "holds more; narrow it for exact counts")
            found += [e for trace in traces if isinstance(trace, dict)
                      for e in _of_jaeger_trace(trace, operation, start_ns, end_ns)]
        return found, notes

    def trace_link(self, trace_id: str) -> str | None:
        """The trace's page in Jaeger's UI; only from a trace id (the answer's ``traceID``
        is the server's text: anything else never goes into a link)."""
        return f"{self.url}/trace/{trace_id}" if is_trace_id(trace_id) else None


def _of_jaeger_trace(trace: Mapping[str, Any], operation: str, start_ns: int, end_ns: int
                     ) -> Iterable[Evaluation]:
    processes = trace.get("processes") if isinstance(trace.get("processes"), dict) else {}
    for span in trace.get("spans") or ():
        if not isinstance(span, dict) or span.get("operationName") != operation:
            continue
        try:
            when = (int(span.get("startTime", 0)) + int(span.get("duration", 0))) * 1000
            trace_id = str(span.get("traceID", "")).rjust(32, "0")[-32:]
        except (TypeError, ValueError):
            continue
        if not start_ns <= when < end_ns:
            continue
        process = processes.get(span.get("processID")) if isinstance(processes, dict) else None
        service = process.get("serviceName", "") if isinstance(process, dict) else ""
        evaluation = from_span_attributes(_tags(span.get("tags")), time_ns=when,
                                          trace_id=trace_id, service=str(service))
        if evaluation is not None:
            yield evaluation


def _tags(tags: Any) -> dict[str, Any]:
    """Jaeger's tag list as attributes (arrays come back as JSON text)."""
    out: dict[str, Any] = {}
    for tag in tags if isinstance(tags, list) else ():
        if not isinstance(tag, dict) or not isinstance(tag.get("key"), str):
            continue
        value = tag.get("value")
        if isinstance(value, str) and value.startswith("["):
            with contextlib.suppress(ValueError):
                value = safe_json.loads(value)
        out[tag["key"]] = value
    return out
