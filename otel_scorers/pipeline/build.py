"""Building the pipeline's parts from arguments and settings: the only pipeline module that
reads configuration (:mod:`otel_scorers.config`) or builds judge clients (:mod:`otel_scorers.
judge`); the processor and the evaluation see finished objects. Invalid configuration raises
:class:`~otel_scorers.errors.ConfigError` here, at construction, never at run time."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from otel_scorers import background_loop, registry
from otel_scorers.backends import SinkQueue
from otel_scorers.backends.labels import reviewed_cases
from otel_scorers.capture import CaptureMapping, Extractor, Limits
from otel_scorers.capture.trace import TraceBuffer
from otel_scorers.config import (
    JudgeSettings,
    SamplingSettings,
    ScorerSettings,
    SelectionSettings,
    Settings,
    load_settings,
)
from otel_scorers.config.params import ARGUMENTS, PipelineSettings
from otel_scorers.emit.enriched import EnrichedExport
from otel_scorers.emit.metrics import ScorerMetrics
from otel_scorers.emit.spans import Emitter
from otel_scorers.errors import ConfigError, EnvConfigError
from otel_scorers.judge.client import JudgeClient
from otel_scorers.judge.redact import RegexRedactor
from otel_scorers.judge.retry import RetryPolicy
from otel_scorers.pipeline.ask import Asker
from otel_scorers.pipeline.batch.build import batch_lane_from, with_lanes
from otel_scorers.pipeline.cache import ResultCache
from otel_scorers.pipeline.canary import MAX_REVIEWED, Canaries
from otel_scorers.pipeline.check import Checker
from otel_scorers.pipeline.content import ContentStripper
from otel_scorers.pipeline.counts import DecisionCounts
from otel_scorers.pipeline.emission import Emission
from otel_scorers.pipeline.evaluation import Evaluation
from otel_scorers.pipeline.health import fix_for, judge_endpoint, judges_of
from otel_scorers.pipeline.health import logger as health_logger
from otel_scorers.pipeline.isolated import IsolatedScorers
from otel_scorers.pipeline.on_demand import OnDemand
from otel_scorers.pipeline.runs import RunReader
from otel_scorers.pipeline.sampling import Boost, Sampler, Sampling
from otel_scorers.pipeline.selection import Selection, Selector
from otel_scorers.pipeline.sessions import SessionLane, SessionPolicy, SessionStore, TurnForwarder
from otel_scorers.pipeline.slots import ScorerSpec, Slot
from otel_scorers.policy import ContentPolicy
from otel_scorers.scorers.base import Scorer
from otel_scorers.scorers.criteria import RubricLike, needs_steps, parse_rubric, plain_criteria

__all__ = [
    "Parts",
    "PipelineSettings",
    "ScorerSpec",
    "Settings",
    "Slot",
    "Timeouts",
    "build_slots",
    "capture_from",
    "check_judges",
    "judge_from",
    "parts_from",
    "resolve_settings",
    "rubrics_from",
    "sampling_from",
    "scorers_from",
    "selection_from",
    "session_policy_from",
]

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
Tier = Literal["standard", "flex"]


@dataclass(frozen=True)
class Timeouts:
    """The bounds the processor's own hooks wait within (seconds)."""

    exit_s: float
    shutdown_s: float
    #: an interaction whose trace's root has not ended is decided after this much quiet
    interaction_wait_s: float


@dataclass(frozen=True)
class Parts:
    """What a processor is made of, built from its arguments and settings. ``slots`` judge
    each interaction; ``sessions`` (the session lane, with its own slots) each conversation,
    or is ``None``."""

    slots: tuple[Slot, ...]
    selector: Selector
    buffer: TraceBuffer
    counts: DecisionCounts
    evaluation: Evaluation
    enriched: EnrichedExport | None
    stripper: ContentStripper | None
    timeouts: Timeouts
    on_demand: OnDemand
    sinks: SinkQueue | None = None
    sessions: SessionLane | None = None
    canaries: Canaries | None = None


