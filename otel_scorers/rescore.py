"""Offline re-scoring: judge agent runs in spans that were already exported to files.

The files are read with :mod:`otel_scorers.otlp` (OTLP JSON lines or protobuf, as the
Collector ``file`` exporter writes them). Selection, capture, scorers, cache and budget are the
live processor's (a :class:`~otel_scorers.pipeline.ScoringSpanProcessor` built from the same
configuration judges each run through :meth:`~ScoringSpanProcessor.evaluate`), so a run scores
the same offline as live. Differences, on purpose:

- sampling and the rate limit do not apply: a backfill judges every selected run (``limit``
  caps how many); the hourly judge budget does apply;
- traces are assembled from the whole input (content spans of a run may be anywhere in it), so
  memory grows with the content spans of the input, not with the run count;
- results are JSON lines, one per (evaluated span, scorer), carrying the span's trace and span
  ids; with an output file, re-running skips the (span, scorer) pairs already in it that were
  scored. Pairs whose line is an error are judged again, and the later line is the one that
  counts (readers should keep the last line per ``trace_id``/``span_id``/``scorer``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from opentelemetry.sdk.trace import ReadableSpan

from otel_scorers import background_loop
from otel_scorers.capture import attribute_dict
from otel_scorers.capture.trace import CONTENT_KEY_SET, Piece, pieces_under
from otel_scorers.judge.client import JudgeClient, JudgeRequest, load_litellm
from otel_scorers.judge.schema import answer_schema
from otel_scorers.otlp import read_requests, spans_of
from otel_scorers.pipeline.processor import ScoringSpanProcessor
from otel_scorers.scorers.result import ScoreResult

__all__ = ["DryRunEstimate", "Rescorer", "RunRef", "done_pairs", "result_line"]

logger = logging.getLogger(__name__)


@dataclass
class _Trace:
    parents: dict[int, int | None] = field(default_factory=dict)
    content: list[tuple[ReadableSpan, Mapping[str, Any]]] = field(default_factory=list)
    agents: dict[int, tuple[int, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class RunRef:
    """A selected span to judge, with the content under it that it owns (``nested``: pieces
    under it that nested agent spans own, judged on their own)."""

    span: ReadableSpan
    descendants: tuple[Piece, ...]
    nested: int = 0

    @property
    def trace_id(self) -> str:
        assert self.span.context is not None
        return f"{self.span.context.trace_id:032x}"

    @property
    def span_id(self) -> str:
        assert self.span.context is not None
        return f"{self.span.context.span_id:016x}"


def collect_runs(paths: Iterable[str | Path], processor: ScoringSpanProcessor
                 ) -> tuple[list[RunRef], int, int]:
    """Every selected span in ``paths`` (file order) with the content it owns; the span count;
    and how many spans carry conversation content but are neither selected nor part of a
    selected run (an app traced at the LLM-client level only). As live, a run assembled from
    LLM spans is judged on the innermost agent span."""
    traces: dict[int, _Trace] = {}
    selected: list[ReadableSpan] = []
    total = 0
    unselected: set[int] = set()
    for path in paths:
        for request in read_requests(path):
            for span in spans_of(request):
                total += 1
                context = span.context
                assert context is not None
                entry = traces.setdefault(context.trace_id, _Trace())
                entry.parents[context.span_id] = (span.parent.span_id
                                                  if span.parent is not None else None)
                attrs = attribute_dict(span)
                chosen = processor.selects(span)
                if chosen:
                    selected.append(span)
                    if processor.is_agent_span(span):
                        entry.agents[context.span_id] = (span.start_time or 0,
                                                         span.end_time or 0)
                if not CONTENT_KEY_SET.isdisjoint(attrs):
                    entry.content.append((span, attrs))
                    if not chosen:
                        unselected.add(context.span_id)
    runs = []
    for span in selected:
        assert span.context is not None
        entry = traces[span.context.trace_id]
        pieces, nested = pieces_under(span.context.span_id, entry.content, {}, entry.parents,
                                      entry.agents)
        runs.append(RunRef(span, tuple(pieces), nested))
        unselected.difference_update(piece.span_id for piece in pieces)
    return runs, total, len(unselected)


def result_line(ref: RunRef, result: ScoreResult, agent: str | None) -> dict[str, Any]:
    """One JSON-lines record: the evaluated span's identity, then the result's ``to_dict``
    (a skipped evaluation with ``score: null``, ``label: "skipped"``)."""
    return {"trace_id": ref.trace_id, "span_id": ref.span_id, "span_name": ref.span.name,
            "agent": agent, **result.reported().to_dict()}


def done_pairs(path: Path) -> set[tuple[str, str, str]]:
    """(trace_id, span_id, scorer) already scored in an earlier output (errors excluded; a
    torn last line from an interrupted run is ignored)."""
    done: set[tuple[str, str, str]] = set()
    if not path.exists():
        return done
    with path.open(encoding="utf-8") as stream:
        for line in stream:
            try:
                record = json.loads(line)
                key = (record["trace_id"], record["span_id"], record["scorer"])
            except (ValueError, KeyError, TypeError):
                continue
            if record.get("error"):
                done.discard(key)
            else:
                done.add(key)
    return done


@dataclass
class DryRunEstimate:
    """What a run would judge (runs by agent, the first 20 by id) and cost: judge calls and
    tokens (input counted with the judge model's tokenizer through litellm; output estimated
    from the answer schema), and USD where litellm knows the model's price."""

    runs: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0
    models: set[str] = field(default_factory=set)
    by_agent: dict[str, int] = field(default_factory=dict)
    first_runs: list[dict[str, Any]] = field(default_factory=list)
    hint: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"runs": self.runs, "runs_by_agent": self.by_agent,
                "first_runs": self.first_runs, "not_judged": self.skipped,
                **({"hint": self.hint} if self.hint else {}),
                "judge_calls": self.calls,
                "estimated_input_tokens": self.input_tokens,
                "estimated_output_tokens": self.output_tokens,
                "estimated_cost_usd": (None if self.cost_usd is None
                                       else round(self.cost_usd, 6)),
                "models": sorted(self.models)}


