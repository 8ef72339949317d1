"""Human labels read back from a backend as labelled cases, for ``calibrate --cases NAME``.

Reviewers annotate spans in Phoenix (annotator kind ``HUMAN``) or give feedback on traces in
MLflow (source type ``HUMAN``), naming the annotation after the
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

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, TraceFlags

from otel_scorers import safe_json
from otel_scorers.backends.base import IDENTIFIER
from otel_scorers.capture import capture_span
from otel_scorers.errors import ConfigError
from otel_scorers.scorers.cases import LabelledCase, band_of, case_from_record
from otel_scorers.scorers.run import ScorerRun

__all__ = ["KINDS", "captured_run", "labelled", "ours_span", "reviewed_cases", "span_for",
           "span_run", "time_ns"]

KINDS = ("rubric", "prompt_alignment", "faithfulness")


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
                criteria = safe_json.loads(criteria)
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


def reviewed_cases(name: str, block: Any, limit: int) -> tuple[list[LabelledCase], list[str]]:
    """The cases the reviewers' labels in backend ``name`` (its settings ``block``) make, and
    what was left out; at most ``limit`` spans or traces read. Anything the backend answers
    that cannot be read is a :class:`ConfigError` of one line, and no label is a case there."""
    from otel_scorers import registry

    row = registry.backend(name)
    if row.labels is None:
        raise ConfigError(f"{row.title} keeps no reviewers' labels to read")
    try:
        found, notes = row.labels(block, limit)
    except ConfigError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, RecursionError) as exc:
        raise ConfigError(f"{row.title} answered something unexpected "
                          f"({type(exc).__name__})") from None
    if not found:
        raise ConfigError(f"no human label in {row.title} makes a case (name it after a "
                          "scorer: rubric, prompt_alignment, faithfulness)"
                          + (f"; {'; '.join(notes)}" if notes else ""))
    return found, notes


def _case_run(run: ScorerRun) -> dict[str, Any]:
    return {"input": run.user_prompt or "", "system": run.system_prompt or "",
            "context": [{"role": m.role, "content": m.content} for m in run.conversation
                        if m.role in ("user", "assistant", "system", "tool")],
            "output": run.response,
            "steps": [step.model_dump(exclude_defaults=True) for step in run.steps],
            "tools": [tool.model_dump(exclude_defaults=True) for tool in run.tools]}


def span_run(span: Mapping[str, Any], trace: Sequence[Mapping[str, Any]]) -> ScorerRun | None:
    """The run of a span in Phoenix's JSON shape, read by capture from it and the spans under
    it in its trace (``None``: none could be read)."""
    try:
        return captured_run(_readable(span), [one for s in trace if s is not span
                                              if (one := _or_none(s)) is not None])
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None


def _or_none(span: Mapping[str, Any]) -> ReadableSpan | None:
    """``span`` read, or ``None`` (one unreadable span under a run never spoils the run)."""
    try:
        return _readable(span)
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None


def captured_run(span: ReadableSpan, trace: Sequence[ReadableSpan]) -> ScorerRun | None:
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
        parent=parent, attributes=attributes, start_time=time_ns(span.get("start_time")),
        end_time=time_ns(span.get("end_time")))


def time_ns(text: Any) -> int | None:
    """An ISO 8601 time (``Z`` or an offset) in nanoseconds since the epoch (``None``: not
    one)."""
    if not isinstance(text, str):
        return None
    try:
        return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1e9)
    except ValueError:
        return None


def ours_span(info: Mapping[str, Any], name: str) -> str | None:
    """The span this project's assessment of ``name`` is on (a review on the trace only is
    about the same run)."""
    for assessment in info.get("assessments") or []:
        source = assessment.get("source") if isinstance(assessment, dict) else None
        if assessment.get("assessment_name") == name and isinstance(source, dict) \
                and source.get("source_id") == IDENTIFIER:
            span_id = assessment.get("span_id")
            return span_id if isinstance(span_id, str) else None
    return None


def span_for(spans: Sequence[ReadableSpan], span_id: str | None) -> ReadableSpan | None:
    if span_id:
        try:
            wanted = int(span_id, 16)
        except (TypeError, ValueError):
            return None
        return next((s for s in spans if s.context and s.context.span_id == wanted), None)
    return next((s for s in spans if s.parent is None), None)  # the trace's root