def parts_from(settings: Settings, *, scorers: Sequence[Scorer | ScorerSpec] | None,
               selection: Selection | None, sampling: Sampling | None,
               capture: CaptureMapping | Extractor | None,
               rubrics: Mapping[str, RubricLike] | None, exporter: Any,
               tracer_provider: Any, meter_provider: Any, logger_provider: Any,
               capture_limits: Limits | None, log_once: Callable[[str, str], None],
               queue_depth: Callable[[], int], sessions: SessionPolicy | None = None) -> Parts:
    """Every part of a processor (arguments win over settings; see the processor's doc)."""
    every = with_lanes(build_slots(scorers if scorers is not None else scorers_from(settings),
                                   sampling or sampling_from(settings.sampling)), settings.batch)
    slots = tuple(slot for slot in every if getattr(slot.scorer, "level", "turn") != "session")
    session_slots = tuple(slot for slot in every if slot not in slots)
    selector = Selector(selection or selection_from(settings.selection))
    mapping, extractor = capture_from(settings, capture)
    # the buffer holds content for trace assembly and from log records (made even without
    # assembly: a run's own log records are kept there too)
    buffer = TraceBuffer()
    counts = DecisionCounts()
    enriched: list[EnrichedExport] = []
    store: list[SessionStore] = []
    known = known_rates(settings.judge_rates, every, log_once)
    canaries: list[Canaries] = []  # made below, with the metrics' counter: read when collected
    metrics = ScorerMetrics(
        meter_provider, decisions=counts.observe, queue_depth=queue_depth,
        rates=lambda: known + (canaries[0].rates() if canaries else []),
        ratios=lambda: [(s.name, s.sampler.effective_ratio) for s in every if s.sampler.pacer],
        held_spans=(lambda: len(enriched[0])) if exporter is not None else None,
        buffer_dropped=buffer.dropped.copy, max_agents=settings.max_agents,
        content_free=settings.reasons == "none",
        # the store is made below, with the metrics' counters: read it when collected
        sessions=(lambda: store[0].open_count(), lambda: len(store[0]))  # noqa: PLW0108
        if session_slots else None)
    canaries.append(Canaries(settings.canary, every, record=metrics.canary, log_once=log_once,
                             reviewed=lambda name: reviewed_cases(name, settings.backend(name),
                                                                  MAX_REVIEWED)))
    if session_slots:
        store.append(SessionStore(session_policy_from(sessions or settings.sessions),
                                  count_dropped=metrics.dropped_turns,
                                  count_evicted=metrics.evicted))
    if exporter is not None:
        enriched.append(EnrichedExport(exporter, hold_timeout_s=settings.hold_timeout_s,
                                       max_held=settings.max_held,
                                       on_unscored=metrics.unscored))
    policy = ContentPolicy(settings.reasons, settings.max_reason_chars,
                           redactor=RegexRedactor() if settings.judge.redact else None,
                           run_content=settings.exported_content != "strip")
    configured = rubrics_from(settings, rubrics)
    sinks = sinks_from(settings, policy, count=metrics.sink, log_once=log_once)
    reader = RunReader(log_once, mapping=mapping, extractor=extractor,
                       limits=capture_limits or Limits(), rubrics=configured, buffer=buffer,
                       assemble=settings.assemble_from_trace,
                       per_agent=selector.selection.per_agent,
                       steps=any(getattr(slot.scorer, "uses_steps", False) for slot in every)
                       or any(needs_steps(rubric) for rubric in configured.values()))
    emission = Emission(
        counts=counts, metrics=metrics, policy=policy, log_once=log_once, sinks=sinks,
        enriched=enriched[0] if enriched else None,
        emitter=Emitter(tracer_provider=tracer_provider, logger_provider=logger_provider,
                        policy=policy, spans=settings.evaluation_spans, events=settings.events))
    canaries[0].emit = emission.emitter.canary  # each verdict's span
    asker = Asker(timeout_s=settings.evaluation_timeout_s, fuse=settings.fuse_judge_calls,
                  isolated=IsolatedScorers({slot.name: slot.scorer for slot in every
                                            if getattr(slot.scorer, "kind", "llm") != "code"})
                  if settings.isolation == "process" else None)
    evaluation = Evaluation(reader=reader, checker=Checker(ResultCache(
        settings.cache_ttl_s, settings.cache_size)), asker=asker, emission=emission,
        buffer=buffer)
    evaluation.batch = batch_lane_from(settings.batch, every, emission, log_once)
    lane = None
    if store:
        turn_secret = settings.sessions.turn_secret
        secret = turn_secret.get_secret_value().encode() if turn_secret else None
        lane = SessionLane(
            session_slots, store[0], counts, evaluation, keep_steps=any(
                getattr(slot.scorer, "uses_steps", False) for slot in session_slots),
            forward=TurnForwarder(settings.sessions.forward_endpoint, secret=secret)
            if settings.sessions.forward_endpoint else None,
            rubric_for=reader.rubric_for_agent)
        evaluation.keep_turn = lane.keep_turn
    return Parts(slots=slots, selector=selector, buffer=buffer, counts=counts,
                 evaluation=evaluation, enriched=enriched[0] if enriched else None,
                 stripper=ContentStripper(mapping) if settings.exported_content == "strip"
                 else None, sinks=sinks, sessions=lane, canaries=canaries[0],
                 timeouts=Timeouts(settings.exit_timeout_s, settings.shutdown_timeout_s,
                                   settings.interaction_wait_s),
                 on_demand=OnDemand(selector=selector, slots=slots, evaluation=evaluation,
                                    counts=counts, sessions=lane))


