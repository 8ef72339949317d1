"""Human labels read back from a backend as labelled cases, for ``calibrate --cases phoenix``.

Reviewers annotate spans in Phoenix (annotator kind ``HUMAN``), naming the annotation after the
scorer they judge (``rubric``, ``prompt_alignment``, ``faithfulness``). Each such annotation on a
span whose run can be read (its attributes and the spans under it, read by capture as live
scoring reads them) becomes a case: the run, and the reviewer's verdict as its expected labels:

- ``rubric``: the label (``pass``/``fail``; else ``pass`` exactly at score 1), with the
  criteria this project's own annotation on the span recorded (its metadata keeps their text
  unless ``reasons: none``); no per-criterion verdicts: reviewers label the run, so the report
  measures pass agreement;
- ``prompt_alignment`` and ``faithfulness``: the score (0..1) and its band (the mode from this
  project's annotation, else ``both``).

What cannot become a case is counted in the notes (``no run``, ``no criteria``, ``tool_use``:
reviewers do not label each call), never guessed.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, TraceFlags

from otel_scorers.capture import capture_span
from otel_scorers.errors import ConfigError
from otel_scorers.scorers.cases import LabelledCase, band_of, case_from_record
from otel_scorers.scorers.run import ScorerRun
from otel_scorers.sinks.base import IDENTIFIER, shown_url

__all__ = ["labelled", "mlflow_cases", "phoenix_cases"]

KINDS = ("rubric", "prompt_alignment", "faithfulness")
PAGE = 1000
MAX_ANSWER_BYTES = 64 * 1024 * 1024
TIMEOUT_S = 30.0


def phoenix_cases(endpoint: str, project: str = "default", *, api_key: str | None = None,
                  max_spans: int = 20_000) -> tuple[list[LabelledCase], list[str]]:
    """The cases the human annotations of ``project`` make, and notes on what was left out."""
    client = _Phoenix(endpoint, project, api_key)
    spans = list(client.spans(max_spans))
    by_trace: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        by_trace.setdefault(span["context"]["trace_id"], []).append(span)
    notes: dict[str, int] = {}
    cases: list[LabelledCase] = []
    annotations = client.annotations([s["context"]["span_id"] for s in spans])
    ours = {(a["span_id"], a["name"]): a for a in annotations
            if a.get("identifier") == IDENTIFIER}
    for human in (a for a in annotations if a.get("annotator_kind") == "HUMAN"):
        case, why = _case(human, ours.get((human["span_id"], human["name"])), by_trace, spans)
        if case is not None:
            cases.append(case)
        elif why:
            notes[why] = notes.get(why, 0) + 1
    return cases, [f"{count} human annotation(s) left out: {why}"
                   for why, count in sorted(notes.items())]


def _case(human: Mapping[str, Any], ours: Mapping[str, Any] | None,
          by_trace: Mapping[str, list[dict[str, Any]]], spans: Sequence[dict[str, Any]]
          ) -> tuple[LabelledCase | None, str | None]:
    name = str(human.get("name"))
    if name not in KINDS:
        return None, (f"{name}: reviewers label runs, not each call" if name == "tool_use"
                      else None)
    span = next((s for s in spans if s["context"]["span_id"] == human["span_id"]), None)
    if span is None:
        return None, "the span is not in the project's spans read"
    run = _run(span, by_trace.get(span["context"]["trace_id"], []))
    result = human.get("result") or {}
    return labelled(name, run, score=result.get("score"), label=result.get("label"),
                    explanation=result.get("explanation"),
                    ident=f"phoenix-{human['span_id']}-{name}",
                    source=f"phoenix:{human.get('id', '')}",
                    ours=(ours or {}).get("metadata") or {})


def labelled(name: str, run: ScorerRun | None, *, score: Any, label: Any, explanation: Any,
             ident: str, source: str, ours: Mapping[str, Any]
             ) -> tuple[LabelledCase | None, str | None]:
    """The case a reviewer's verdict on ``run`` makes (``ours``: the metadata this project
    wrote on the same span, for a rubric's criteria and an alignment's mode), or why none."""
    if name not in KINDS:
        return None, (f"{name}: reviewers label runs, not each call" if name == "tool_use"
                      else None)
    if run is None or not run.response.strip():
        return None, "no run could be read from the span"
    record: dict[str, Any] = {
        "schema": 1, "id": ident, "domain": source.split(":", 1)[0], "scorer": name,
        "rationale": str(explanation or "human review"), "source": source,
        "run": _case_run(run)}
    if name == "rubric":
        criteria = ours.get("criteria")
        if isinstance(criteria, str):  # MLflow keeps metadata as strings
            try:
                criteria = json.loads(criteria)
            except ValueError:
                criteria = None
        criteria = [c for c in criteria or [] if isinstance(c, Mapping) and c.get("description")]
        if not criteria:
            return None, "rubric: no criteria known (no otel-scorers result with them)"
        if isinstance(label, bool):
            label = "pass" if label else "fail"
        verdict = label if label in ("pass", "fail") else (
            "pass" if isinstance(score, int | float) and score >= 1 else "fail")
        record["options"] = {"criteria": [{"description": c["description"],
                                           "required": bool(c.get("required", True))}
                                          for c in criteria]}
        record["expected"] = {"label": verdict}
    else:
        if isinstance(score, bool) or not isinstance(score, int | float) or not 0 <= score <= 1:
            return None, f"{name}: no score between 0 and 1"
        record["expected"] = {"score": float(score), "band": band_of(float(score))}
        if name == "prompt_alignment":
            record["options"] = {"evaluation_mode": ours.get("mode") or "both"}
        else:
            record["expected"]["label"] = "pass" if score >= 1 else "fail"
    try:
        return case_from_record(record, where=f"the review {source}"), None
    except ConfigError as exc:
        return None, str(exc)


def _case_run(run: ScorerRun) -> dict[str, Any]:
    return {"input": run.user_prompt or "", "system": run.system_prompt or "",
            "context": [{"role": m.role, "content": m.content} for m in run.conversation
                        if m.role in ("user", "assistant", "system", "tool")],
            "output": run.response,
            "steps": [step.model_dump(exclude_defaults=True) for step in run.steps],
            "tools": [tool.model_dump(exclude_defaults=True) for tool in run.tools]}


def _run(span: Mapping[str, Any], trace: Sequence[Mapping[str, Any]]) -> ScorerRun | None:
    """The span's run, read by capture from it and the spans under it in its trace."""
    try:
        return _captured(_readable(span), [_readable(s) for s in trace if s is not span])
    except (ValueError, KeyError, TypeError):
        return None