class _Estimated(Exception):
    def __init__(self, messages: list[dict[str, str]], schema: dict[str, Any]) -> None:
        super().__init__("dry run")
        self.messages = messages
        self.schema = schema


class _EstimatingJudge:
    """Stands in for a :class:`JudgeClient` in a dry run: renders the request it is given
    exactly as the real client would, then stops (raising) instead of calling the model."""

    def __init__(self, client: JudgeClient) -> None:
        self.client = client
        self.fingerprint = client.fingerprint
        self.model = client.model

    async def judge(self, request: JudgeRequest[Any]) -> Any:
        mode = self.client._mode(load_litellm())
        raise _Estimated(self.client.render(request, mode), answer_schema(request.answer_model))


def _schema_tokens(node: Any) -> int:
    """Answer tokens from a JSON schema: ~30 per free-text string, ~3 per other leaf, plus
    ~3 per key. A deliberate estimate (answers vary), printed as such."""
    if not isinstance(node, dict):
        return 0
    kind = node.get("type")
    if kind == "object" or "properties" in node:
        return sum(3 + _schema_tokens(child) for child in node.get("properties", {}).values())
    if kind == "array":
        return 2 * _schema_tokens(node.get("items", {}))
    if kind == "string" and "enum" not in node:
        return 30
    return 3