def known_rates(path: str | None, slots: Sequence[Slot], log_once: Callable[[str, str], None]
                ) -> list[tuple[str, str, str, float, float]]:
    """The ``judge_rates`` file's rates of the configured scorers, as the gauges report them
    (scorer, judge model, source, TPR, TNR): a scorer's own by its name, and only when its
    judge is the model they were measured with. A file that cannot be read, or rates of
    another judge, is said once; scoring goes on (the rates only correct the dashboards)."""
    if not path:
        return []
    from otel_scorers.calibration.rates import load_rates

    try:
        rates = load_rates(path)
    except ConfigError as exc:
        log_once("judge_rates", f"otel-scorers: {exc}: no judge rates are exported (the "
                 "corrected pass rate has none to use)")
        return []
    known: list[tuple[str, str, str, float, float]] = []
    for slot in slots:
        entry = rates.get(slot.name)
        model = getattr(getattr(slot.scorer, "judge", None), "model", None)
        if entry is None or model is None:
            continue
        if entry.model != model:
            log_once(f"judge_rates:{slot.name}",
                     f"otel-scorers: the judge rates of scorer {slot.name} were measured with "
                     f"{entry.model!r}, but it judges with {model!r}: not exported. To fix: "
                     f"otel-scorers calibrate --model {model} --save {path}")
            continue
        known.append((slot.name, model, entry.source, entry.tpr, entry.tnr))
    return known


def sinks_from(settings: Settings, policy: ContentPolicy, *, count: Any = None,
               log_once: Callable[[str, str], None] | None = None) -> SinkQueue | None:
    """The writers of the backends whose blocks turn them on, behind one queue (``None``:
    no backend is on)."""
    made = [row.writer(settings.backend(row.name), policy) for row in registry.backends()
            if row.enabled(settings.backend(row.name))]
    if not made:
        return None
    return SinkQueue(made, max_items=settings.sinks.queue_size,
                     max_bytes=settings.sinks.queue_bytes, retry_s=settings.sinks.retry_s,
                     count=count, log_once=log_once)


def resolve_settings(arguments: Mapping[str, Any], config: str | Path | None
                     ) -> tuple[Settings, list[str]]:
    """Settings from ``arguments`` (``None`` values dropped) over env over file over defaults,
    and the problems of the environment: when there are some, the settings leave the
    environment out (the caller turns scoring off; it never judges with half a setup)."""
    if unknown := sorted(set(arguments) - ARGUMENTS):
        raise TypeError(f"ScoringSpanProcessor() got unexpected keyword arguments "
                        f"{', '.join(map(repr, unknown))}; the settings it takes are "
                        f"{', '.join(sorted(ARGUMENTS))} (docs/configuration.md)")
    given = {key: value for key, value in arguments.items() if value is not None}
    try:
        return load_settings(given, config=config).settings, []
    except EnvConfigError as exc:
        return load_settings(given, config=config, env={}).settings, exc.problems


def build_slots(scorers: Sequence[Scorer | ScorerSpec], default: Sampling) -> tuple[Slot, ...]:
    """One slot per scorer; names must be unique and usable inside attribute names."""
    if not scorers:
        raise ConfigError("ScoringSpanProcessor needs at least one scorer")
    slots: list[Slot] = []
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
        slots.append(Slot(name, scorer, Sampler(spec.sampling or default), spec.lane))
    return tuple(slots)


def capture_from(settings: Settings, capture: CaptureMapping | Extractor | None
                 ) -> tuple[CaptureMapping | None, Extractor | None]:
    """The user's attribute mapping or extractor (the argument wins over the settings)."""
    if capture is None:
        mapping = settings.capture.model_dump()
        capture = CaptureMapping(**mapping) if any(mapping.values()) else None
    if capture is None or isinstance(capture, CaptureMapping):
        return capture, None
    if callable(capture):
        return None, capture
    raise ConfigError("capture must be a CaptureMapping or a callable")