def _captured(span: ReadableSpan, trace: Sequence[ReadableSpan]) -> ScorerRun | None:
    """The run capture reads for ``span`` from the spans under it in ``trace``."""
    children: dict[int, list[ReadableSpan]] = {}
    for other in trace:
        if other.parent is not None and other.context is not None:
            children.setdefault(other.parent.span_id, []).append(other)
    under: list[ReadableSpan] = []
    todo = list(children.get(span.context.span_id if span.context else 0, []))
    while todo and len(under) < 2_000:
        node = todo.pop()
        under.append(node)
        todo.extend(children.get(node.context.span_id if node.context else 0, []))
    return capture_span(span, descendants=under).run


def _readable(span: Mapping[str, Any]) -> ReadableSpan:
    context = span["context"]
    trace_id, span_id = int(context["trace_id"], 16), int(context["span_id"], 16)
    parent = (SpanContext(trace_id, int(span["parent_id"], 16), is_remote=False,
                          trace_flags=TraceFlags(TraceFlags.SAMPLED))
              if span.get("parent_id") else None)
    attributes = {k: v for k, v in (span.get("attributes") or {}).items()
                  if isinstance(v, str | int | float | bool)}
    kind = span.get("span_kind")
    if kind and kind != "UNKNOWN":
        attributes.setdefault("openinference.span.kind", kind)
    return ReadableSpan(
        name=str(span.get("name") or ""),
        context=SpanContext(trace_id, span_id, is_remote=False,
                            trace_flags=TraceFlags(TraceFlags.SAMPLED)),
        parent=parent, attributes=attributes, start_time=_ns(span.get("start_time")),
        end_time=_ns(span.get("end_time")))


def _ns(text: Any) -> int | None:
    if not isinstance(text, str):
        return None
    try:
        return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1e9)
    except ValueError:
        return None


