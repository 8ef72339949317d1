"""Arize Phoenix: results as span annotations, reviewers' annotations back as labelled cases.

Writing (``POST /v1/span_annotations``): each result becomes an annotation on the evaluated
span: ``name`` the scorer's name, ``annotator_kind`` ``LLM`` or ``CODE``, ``result`` the score,
label and explanation (the reason, under the reasons switch), ``metadata`` the rest
(:func:`~otel_scorers.backends.base.metadata_of`), ``identifier`` ``otel-scorers``. Phoenix
upserts on name, span and identifier, so a retry or a re-score overwrites the earlier
annotation. Posts are asynchronous on Phoenix's side (``sync=false``): it queues them and retries
for spans it has not ingested yet, so an evaluation that arrives before its span still lands.

Reading (``calibrate --cases phoenix``): the project's spans and their annotations, a page at a
time and bounded (pages, spans, bytes); each human annotation named after a scorer on a span
whose run capture can read becomes a case (:mod:`otel_scorers.backends.labels`).
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import SecretStr, field_validator

from otel_scorers import background_loop
from otel_scorers.backends.base import (
    IDENTIFIER,
    Evaluated,
    base_url,
    call,
    metadata_of,
    shown_url,
)
from otel_scorers.backends.labels import labelled, span_run
from otel_scorers.config.settings import StrictModel
from otel_scorers.errors import ConfigError, SinkError
from otel_scorers.policy import ContentPolicy
from otel_scorers.registry import Backend, option
from otel_scorers.scorers.cases import LabelledCase

__all__ = ["PHOENIX", "LabelReader", "PhoenixSettings", "PhoenixSink", "phoenix_cases"]

#: Phoenix's limit on one request body is generous; this keeps one post small.
MAX_BATCH = 100
PAGE = 1000
#: The most pages one listing reads (a cursor that never ends stops here).
MAX_PAGES = 200
#: The most seconds one reading (every listing of one reader) takes, whatever the pages: a
#: server that pages slowly, or cursors that never end across many listings, stop here.
MAX_READ_S = 120.0


class PhoenixSettings(StrictModel):
    """Where results are written as Phoenix span annotations (off without an endpoint)."""

    endpoint: str | None = option(None, "write every scored result as a span annotation into "
                                  "this Phoenix (`http://127.0.0.1:6006`; off when unset)",
                                  env="OTEL_SCORERS_PHOENIX_ENDPOINT")
    project: str = option("default", "the Phoenix project your traces go to (where "
                          "`calibrate` reads human annotations)",
                          env="OTEL_SCORERS_PHOENIX_PROJECT")
    api_key: SecretStr | None = option(None, "Phoenix API key (sent as a bearer token); never "
                                       "printed", env="OTEL_SCORERS_PHOENIX_API_KEY")

    @field_validator("endpoint")
    @classmethod
    def _an_http_url(cls, value: str | None) -> str | None:
        """Refused where settings are read (check-config says so as ``install()`` does)."""
        if value:
            _base(value)
        return value or None


def _base(endpoint: str) -> str:
    return base_url(endpoint, "the Phoenix endpoint")


class PhoenixSink:
    """Span annotations in the Phoenix at ``endpoint`` (``http://127.0.0.1:6006``)."""

    name = "phoenix"
    max_batch = MAX_BATCH

    def __init__(self, endpoint: str, *, api_key: str | None = None,
                 project: str = "default", policy: ContentPolicy | None = None) -> None:
        self.endpoint = _base(endpoint)
        self.project = project
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
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

    async def write(self, batch: Sequence[Evaluated]) -> None:
        await call("Phoenix", self.endpoint, "POST", "/v1/span_annotations",
                   body={"data": [self.annotation(item) for item in batch]},
                   params=[("sync", "false")], headers=self._headers, max_bytes=1_048_576)

    def __repr__(self) -> str:  # never the key
        return f"PhoenixSink(endpoint={shown_url(self.endpoint)!r}, project={self.project!r})"


# -- reviewers' labels --------------------------------------------------------------------------
class LabelReader:
    """The few REST calls reading labels needs, bounded."""

    def __init__(self, endpoint: str, project: str, api_key: str | None) -> None:
        self.base = _base(endpoint)
        self.project = urllib.parse.quote(project, safe="")
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._deadline: float | None = None  # set by the first page read
        #: Why the reading stopped before its end (``None``: it did not).
        self.cut: str | None = None

    def _out_of_time(self) -> bool:
        import time

        now = time.monotonic()
        if self._deadline is None:
            self._deadline = now + MAX_READ_S
        if now >= self._deadline and self.cut is None:
            self.cut = (f"Phoenix at {shown_url(self.base)}: the reading stopped after "
                        f"{MAX_READ_S:.0f} s (the bound); what was read by then is kept")
        return self.cut is not None

    async def get(self, path: str, query: Sequence[tuple[str, str]]) -> dict[str, Any]:
        try:
            page = await call("Phoenix", self.base, "GET", path, params=query,
                              headers=self.headers, missing="project")
        except SinkError as exc:
            if exc.reason == "project_not_found":
                return {"data": []}
            raise ConfigError(str(exc)) from None
        return page if isinstance(page, dict) else {}

    async def listing(self, path: str, query: Sequence[tuple[str, str]], limit: int
                      ) -> list[dict[str, Any]]:
        """Every item of a paged listing, at most ``limit`` of them and :data:`MAX_PAGES`
        pages (a cursor that never ends, or repeats, stops there)."""
        out: list[dict[str, Any]] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(MAX_PAGES):
            if self._out_of_time():
                break
            page = await self.get(path, [*query, ("limit", str(min(PAGE, limit - len(out))))]
                                  + ([("cursor", cursor)] if cursor else []))
            data = page.get("data")
            if not isinstance(data, list):
                break
            out.extend(item for item in data if isinstance(item, dict))
            cursor = page.get("next_cursor")
            if (not isinstance(cursor, str) or not cursor or cursor in seen or not data
                    or len(out) >= limit):
                break
            seen.add(cursor)
        return out[:limit]

    async def project_id(self) -> str | None:
        """The project's id in Phoenix (its UI addresses pages by it); ``None``: none."""
        data = (await self.get(f"/v1/projects/{self.project}", [])).get("data")
        ident = data.get("id") if isinstance(data, dict) else None
        return ident if isinstance(ident, str) and 0 < len(ident) <= 200 else None

    async def spans(self, limit: int) -> list[dict[str, Any]]:
        return await self.listing(f"/v1/projects/{self.project}/spans", [], limit)

    async def annotations(self, span_ids: Sequence[str], limit: int) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for start in range(0, len(span_ids), 100):
            out += await self.listing(f"/v1/projects/{self.project}/span_annotations",
                                      [("span_ids", s) for s in span_ids[start:start + 100]],
                                      limit - len(out))
            if len(out) >= limit or self.cut:
                break
        return out


def phoenix_cases(endpoint: str, project: str = "default", *, api_key: str | None = None,
                  max_spans: int = 20_000) -> tuple[list[LabelledCase], list[str]]:
    """The cases the human annotations of ``project`` make, and notes on what was left out."""
    return background_loop.run_sync(_cases(LabelReader(endpoint, project, api_key), max_spans))


async def _cases(reader: LabelReader, max_spans: int) -> tuple[list[LabelledCase], list[str]]:
    spans = [s for s in await reader.spans(max_spans) if _ids(s) is not None]
    by_trace: dict[str, list[dict[str, Any]]] = {}
    by_id: dict[str, dict[str, Any]] = {}
    for span in spans:
        trace_id, span_id = _ids(span) or ("", "")
        by_trace.setdefault(trace_id, []).append(span)
        by_id[span_id] = span
    notes: dict[str, int] = {}
    cases: list[LabelledCase] = []
    annotations = await reader.annotations(list(by_id), 10 * max_spans)
    ours = {(a.get("span_id"), a.get("name")): a for a in annotations
            if a.get("identifier") == IDENTIFIER}
    for human in (a for a in annotations if a.get("annotator_kind") == "HUMAN"):
        case, why = _case(human, ours.get((human.get("span_id"), human.get("name"))),
                          by_trace, by_id)
        if case is not None:
            cases.append(case)
        elif why:
            notes[why] = notes.get(why, 0) + 1
    return cases, [f"{count} human annotation(s) left out: {why}"
                   for why, count in sorted(notes.items())] + ([reader.cut] if reader.cut else [])


def _ids(span: Mapping[str, Any]) -> tuple[str, str] | None:
    context = span.get("context")
    if not isinstance(context, dict):
        return None
    trace_id, span_id = context.get("trace_id"), context.get("span_id")
    if isinstance(trace_id, str) and isinstance(span_id, str):
        return trace_id, span_id
    return None


def _case(human: Mapping[str, Any], ours: Mapping[str, Any] | None,
          by_trace: Mapping[str, list[dict[str, Any]]], by_id: Mapping[str, dict[str, Any]]
          ) -> tuple[LabelledCase | None, str | None]:
    span = by_id.get(str(human.get("span_id")))
    if span is None:
        return None, "the span is not in the project's spans read"
    trace_id, _ = _ids(span) or ("", "")
    found = human.get("result")
    result: Mapping[str, Any] = found if isinstance(found, dict) else {}
    name = str(human.get("name"))
    return labelled(name, span_run(span, by_trace.get(trace_id, [])),
                    score=result.get("score"), label=result.get("label"),
                    explanation=result.get("explanation"),
                    ident=f"phoenix-{human.get('span_id')}-{name}-{human.get('id', '')}",
                    source=f"phoenix:{human.get('id', '')}",
                    ours=(ours or {}).get("metadata") or {})


# -- the row -------------------------------------------------------------------------------------
def _key(block: PhoenixSettings) -> str | None:
    return block.api_key.get_secret_value() if block.api_key else None


def _labels(block: PhoenixSettings, limit: int) -> tuple[list[Any], list[str]]:
    if not block.endpoint:
        raise ConfigError("--cases phoenix reads the human annotations of a Phoenix: set "
                          "OTEL_SCORERS_PHOENIX_ENDPOINT (and OTEL_SCORERS_PHOENIX_PROJECT)")
    return phoenix_cases(block.endpoint, block.project, api_key=_key(block), max_spans=limit)


PHOENIX = Backend(
    name="phoenix", title="Phoenix", settings=PhoenixSettings,
    enabled=lambda block: bool(block.endpoint),
    writer=lambda block, policy: PhoenixSink(block.endpoint, project=block.project,
                                             api_key=_key(block), policy=policy),
    describe=lambda block: f"phoenix at {shown_url(block.endpoint)} (project "
                           f"{block.project!r})",
    labels=_labels)