def rubrics_from(settings: Settings, rubrics: Mapping[str, RubricLike] | None
                 ) -> dict[str, Any]:
    """Rubrics per agent name (``"*"``: any agent); the argument wins over the settings."""
    if rubrics is None:
        rubrics = {agent: plain_criteria(rubric) for agent, rubric in settings.rubrics.items()}
    # Parsed here, on the trusted side: a configured rubric may hold quick checks, a rubric
    # read from a span may not (``parse_rubric(checks=False)`` there).
    return {agent: list(parse_rubric(rubric)) for agent, rubric in rubrics.items()}


def session_policy_from(policy: SessionPolicy) -> SessionPolicy:
    """A session policy, checked (it needs somewhere to read the key)."""
    if not policy.key_attributes:
        raise ConfigError("sessions.key_attributes needs at least one attribute name")
    return policy


def sampling_from(settings: SamplingSettings) -> Sampling:
    """The runtime policy of a settings block (the same fields, a test keeps them so)."""
    values = settings.model_dump()
    values["boosts"] = tuple(Boost(**boost) for boost in values["boosts"])
    return Sampling(**values)


def selection_from(settings: SelectionSettings) -> Selection:
    """The runtime selection of a settings block (the same fields but the predicate, which
    only code can give)."""
    values: dict[str, Any] = {key: tuple(value) if isinstance(value, list) else value
                              for key, value in settings.model_dump().items()}
    return Selection(**values)


def judge_from(settings: JudgeSettings, service_tier: Tier | None = None) -> JudgeClient:
    """The judge of resolved settings (argument, environment, file, default: the environment
    is not read again), at ``service_tier`` when given (a scorer's own)."""
    return JudgeClient(
        settings.model, api_base=settings.api_base,
        api_key=settings.api_key.get_secret_value() if settings.api_key else None,
        temperature=settings.temperature, max_tokens=settings.max_tokens,
        timeout_s=settings.timeout_s, retry=RetryPolicy(max_retries=settings.max_retries),
        structured_output=settings.structured_output, redactor=settings.redact,
        transport=settings.transport, service_tier=service_tier or settings.service_tier,
        flex_fallback=settings.flex_fallback)


def scorers_from(settings: Settings) -> list[ScorerSpec]:
    """Build the scorers a configuration describes, each by its type's registry row (one
    judge client per service tier, shared; none made when no scorer judges)."""
    judges: dict[str, JudgeClient] = {}

    def shared_judge(given: Tier | None) -> JudgeClient:
        tier = given or settings.judge.service_tier
        return judges.get(tier) or judges.setdefault(tier, judge_from(settings.judge, tier))

    return [ScorerSpec(scorer_of(item, functools.partial(shared_judge, item.service_tier)),
                       sampling_from(item.sampling) if item.sampling else None, item.lane)
            for item in settings.scorers]


def scorer_of(item: ScorerSettings, judge: Callable[[], JudgeClient]) -> Scorer:
    """One configured scorer, built by its type's row (its options were checked against the
    row's model when the settings were read)."""
    row = registry.scorer_type(item.type)
    made: Scorer = row.build(item.name or row.name, item.scale, item.options,
                             judge() if row.judges else None)
    return made


def start_background(parts: Parts, settings: Settings, scorers: Sequence[Any]
                     ) -> Future[list[Any]] | None:
    """What a processor runs on the background loop from its start: the judge canaries, and
    with ``check_judge`` one request to each judge (its future: the results)."""
    for part in (parts.canaries, parts.evaluation.batch):
        if part is not None:
            part.start()
    if not settings.check_judge:
        return None
    return background_loop.submit(check_judges(judges_of(scorers)))


async def check_judges(judges: Sequence[Any]) -> list[Any]:
    """One request to each judge, in its structured-output mode (``check_judge``,
    ``serve --check-judge``): a success is one info line, a failure one error line with its
    fix. Returns each judge's :class:`~otel_scorers.judge.ping.PingResult`."""
    from otel_scorers.judge.ping import ping

    results = []
    for judge in judges:
        result = await ping(judge)
        results.append(result)
        where = judge_endpoint(judge)
        if result.ok:
            health_logger.info("otel-scorers: judge %s answered the start check in %.2fs "
                               "(structured output: %s)", where, result.latency_s,
                               result.structured_output)
            continue
        message = result.error or ""
        health_logger.error(
            "otel-scorers: the start check of judge %s failed (%s): %s. To fix: %s", where,
            result.error_type, message[:500],
            fix_for(result.error_type or "", message, result.structured_output))
    return results
