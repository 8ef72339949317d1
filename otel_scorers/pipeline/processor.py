"""``ScoringSpanProcessor``: judge agent runs live inside the OpenTelemetry SDK pipeline.

``on_end`` is the hot path and never blocks or raises: skip this library's own spans, select,
sample, enqueue a reference to the (immutable) span, return. A background event loop then
captures the run, asks each sampled scorer to judge it (``arun``, with bounded concurrency),
and emits evaluation spans, ``gen_ai.evaluation.result`` events, metrics and, when the
processor owns the exporter, the evaluated span itself enriched with its scores.

Every selected (span, scorer) pair ends in exactly one counted decision (see
:class:`~otel_scorers.emit.names.Decision`); :meth:`ScoringSpanProcessor.stats` shows them.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from opentelemetry._logs import LoggerProvider
from opentelemetry.context import Context
from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter
from opentelemetry.trace import TracerProvider
from pydantic import BaseModel

from otel_scorers import _aio
from otel_scorers.capture import (
    Captured,
    CaptureMapping,
    Extractor,
    Limits,
    agent_name,
    capture_span,
)
from otel_scorers.capture.trace import CONTENT_KEY_SET, TraceBuffer
from otel_scorers.config import (
    JudgeSettings,
    SamplingSettings,
    SelectionSettings,
    Settings,
    load_settings,
)
from otel_scorers.emit import names as n
from otel_scorers.emit.attributes import ContentPolicy, result_attributes
from otel_scorers.emit.enriched import EnrichedExport
from otel_scorers.emit.metrics import ScorerMetrics
from otel_scorers.emit.names import Decision, Reason
from otel_scorers.emit.spans import Emitter
from otel_scorers.errors import ConfigError, JudgeTimeoutError
from otel_scorers.judge.client import JudgeClient
from otel_scorers.judge.retry import RetryPolicy
from otel_scorers.pipeline.cache import ResultCache
from otel_scorers.pipeline.counts import DecisionCounts
from otel_scorers.pipeline.sampling import Boost, Sampler, Sampling
from otel_scorers.pipeline.selection import Selection, Selector
from otel_scorers.pipeline.worker import Worker
from otel_scorers.scorers.alignment import PromptAlignmentScorer
from otel_scorers.scorers.base import Scorer
from otel_scorers.scorers.result import ScoreError, ScoreResult
from otel_scorers.scorers.rubric import RubricLike, RubricScorer

__all__ = ["ScorerSpec", "ScoringSpanProcessor"]

logger = logging.getLogger(__name__)

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


def attribute_dict(span: ReadableSpan) -> Mapping[str, Any]:
    """The span's attributes as a plain dict, for the hot path. Never mutate the result.

    ``span.attributes`` is a read-only view over the SDK's ``BoundedAttributes``, whose every
    lookup and iteration runs Python code (and takes a lock): about a microsecond per span for
    the few checks ``on_end`` makes. An ended span's attributes no longer change, so the dict
    inside is read directly when the SDK has one; any other span type gets a copy of the view.
    """
    inner = getattr(getattr(span, "_attributes", None), "_dict", None)
    if type(inner) is dict:
        return inner
    raw = span.attributes
    return dict(raw) if raw else {}
ContentMode = Literal["full", "truncate", "none"]


@dataclass(frozen=True)
class ScorerSpec:
    """A scorer with its own sampling policy (otherwise the processor's applies)."""

    scorer: Scorer
    sampling: Sampling | None = None


@dataclass(frozen=True)
class _Slot:
    name: str
    scorer: Scorer
    sampler: Sampler


@dataclass(frozen=True)
class _Job:
    span: ReadableSpan
    slots: tuple[_Slot, ...]


class ScoringSpanProcessor(SpanProcessor):
    """Scores selected spans in the background and emits the results as OTel telemetry.

    Arguments (all keyword-only but ``scorers``):

    - ``scorers``: scorer objects (or :class:`ScorerSpec` with their own sampling).
    - ``selection`` / ``sampling``: which spans, and which share of them (defaults: agent-run
      conventions, every trace).
    - ``capture``: a :class:`CaptureMapping` of your own attribute names, or a callable that
      reads a run from a span. ``rubrics``: rubric per agent name (``"*"`` for any agent) for
      rubric scorers without static criteria; an ``otel_scorers.rubric`` span attribute wins.
    - ``exporter``: enables enriched export (see :mod:`otel_scorers.emit.enriched`).
    - ``tracer_provider`` / ``meter_provider`` / ``logger_provider``: where evaluation spans,
      metrics and events go (default: the global providers).
    - ``evaluation_spans`` / ``events``: switch those outputs off; ``reasons`` = ``full``,
      ``truncate`` (``max_reason_chars`` each) or ``none`` for content-free telemetry.
    - ``queue_size``, ``concurrency``, ``cache_ttl_s``, ``evaluation_timeout_s``,
      ``hold_timeout_s``, ``max_held``, ``shutdown_timeout_s``, ``assemble_from_trace``.
    """

    def __init__(
        self,
        scorers: Sequence[Scorer | ScorerSpec] | None = None,
        *,
        selection: Selection | None = None,
        sampling: Sampling | None = None,
        capture: CaptureMapping | Extractor | None = None,
        rubrics: Mapping[str, RubricLike] | None = None,
        exporter: SpanExporter | None = None,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        logger_provider: LoggerProvider | None = None,
        evaluation_spans: bool | None = None,
        events: bool | None = None,
        reasons: ContentMode | None = None,
        max_reason_chars: int | None = None,
        queue_size: int | None = None,
        concurrency: int | None = None,
        cache_ttl_s: float | None = None,
        cache_size: int | None = None,
        evaluation_timeout_s: float | None = None,
        hold_timeout_s: float | None = None,
        max_held: int | None = None,
        shutdown_timeout_s: float | None = None,
        assemble_from_trace: bool | None = None,
        capture_limits: Limits | None = None,
        config: str | Path | None = None,
    ) -> None:
        arguments = {key: value for key, value in {
            "evaluation_spans": evaluation_spans, "events": events, "reasons": reasons,
            "max_reason_chars": max_reason_chars, "queue_size": queue_size,
            "concurrency": concurrency, "cache_ttl_s": cache_ttl_s, "cache_size": cache_size,
            "evaluation_timeout_s": evaluation_timeout_s, "hold_timeout_s": hold_timeout_s,
            "max_held": max_held, "shutdown_timeout_s": shutdown_timeout_s,
            "assemble_from_trace": assemble_from_trace,
        }.items() if value is not None}
        settings = load_settings(arguments, config=config).settings
        self.settings = settings
        default_sampling = sampling or sampling_from(settings.sampling)
        self._slots = self._build_slots(
            scorers if scorers is not None else scorers_from(settings), default_sampling)
        self._selector = Selector(selection or selection_from(settings.selection))
        if capture is None:
            mapping = settings.capture
            capture = CaptureMapping(**mapping.model_dump()) if any(
                mapping.model_dump().values()) else None
        if capture is None or isinstance(capture, CaptureMapping):
            self._mapping, self._extractor = capture, None
        elif callable(capture):
            self._mapping, self._extractor = None, capture
        else:
            raise ConfigError("capture must be a CaptureMapping or a callable")
        self._rubrics: dict[str, Any] = dict(rubrics) if rubrics is not None else {
            agent: _plain_rubric(rubric) for agent, rubric in settings.rubrics.items()}
        self._limits = capture_limits or Limits()
        self._policy = ContentPolicy(settings.reasons, settings.max_reason_chars)
        self._evaluation_timeout_s = settings.evaluation_timeout_s
        self._shutdown_timeout_s = settings.shutdown_timeout_s
        self._cache = ResultCache(settings.cache_ttl_s, settings.cache_size)
        self._buffer = TraceBuffer() if settings.assemble_from_trace else None
        self.counts = DecisionCounts()
        self._metrics = ScorerMetrics(
            meter_provider, decisions=self.counts.observe,
            queue_depth=lambda: self._worker.depth,
            held_spans=(lambda: len(self._enriched or ())) if exporter is not None else None,
            buffer_dropped=self._buffer.dropped.copy if self._buffer is not None else None)
        self._enriched = (EnrichedExport(exporter, hold_timeout_s=settings.hold_timeout_s,
                                         max_held=settings.max_held,
                                         on_unscored=self._metrics.unscored)
                          if exporter is not None else None)
        self._emitter = Emitter(tracer_provider=tracer_provider, logger_provider=logger_provider,
                                policy=self._policy, spans=settings.evaluation_spans,
                                events=settings.events)
        self._worker: Worker[_Job] = Worker(self._evaluate, queue_size=settings.queue_size,
                                            concurrency=settings.concurrency,
                                            periodic=self._periodic)
        self._names = tuple(slot.name for slot in self._slots)
        self._shutdown = False
        self._shutdown_lock = threading.Lock()
        self._errors_logged: set[str] = set()
        if hasattr(os, "register_at_fork"):
            ref = weakref.ref(self)
            os.register_at_fork(after_in_child=lambda: _after_fork(ref))
        _aio.before_exit(self.shutdown)

    @staticmethod
    def _build_slots(scorers: Sequence[Scorer | ScorerSpec], default: Sampling
                     ) -> tuple[_Slot, ...]:
        if not scorers:
            raise ConfigError("ScoringSpanProcessor needs at least one scorer")
        slots: list[_Slot] = []
        for item in scorers:
            spec = item if isinstance(item, ScorerSpec) else ScorerSpec(item)
            scorer = spec.scorer
            if not isinstance(scorer, Scorer):
                raise ConfigError(f"{scorer!r} is not a scorer (needs name, run and arun)")
            name = getattr(scorer, "name", "")
            if not isinstance(name, str) or not _NAME.fullmatch(name):
                raise ConfigError(f"scorer name {name!r} must match {_NAME.pattern} (it becomes "
                                  "part of attribute names)")
            if any(s.name == name for s in slots):
                raise ConfigError(f"two scorers are named {name!r}: give them distinct names")
            slots.append(_Slot(name, scorer, Sampler(spec.sampling or default)))
        return tuple(slots)

    @property
    def scorers(self) -> tuple[Scorer, ...]:
        return tuple(slot.scorer for slot in self._slots)

    @property
    def queue_depth(self) -> int:
        """Runs waiting for a free evaluation slot."""
        return self._worker.depth

    def stats(self) -> dict[str, dict[str, int]]:
        """Decision totals per scorer: why each selected run was, or was not, scored."""
        return {slot.name: self.counts.totals(slot.name) for slot in self._slots}

    # -- the hot path -----------------------------------------------------------------------
    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return

    def on_end(self, span: ReadableSpan) -> None:
        try:
            attrs = attribute_dict(span)
            if not self._selector.could_match(attrs) and CONTENT_KEY_SET.isdisjoint(attrs):
                # The common case: a span that cannot be selected and has no content to buffer
                # is only a parent link for trace assembly. This library's own spans take this
                # path too, harmlessly (nothing selects or buffers them here).
                buffer = self._buffer
                if buffer is not None and buffer.traces:
                    context = span.context
                    if context is not None and context.trace_id in buffer.traces:
                        buffer.observe(span, None)
                if self._enriched is not None:
                    self._enriched.forward(span)
                return
            self._on_end(span, attrs)
        except Exception:
            self._log_once("on_end", "otel-scorers could not process a span; it was passed on "
                                     "unscored")
            if self._enriched is not None:
                self._enriched.forward(span)

    def _on_end(self, span: ReadableSpan, attrs: Mapping[str, Any]) -> None:
        enriched = self._enriched
        if _is_own(span):
            if enriched is not None:
                enriched.forward(span)
            return
        buffer = self._buffer
        selected = not self._shutdown and self._selector.matches(span, attrs)
        if buffer is not None and (buffer.traces or not CONTENT_KEY_SET.isdisjoint(attrs)):
            buffer.observe(span, attrs, keep_content=not selected)
        if not selected:
            if enriched is not None:
                enriched.forward(span)
            return
        chosen: list[_Slot] = []
        decisions: list[tuple[str, str]] = []
        for slot in self._slots:
            sampler = slot.sampler
            if not sampler.sampled(span):
                decisions.append((slot.name, Decision.SAMPLED_OUT))
            elif sampler.limiter is not None and not sampler.limiter.allow():
                decisions.append((slot.name, Decision.RATE_LIMITED))
            else:
                chosen.append(slot)
        counts = self.counts
        counts.select(self._names, decisions)
        if not chosen:
            if enriched is not None:
                enriched.forward(span)
            return
        held = enriched is not None and enriched.hold(span, len(chosen))
        if self._worker.submit(_Job(span, tuple(chosen))):
            return
        for slot in chosen:
            counts.add(slot.name, Decision.DROPPED, Reason.QUEUE_FULL)
        self._log_once("queue_full", "otel-scorers queue is full: runs are dropped unscored "
                                     "(see the dropped decisions; raise queue_size or "
                                     "concurrency, or sample less)")
        if held and enriched is not None and span.context is not None:
            enriched.release(span.context.span_id)

    # -- direct use (offline re-scoring) ----------------------------------------------------
    def selects(self, span: ReadableSpan) -> bool:
        """Whether ``span`` is an agent run this processor would consider (selection only:
        no sampling, nothing counted). This library's own evaluation spans never are."""
        return not _is_own(span) and self._selector.matches(span, attribute_dict(span))

    async def evaluate(self, span: ReadableSpan, *,
                       descendants: Sequence[ReadableSpan] | None = None) -> list[ScoreResult]:
        """Capture and judge ``span`` with every scorer now, bypassing sampling and the queue
        (the decisions are counted and results emitted as for live runs). ``descendants`` are
        the content spans under it, when its own attributes lack the conversation.

        Returns the results in scorer order; an empty list when nothing could be captured
        (the ``filtered`` decision says why). Runs on the library's background loop.
        """
        self.counts.select(self._names, [])
        return await _aio.on_loop(self._evaluate(_Job(span, self._slots),
                                                 descendants=descendants))

    def capture(self, span: ReadableSpan, *,
                descendants: Sequence[ReadableSpan] | None = None) -> Captured:
        """The run this processor would judge for ``span`` (no judge call, nothing counted)."""
        return capture_span(span, mapping=self._mapping, extractor=self._extractor,
                            limits=self._limits, descendants=list(descendants or ()),
                            rubric=self._rubric_for(span))

    # -- the background side ---------------------------------------------------------------
    async def _evaluate(self, job: _Job, *,
                        descendants: Sequence[ReadableSpan] | None = None) -> list[ScoreResult]:
        span = job.span
        try:
            if descendants is None:
                descendants = (self._buffer.descendants(span) if self._buffer is not None
                               else [])
            captured = self.capture(span, descendants=descendants)
        except Exception:
            self._log_once("capture", "otel-scorers capture failed unexpectedly")
            captured = Captured(None, reason=Reason.INTERNAL)
        if self._buffer is not None and span.parent is None and span.context is not None:
            self._buffer.discard(span.context.trace_id)
        if captured.run is None:
            for slot in job.slots:
                self.counts.add(slot.name, Decision.FILTERED, captured.reason or Reason.NO_CONTENT)
                self._release(span, {})
            logger.debug("span %s not scored: %s (%s)", span.name, captured.reason,
                         captured.detail)
            return []
        results = await asyncio.gather(*(self._score(span, slot, captured)
                                          for slot in job.slots))
        return [result for result in results if result is not None]

    def agent_of(self, span: ReadableSpan) -> str | None:
        """The agent name of ``span`` as capture reads it (the mapping's key first)."""
        return agent_name(span, self._mapping)

    def _rubric_for(self, span: ReadableSpan) -> RubricLike | None:
        if not self._rubrics:
            return None
        agent = self.agent_of(span)
        chosen: RubricLike | None = self._rubrics.get(agent or "", self._rubrics.get("*"))
        return chosen

    async def _score(self, span: ReadableSpan, slot: _Slot, captured: Captured
                     ) -> ScoreResult | None:
        """Judge one run with one scorer; counts exactly one terminal decision."""
        attributes: dict[str, Any] = {}
        counted = False
        run = captured.run
        assert run is not None
        try:
            budget = slot.sampler.budget
            if budget is not None and budget.exhausted():
                self.counts.add(slot.name, Decision.BUDGET_EXHAUSTED)
                counted = True
                self._log_once(f"budget:{slot.name}", f"otel-scorers judge budget of scorer "
                               f"{slot.name} is spent for this hour: runs are skipped")
                return None
            start_ns = time.time_ns()
            key = self._cache_key(slot.scorer, run) if self._cache.enabled else None
            cached = self._cache.get(key) if key is not None else None
            if cached is not None:
                result = cached.model_copy(update={"run_id": run.run_id, "cached": True})
                decision, reason, error_type = Decision.CACHED, None, None
            else:
                result = await self._judge(slot, run)
                if key is not None:
                    self._cache.put(key, result)
                if budget is not None and result.judge is not None:
                    budget.spend(result.judge.total_tokens, result.judge.cost_usd)
                decision, reason, error_type = _decision_of(result)
            self.counts.add(slot.name, decision, reason, error_type)
            counted = True
            if decision != Decision.FILTERED:
                attributes = self._emit(span, slot, captured, result, start_ns)
            return result
        except asyncio.CancelledError:
            if not counted:
                self.counts.add(slot.name, Decision.DROPPED, Reason.SHUTDOWN)
            raise
        except Exception:
            if not counted:
                self.counts.add(slot.name, Decision.ERROR, None, Reason.INTERNAL)
            self._log_once(f"score:{slot.name}", f"otel-scorers scorer {slot.name} failed "
                           "unexpectedly")
            return None
        finally:
            self._release(span, attributes)

    def _emit(self, span: ReadableSpan, slot: _Slot, captured: Captured, result: ScoreResult,
              start_ns: int) -> dict[str, Any]:
        """Metrics, evaluation span and event; returns the attributes for enriched export."""
        try:
            self._metrics.result(result, captured.agent)
            self._emitter.emit(span, result, agent=captured.agent, source=captured.source,
                               start_ns=start_ns, end_ns=time.time_ns())
        except Exception:
            self._log_once("emit", "otel-scorers could not emit an evaluation result")
        return result_attributes(result, f"{n.PREFIX}{slot.name}.", self._policy)

    async def _judge(self, slot: _Slot, run: Any) -> ScoreResult:
        try:
            return await asyncio.wait_for(slot.scorer.arun(run),
                                          timeout=self._evaluation_timeout_s)
        except asyncio.TimeoutError:
            error = JudgeTimeoutError(
                f"evaluation exceeded evaluation_timeout_s={self._evaluation_timeout_s:g}")
            return ScoreResult(run_id=run.run_id, scorer=slot.name,
                               scale=float(getattr(slot.scorer, "scale", 1.0)),
                               error=ScoreError.from_exception(error),
                               reason=f"Not scored: {error}")

    @staticmethod
    def _cache_key(scorer: Scorer, run: Any) -> str | None:
        key_of = getattr(scorer, "cache_key", None)
        if key_of is None:
            return None
        key = key_of(run)
        return None if key is None else f"{getattr(scorer, 'name', '')}:{key}"

    def _release(self, span: ReadableSpan, attributes: dict[str, Any]) -> None:
        if self._enriched is not None and span.context is not None:
            self._enriched.add(span.context.span_id, attributes)

    def _periodic(self) -> None:
        if self._buffer is not None:
            self._buffer.sweep()
        if self._enriched is not None:
            self._enriched.sweep()

    def _log_once(self, key: str, message: str) -> None:
        if key in self._errors_logged:
            return
        self._errors_logged.add(key)
        logger.warning(message, exc_info=key in ("on_end", "capture") or key.startswith("score:"))

    # -- flush and shutdown ---------------------------------------------------------------
    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Wait for queued evaluations (and export enriched spans) within the timeout."""
        deadline = time.monotonic() + timeout_millis / 1000.0
        done = self._worker.flush(max(0.0, deadline - time.monotonic()))
        if self._enriched is not None:
            remaining_ms = max(0, int((deadline - time.monotonic()) * 1000))
            done = self._enriched.force_flush(remaining_ms) and done
        return done

    def shutdown(self) -> None:
        """Stop taking spans, drain queued evaluations (bounded), export everything held."""
        with self._shutdown_lock:
            if self._shutdown:
                return
            self._shutdown = True
        abandoned = self._worker.stop(self._shutdown_timeout_s)
        for job in abandoned:
            for slot in job.slots:
                self.counts.add(slot.name, Decision.DROPPED, Reason.SHUTDOWN)
        if self._enriched is not None:
            self._enriched.release_all(Reason.SHUTDOWN)
            self._enriched.shutdown()

    def _after_fork(self) -> None:
        self._worker.reset_after_fork()


def _is_own(span: ReadableSpan) -> bool:
    """Spans this library emitted (evaluation spans): never selected, never buffered."""
    scope = span.instrumentation_scope
    return scope is not None and scope.name == n.SCOPE_NAME


def _after_fork(ref: weakref.ReferenceType[ScoringSpanProcessor]) -> None:
    processor = ref()
    if processor is not None:
        processor._after_fork()


def sampling_from(settings: SamplingSettings) -> Sampling:
    return Sampling(
        ratio=settings.ratio, error_ratio=settings.error_ratio,
        boosts=tuple(Boost(b.attribute, b.value, b.ratio) for b in settings.boosts),
        rate_limit=settings.rate_limit, budget_tokens_per_hour=settings.budget_tokens_per_hour,
        budget_cost_per_hour=settings.budget_cost_per_hour, salt=settings.salt)


def selection_from(settings: SelectionSettings) -> Selection:
    return Selection(agent_conventions=settings.agent_conventions,
                     include_llm_spans=settings.include_llm_spans,
                     span_names=tuple(settings.span_names), attributes=dict(settings.attributes),
                     agents=tuple(settings.agents))


def _plain_rubric(rubric: Any) -> Any:
    if isinstance(rubric, list):
        return [item.model_dump() if isinstance(item, BaseModel) else item for item in rubric]
    return rubric


def judge_from(settings: JudgeSettings) -> JudgeClient:
    return JudgeClient(
        settings.model, api_base=settings.api_base,
        api_key=settings.api_key.get_secret_value() if settings.api_key else None,
        temperature=settings.temperature, max_tokens=settings.max_tokens,
        timeout_s=settings.timeout_s, retry=RetryPolicy(max_retries=settings.max_retries),
        structured_output=settings.structured_output, redactor=settings.redact)


def scorers_from(settings: Settings) -> list[ScorerSpec]:
    """Build the scorers a configuration describes (one judge client shared by all)."""
    judge = judge_from(settings.judge)
    specs: list[ScorerSpec] = []
    for item in settings.scorers:
        scorer: Scorer
        if item.type == "rubric":
            scorer = RubricScorer(judge, _plain_rubric(item.criteria), scale=item.scale,
                                  name=item.name or "rubric")
        else:
            scorer = PromptAlignmentScorer(judge, scale=item.scale,
                                           evaluation_mode=item.evaluation_mode,
                                           pass_threshold=item.pass_threshold,
                                           name=item.name or "prompt_alignment")
        specs.append(ScorerSpec(scorer, sampling_from(item.sampling) if item.sampling else None))
    return specs


def _decision_of(result: ScoreResult) -> tuple[str, str | None, str | None]:
    """The terminal decision of a finished evaluation.

    A result the scorer skipped (a rubric scorer with no rubric for the run) still carries the
    seed's default score, but nothing was judged: live scoring counts it as filtered and emits
    no score, so pass rates and score histograms only count judged runs.
    """
    if result.skipped is not None:
        return Decision.FILTERED, result.skipped, None
    if result.error is None:
        return Decision.SCORED, None, None
    if result.error.type == "invalid_input":
        return Decision.FILTERED, Reason.INVALID_INPUT, None
    return Decision.ERROR, None, result.error.type