class _Phoenix:
    """The few REST calls this needs, bounded (a page at a time, answers to 64 MB)."""

    def __init__(self, endpoint: str, project: str, api_key: str | None) -> None:
        if not endpoint.startswith(("http://", "https://")):
            raise ConfigError(f"the Phoenix endpoint must be an http(s) URL, got {endpoint!r}")
        self.base = endpoint.rstrip("/")
        self.project = urllib.parse.quote(project, safe="")
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def get(self, path: str, query: Sequence[tuple[str, str]]) -> Any:
        url = f"{self.base}{path}?{urllib.parse.urlencode(query)}"
        request = urllib.request.Request(url, headers=self.headers)
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                return json.loads(response.read(MAX_ANSWER_BYTES))
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return {"data": []}
            raise ConfigError(f"Phoenix at {shown_url(self.base)} answered HTTP {exc.code} "
                              f"for {path}") from None
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read from Phoenix at {shown_url(self.base)}: "
                              f"{type(exc).__name__}") from None

    def spans(self, limit: int) -> Iterator[dict[str, Any]]:
        cursor, seen = None, 0
        while seen < limit:
            query = [("limit", str(min(PAGE, limit - seen)))] + (
                [("cursor", cursor)] if cursor else [])
            page = self.get(f"/v1/projects/{self.project}/spans", query)
            for span in page.get("data", []):
                seen += 1
                yield span
            cursor = page.get("next_cursor")
            if not cursor or not page.get("data"):
                return

    def annotations(self, span_ids: Sequence[str]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for start in range(0, len(span_ids), 100):
            chunk = span_ids[start:start + 100]
            cursor = None
            while True:
                query = [("span_ids", s) for s in chunk] + [("limit", str(PAGE))] + (
                    [("cursor", cursor)] if cursor else [])
                page = self.get(f"/v1/projects/{self.project}/span_annotations", query)
                out.extend(page.get("data", []))
                cursor = page.get("next_cursor")
                if not cursor:
                    break
        return out


def mlflow_cases(tracking_uri: str, experiment: str, *, max_traces: int = 5_000
                 ) -> tuple[list[LabelledCase], list[str]]:
    """The cases the human feedback (assessments with source type ``HUMAN``) on the traces of
    ``experiment`` makes, and notes on what was left out."""
    client = _MLflow(tracking_uri)
    notes: dict[str, int] = {}
    cases: list[LabelledCase] = []
    for info in client.traces(experiment, max_traces):
        human = [a for a in info.get("assessments", [])
                 if a.get("source", {}).get("source_type") == "HUMAN" and "feedback" in a
                 and a.get("valid", True)]
        if not human:
            continue
        ours = {a.get("assessment_name"): a.get("metadata") or {}
                for a in info.get("assessments", [])
                if a.get("source", {}).get("source_id") == IDENTIFIER}
        spans = client.spans(info["trace_id"])
        for review in human:
            name = str(review.get("assessment_name"))
            span = _span_for(spans, review.get("span_id") or ours_span(info, name))
            run = None
            if span is not None:
                try:
                    run = _captured(span, spans)
                except (ValueError, KeyError, TypeError):
                    run = None
            value = review["feedback"].get("value")
            case, why = labelled(
                name, run, score=value if isinstance(value, int | float) else None,
                label=value if isinstance(value, str | bool) else None,
                explanation=review.get("rationale"),
                ident=f"mlflow-{info['trace_id']}-{name}",
                source=f"mlflow:{review.get('assessment_id', '')}", ours=ours.get(name, {}))
            if case is not None:
                cases.append(case)
            elif why:
                notes[why] = notes.get(why, 0) + 1
    return cases, [f"{count} human assessment(s) left out: {why}"
                   for why, count in sorted(notes.items())]


def ours_span(info: Mapping[str, Any], name: str) -> str | None:
    """The span this project's assessment of ``name`` is on (a review on the trace only is
    about the same run)."""
    for assessment in info.get("assessments", []):
        if assessment.get("assessment_name") == name and assessment.get(
                "source", {}).get("source_id") == IDENTIFIER:
            span_id = assessment.get("span_id")
            return span_id if isinstance(span_id, str) else None
    return None


def _span_for(spans: Sequence[ReadableSpan], span_id: str | None) -> ReadableSpan | None:
    if span_id:
        wanted = int(span_id, 16)
        return next((s for s in spans if s.context and s.context.span_id == wanted), None)
    return next((s for s in spans if s.parent is None), None)  # the trace's root


class _MLflow:
    """The few REST calls this needs (search traces, a trace with its spans), bounded."""

    def __init__(self, tracking_uri: str) -> None:
        if not tracking_uri.startswith(("http://", "https://")):
            raise ConfigError("the MLflow tracking URI must be an http(s) URL of a tracking "
                              f"server, got {tracking_uri!r}")
        self.base = tracking_uri.rstrip("/")

    def call(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> Any:
        request = urllib.request.Request(
            self.base + path, method=method, headers={"Content-Type": "application/json"},
            data=None if body is None else json.dumps(body).encode())
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                return json.loads(response.read(MAX_ANSWER_BYTES))
        except urllib.error.HTTPError as exc:
            raise ConfigError(f"MLflow at {shown_url(self.base)} answered HTTP {exc.code} for "
                              f"{path.split('?', maxsplit=1)[0]}") from None
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read from MLflow at {shown_url(self.base)}: "
                              f"{type(exc).__name__}") from None

    def traces(self, experiment: str, limit: int) -> Iterator[dict[str, Any]]:
        token, seen = None, 0
        while seen < limit:
            body: dict[str, Any] = {"locations": [{"type": "MLFLOW_EXPERIMENT",
                                                   "mlflow_experiment": {
                                                       "experiment_id": experiment}}],
                                    "max_results": min(500, limit - seen)}
            if token:
                body["page_token"] = token
            page = self.call("POST", "/api/3.0/mlflow/traces/search", body)
            for info in page.get("traces", []):
                seen += 1
                yield info
            token = page.get("next_page_token")
            if not token or not page.get("traces"):
                return

    def spans(self, trace_id: str) -> list[ReadableSpan]:
        """The trace's spans (MLflow returns them as OTLP JSON) as SDK spans."""
        from google.protobuf import json_format
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        from otel_scorers.otlp.spans import spans_of

        trace = self.call("GET", "/api/3.0/mlflow/traces/get?" + urllib.parse.urlencode(
            {"trace_id": trace_id})).get("trace", {})
        request = json_format.ParseDict(
            {"resource_spans": [{"scope_spans": [{"spans": trace.get("spans", [])}]}]},
            ExportTraceServiceRequest(), ignore_unknown_fields=True)
        return list(spans_of(request))