class Rescorer:
    """Judges the selected runs of OTLP files with a processor's scorers.

    ``on_result(record)`` receives each JSON-lines record as it is produced; ``progress`` is
    called with (done, total) after every run.
    """

    def __init__(self, processor: ScoringSpanProcessor, *, concurrency: int = 8) -> None:
        self.processor = processor
        self.concurrency = max(1, concurrency)
        #: Spans with conversation content that no selection rule took (set by ``plan``).
        self.unselected = 0

    def plan(self, paths: Sequence[str | Path], *, limit: int | None = None,
             done: set[tuple[str, str, str]] | None = None) -> tuple[list[RunRef], int, int]:
        """(runs to judge, spans read, runs skipped because already done)."""
        runs, total, self.unselected = collect_runs(paths, self.processor)
        names = [getattr(s, "name", "") for s in self.processor.scorers]
        skipped = 0
        if done:
            kept = []
            for ref in runs:
                if all((ref.trace_id, ref.span_id, name) in done for name in names):
                    skipped += 1
                else:
                    kept.append(ref)
            runs = kept
        if limit is not None:
            runs = runs[:max(0, limit)]
        return runs, total, skipped

    def run(self, runs: Sequence[RunRef], *, on_result: Callable[[dict[str, Any]], None],
            progress: Callable[[int], None] | None = None) -> dict[str, int]:
        """Judge ``runs``; returns counts of results by outcome: scored, skipped (a scorer that
        judged nothing, e.g. a rubric scorer without a rubric), error, not_captured (runs)."""
        outcome = {"scored": 0, "skipped": 0, "error": 0, "not_captured": 0}

        async def one(ref: RunRef, gate: asyncio.Semaphore) -> None:
            async with gate:
                results = await self.processor.evaluate(ref.span, descendants=ref.descendants,
                                                         nested=ref.nested)
            agent = self.processor.agent_of(ref.span)
            if not results:
                outcome["not_captured"] += 1
            for result in results:
                kind = ("error" if result.error is not None
                        else "skipped" if result.skipped else "scored")
                outcome[kind] += 1
                on_result(result_line(ref, result, agent))
            if progress is not None:
                progress(1)

        async def everything() -> None:
            gate = asyncio.Semaphore(self.concurrency)
            await asyncio.gather(*(one(ref, gate) for ref in runs))

        background_loop.run_sync(everything())
        return outcome

    def estimate(self, runs: Sequence[RunRef]) -> DryRunEstimate:
        """Judge calls, tokens and cost ``runs`` would take; no judge is called."""
        litellm = load_litellm()
        estimate = DryRunEstimate(runs=len(runs))
        if self.unselected:
            estimate.skipped["content_spans_not_selected"] = self.unselected
            if not runs:
                estimate.hint = (
                    f"{self.unselected} spans carry GenAI content but none is an agent run "
                    "selected for scoring: to score each LLM call, set include_llm_spans: true "
                    "(selection) or OTEL_SCORERS_INCLUDE_LLM_SPANS=true")
        for ref in runs:
            captured = self.processor.capture(ref.span, descendants=ref.descendants,
                                              nested=ref.nested)
            agent = captured.agent or "(unnamed)"
            estimate.by_agent[agent] = estimate.by_agent.get(agent, 0) + 1
            if len(estimate.first_runs) < 20:
                estimate.first_runs.append({"trace_id": ref.trace_id, "span_id": ref.span_id,
                                            "span_name": ref.span.name, "agent": captured.agent})
            if captured.run is None:
                reason = captured.reason or "no_content"
                estimate.skipped[reason] = estimate.skipped.get(reason, 0) + 1
                continue
            for scorer in self.processor.scorers:
                client = getattr(scorer, "judge", None)
                if not isinstance(client, JudgeClient):
                    continue
                messages, schema = _render(scorer, client, captured.run)
                if messages is None:
                    continue
                estimate.calls += 1
                estimate.models.add(client.model)
                try:
                    tokens_in = int(litellm.token_counter(model=client.model, messages=messages))
                except Exception:
                    tokens_in = sum(len(m["content"]) for m in messages) // 4
                tokens_out = _schema_tokens(schema)
                estimate.input_tokens += tokens_in
                estimate.output_tokens += tokens_out
                if estimate.cost_usd is not None:
                    try:
                        cost_in, cost_out = litellm.cost_per_token(
                            model=client.model, prompt_tokens=tokens_in,
                            completion_tokens=tokens_out)
                        estimate.cost_usd += float(cost_in) + float(cost_out)
                    except Exception:
                        estimate.cost_usd = None  # a model litellm has no price for
        return estimate


def _render(scorer: Any, client: JudgeClient, run: Any
            ) -> tuple[list[dict[str, str]] | None, dict[str, Any]]:
    """The messages ``scorer`` would send for ``run`` (None when it would not call)."""
    import copy

    stand_in = copy.copy(scorer)
    stand_in.judge = _EstimatingJudge(client)
    try:
        # _Estimated is no JudgeError: arun lets it through
        background_loop.run_sync(stand_in.arun(run))
    except _Estimated as asked:
        return asked.messages, asked.schema
    except Exception as exc:  # the scorer would not call the judge (invalid input, no rubric)
        logger.debug("dry run: %s would not call the judge: %s", scorer, exc)
        return None, {}
    return None, {}


def write_line(stream: IO[str], record: dict[str, Any]) -> None:
    stream.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
    stream.flush()
