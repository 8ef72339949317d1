"""The metric instruments and what each evaluation records on them.

Attributes are low-cardinality only: scorer, label, passed, agent, judge model, criterion id,
dimension, decision, reason, error type. Never text, never run or trace ids. Two come from the
application and could multiply without end: criterion ids (dynamic rubrics) and agent names.
At most ``max_criteria_series`` distinct criterion ids per scorer and ``max_agents`` distinct
agent names are recorded; the rest count under ``"_other"``, and every value folded so is
counted in ``otel_scorers.metric.overflow`` (by ``label``: ``criterion`` or ``agent``). The
caps multiply (100 agents x 100 criteria x verdicts), so each instrument also keeps at most
:data:`MAX_SERIES` attribute sets: past that, a new set records with its agent and criterion
as ``"_other"`` (``label="series"`` in the overflow counter), and the series stay bounded.

Versions: the score, evaluation, criterion and tool-call instruments carry ``version``, the
version of what was evaluated (the resource's ``service.version``, or the ``capture.version``
attribute): the drop alerts name the version a drop started with. A process usually runs one;
a gateway sees many over time, so the :data:`MAX_VERSIONS` most recently seen are kept per
processor and the least recently seen gives way to a new one (a version seen again after that
is new again; each such change counted, ``label="version"``): a new deploy is never folded away.

Exemplars: the scores, pass verdicts and criterion verdicts of an evaluation are recorded in the
context of the evaluated span, so the SDK's exemplar filter (trace-based, the default) keeps the
trace id of the run behind a sample: a low-score bucket or a failure counter links to the traces
that put it there (OTLP to a Collector whose Prometheus exporter writes OpenMetrics, Prometheus
with exemplar storage on; the Python Prometheus exporter writes no exemplars).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.metrics import CallbackOptions, Meter, MeterProvider, Observation, get_meter
from opentelemetry.trace import NonRecordingSpan, SpanContext

from otel_scorers import names as n
from otel_scorers.emit.observed import by_reason, gauge, observe, tally, true_rates
from otel_scorers.scorers.analysis import rendering
from otel_scorers.scorers.result import ScoreResult
from otel_scorers.scorers.steps import Step

__all__ = ["ScorerMetrics"]

OTHER = "_other"
#: The most attribute sets one instrument records before folding agent and criterion.
MAX_SERIES = 2_000
#: Distinct evaluator fingerprints in metric labels (a rubric per span makes one per rubric);
#: more count as ``_other``.
MAX_FINGERPRINTS = 50
#: Distinct versions in metric labels, the most recently seen (see the module docstring).
MAX_VERSIONS = 20
#: The labels that come from the application and are folded past :data:`MAX_SERIES`.
_FOLDED = (n.M_AGENT, n.M_CRITERION, n.M_TOOL, n.M_JUDGE_FINGERPRINT, n.M_VERSION)


class ScorerMetrics:
    """All instruments of the library, created once per processor."""

    def __init__(self, meter_provider: MeterProvider | None = None, *,
                 decisions: Callable[[CallbackOptions], Iterable[Observation]] | None = None,
                 queue_depth: Callable[[], int] | None = None,
                 held_spans: Callable[[], int] | None = None,
                 buffer_dropped: Callable[[], Mapping[str, int]] | None = None,
                 sessions: tuple[Callable[[], int], Callable[[], int]] | None = None,
                 rates: Callable[[], Iterable[tuple[str, str, str, float, float]]] | None = None,
                 ratios: Callable[[], Iterable[tuple[str, float]]] | None = None,
                 max_criteria_series: int = 100, max_agents: int = 100,
                 content_free: bool = False) -> None:
        meter: Meter = get_meter(n.SCOPE_NAME, meter_provider=meter_provider)
        self.score = meter.create_histogram(
            n.METRIC_SCORE, unit="1", description="Evaluation scores divided by their scale (0..1)",
            explicit_bucket_boundaries_advisory=n.SCORE_BUCKETS)
        self.evaluations = meter.create_counter(
            n.METRIC_EVALUATIONS, unit="{evaluation}",
            description="Completed evaluations by scorer, label and pass verdict")
        self.verdicts = meter.create_counter(
            n.METRIC_CRITERION_VERDICTS, unit="{verdict}",
            description="Rubric criterion verdicts by criterion id and outcome")
        self.dimensions = meter.create_histogram(
            n.METRIC_DIMENSION_SCORE, unit="1",
            description="Prompt-alignment dimension scores (0..1)",
            explicit_bucket_boundaries_advisory=n.SCORE_BUCKETS)
        if decisions is not None:
            observe(meter, self, n.METRIC_DECISIONS, "counter", "{decision}",
                    "Pipeline decisions per selected run and scorer", decisions)
        self.judge_duration = meter.create_histogram(
            n.METRIC_JUDGE_DURATION, unit="s", description="Judge latency per evaluation",
            explicit_bucket_boundaries_advisory=n.JUDGE_DURATION_BUCKETS)
        # counters without exemplars, on every evaluation's path: tallies (emit/observed.py)
        self.judge_tokens = tally(meter, n.METRIC_JUDGE_TOKENS, "{token}",
                                  "Tokens spent by the judge")
        self.judge_cost = tally(meter, n.METRIC_JUDGE_COST, "{USD}",
                                "Judge cost in US dollars, from litellm's price table")
        self.flex_refusals = tally(
            meter, n.METRIC_JUDGE_FLEX_REFUSALS, "{call}",
            "Flex-tier judge calls refused for capacity, by the tier that answered")
        self.unscored_exports = meter.create_counter(
            n.METRIC_UNSCORED_EXPORTS, unit="{span}",
            description="Held spans exported without their scores, by reason")
        if buffer_dropped is not None:
            observe(meter, self, n.METRIC_BUFFER_DROPPED, "counter", "{span}",
                    "Content spans dropped from the trace-assembly buffer, by reason",
                    by_reason(buffer_dropped))
        self.tool_calls = tally(meter, n.METRIC_TOOL_CALLS, "{call}",
                                "Tool calls in the evaluated runs, by agent, tool and outcome")
        self.sink_results = meter.create_counter(
            n.METRIC_SINK_RESULTS, unit="{result}",
            description="Results written to, retried at or dropped before a result sink")
        self.session_score = meter.create_histogram(
            n.METRIC_SESSION_SCORE, unit="1",
            description="Session (whole conversation) scores divided by their scale (0..1)",
            explicit_bucket_boundaries_advisory=n.SCORE_BUCKETS)
        self.session_evaluations = meter.create_counter(
            n.METRIC_SESSION_EVALUATIONS, unit="{evaluation}",
            description="Completed session evaluations by scorer, label and pass verdict")
        self.session_turns = meter.create_histogram(
            n.METRIC_SESSION_TURNS, unit="{turn}", description="Turns per session evaluation",
            explicit_bucket_boundaries_advisory=n.SESSION_TURN_BUCKETS)
        self.turns_dropped = meter.create_counter(
            n.METRIC_SESSION_TURNS_DROPPED, unit="{turn}",
            description="Turns left out of sessions by the memory bounds, by reason")
        self.sessions_evicted = meter.create_counter(
            n.METRIC_SESSIONS_EVICTED, unit="{session}",
            description="Sessions that made room for others (judged early, or forgotten)")
        if sessions is not None:
            open_count, held = sessions
            observe(meter, self, n.METRIC_SESSIONS_OPEN, "gauge", "{session}",
                    "Sessions with turns not judged yet", gauge(open_count))
            observe(meter, self, n.METRIC_SESSIONS_HELD, "gauge", "{session}",
                    "Sessions held in memory (open, and judged ones kept for a resume)",
                    gauge(held))
        self.canary_verdicts = meter.create_counter(
            n.METRIC_CANARY_VERDICTS, unit="{verdict}",
            description="Judge canaries: labelled cases judged by the live judge, by the "
                        "label (expected) and the verdict (judged: pass, fail or error)")
        if rates is not None:
            # a judge's known true rates (scorer, judge model, source, TPR, TNR): levels, not
            # counts (two processors with the same scorer and judge report one value)
            observe(meter, self, n.METRIC_JUDGE_TPR, "level", "",
                    "The judge's true positive rate on labelled cases (saved by calibrate "
                    "--save, or measured by the canaries)", true_rates(rates, 3))
            observe(meter, self, n.METRIC_JUDGE_TNR, "level", "",
                    "The judge's true negative rate on labelled cases", true_rates(rates, 4))
        if ratios is not None:  # each paced scorer's effective sampling ratio, now
            observe(meter, self, n.METRIC_EFFECTIVE_RATIO, "level", "",
                    "The share of runs a scorer with a paced budget judges now (its ratio "
                    "times the budget's pace)", lambda _options: [
                        Observation(ratio, {n.M_SCORER: name}) for name, ratio in ratios()])
        self.overflow = meter.create_counter(
            n.METRIC_OVERFLOW, unit="{value}",
            description="Metric attribute values folded into _other (cardinality caps)")
        self._content_free = content_free
        self._max_criteria = max_criteria_series
        self._max_agents = max_agents
        self._criteria: dict[str, set[str]] = {}
        self._agents: set[str] = set()
        self._tools: set[str] = set()
        self._fingerprints: set[str] = set()
        self._versions: dict[str, None] = {}  # insertion order: least recently seen first
        self._series: dict[str, set[tuple[tuple[str, Any], ...]]] = {}
        self._lock = threading.Lock()
        if queue_depth is not None:
            observe(meter, self, n.METRIC_QUEUE_DEPTH, "gauge", "{run}",
                    "Runs waiting for evaluation", gauge(queue_depth))
        if held_spans is not None:
            observe(meter, self, n.METRIC_HELD_SPANS, "gauge", "{span}",
                    "Spans held for enriched export", gauge(held_spans))

    def reset_after_fork(self) -> None:
        self._lock = threading.Lock()

    def canary(self, scorer: str, model: str, expected: str, judged: str) -> None:
        """One canary verdict (never a score of the application's)."""
        self.canary_verdicts.add(1, {n.M_SCORER: scorer, n.M_JUDGE_MODEL: model,
                                     n.M_EXPECTED: expected, n.M_JUDGED: judged})

    def unscored(self, reason: str, count: int) -> None:
        self.unscored_exports.add(count, {n.M_REASON: reason})

    def sink(self, sink: str, outcome: str, reason: str | None, count: int) -> None:
        """Results ``written``, ``retried`` or ``dropped`` (with the reason) at a sink."""
        self.sink_results.add(count, {n.M_SINK: sink, n.M_OUTCOME: outcome,
                                      n.M_REASON: reason or "none"})

    def steps(self, steps: Sequence[Step], agent: str | None,
              version: str | None = None) -> None:
        """Record the tool calls of an evaluated run (once per run, whatever its scorers):
        ``outcome`` ``ok`` or ``error``; tool names past ``max_criteria_series`` fold."""
        agent_label = self._capped(self._agents, agent or "unknown", self._max_agents, "agent")
        version_label = self._version(version)
        for step in steps:
            if step.kind != "tool":
                continue
            tool = self._capped(self._tools, step.name, self._max_criteria, "tool")
            self.tool_calls.add(1, self._bounded(n.METRIC_TOOL_CALLS, {
                n.M_AGENT: agent_label, n.M_TOOL: tool,
                n.M_OUTCOME: "error" if step.failed else "ok", n.M_VERSION: version_label}))

    def dropped_turns(self, reason: str, count: int) -> None:
        self.turns_dropped.add(count, {n.M_REASON: reason})

    def evicted(self, judged: bool) -> None:
        self.sessions_evicted.add(1, {n.M_JUDGED: str(judged).lower()})

    def result(self, result: ScoreResult, agent: str | None, *, turns: int | None = None,
               evaluated: SpanContext | None = None, version: str | None = None) -> None:
        """Record a completed evaluation (scored, cached or failed); ``turns``: a session
        evaluation of that many turns (its score and verdict go to the session instruments);
        ``evaluated``: the evaluated span, the context its samples are recorded in (their
        exemplars' trace id); ``version``: the version of what was evaluated."""
        context: Context | None = None if evaluated is None else trace.set_span_in_context(
            NonRecordingSpan(evaluated), Context())
        base: dict[str, Any] = {n.M_SCORER: result.scorer,
                                n.M_AGENT: self._capped(self._agents, agent or "unknown",
                                                        self._max_agents, "agent")}
        evaluator = result.evaluator
        model = (result.judge.model if result.judge is not None else
                 evaluator.judge_model or "none" if evaluator is not None else "none")
        if result.judge is not None and not result.cached:
            usage = result.judge
            outcome = "error" if result.error is not None else "ok"
            judge_attrs = {**base, n.M_JUDGE_MODEL: model, n.M_SERVICE_TIER: usage.service_tier}
            if usage.flex_refusals:  # answered at the standard tier, at flex after waiting, or not
                self.flex_refusals.add(usage.flex_refusals, self._bounded(
                    n.METRIC_JUDGE_FLEX_REFUSALS, {**base, n.M_JUDGE_MODEL: model, n.M_ANSWERED:
                                                   "error" if result.error is not None
                                                   else usage.service_tier}))
            self.judge_duration.record(usage.latency_s, self._bounded(
                n.METRIC_JUDGE_DURATION, {**judge_attrs, n.M_OUTCOME: outcome}))
            # input read from the provider's prompt cache is counted apart (its own price)
            if usage.prompt_tokens - usage.cached_tokens:
                self.judge_tokens.add(usage.prompt_tokens - usage.cached_tokens, self._bounded(
                    n.METRIC_JUDGE_TOKENS, {**judge_attrs, n.M_TOKEN_TYPE: "input"}))
            if usage.cached_tokens:
                self.judge_tokens.add(usage.cached_tokens, self._bounded(
                    n.METRIC_JUDGE_TOKENS, {**judge_attrs, n.M_TOKEN_TYPE: "cached_input"}))
            if usage.completion_tokens:
                self.judge_tokens.add(usage.completion_tokens, self._bounded(
                    n.METRIC_JUDGE_TOKENS, {**judge_attrs, n.M_TOKEN_TYPE: "output"}))
            if usage.cost_usd:
                self.judge_cost.add(usage.cost_usd, self._bounded(n.METRIC_JUDGE_COST, judge_attrs))
        if result.score is None:
            return
        # the judge model and the evaluator's fingerprint on every score: two judges (or two
        # rubrics) are two series, never averaged into one
        version_label = self._version(version)
        labelled = {**base, n.M_LABEL: result.label or "none", n.M_JUDGE_MODEL: model,
                    n.M_JUDGE_FINGERPRINT: self._capped(
                        self._fingerprints, evaluator.fingerprint if evaluator else "none",
                        MAX_FINGERPRINTS, "judge_fingerprint"), n.M_VERSION: version_label}
        passed = "none" if result.passed is None else str(result.passed).lower()
        if turns is None:
            self.score.record(result.score / result.scale,
                              self._bounded(n.METRIC_SCORE, labelled), context=context)
            truncated = bool(result.judge is not None and result.judge.truncated)
            self.evaluations.add(1, self._bounded(n.METRIC_EVALUATIONS, {
                **labelled, n.M_PASSED: passed, n.M_TRUNCATED: str(truncated).lower()}),
                context=context)
        else:
            self.session_score.record(result.score / result.scale,
                                      self._bounded(n.METRIC_SESSION_SCORE, labelled),
                                      context=context)
            self.session_evaluations.add(1, self._bounded(n.METRIC_SESSION_EVALUATIONS, {
                **labelled, n.M_PASSED: passed}), context=context)
            self.session_turns.record(turns, self._bounded(n.METRIC_SESSION_TURNS, base))
        analysis = rendering(result.analysis)
        for ident, satisfied, required in analysis.verdict_rows(self._content_free):
            # the judge model too: a judge that drifted explains its criteria's failures
            # (Alertmanager's inhibition matches on it)
            self.verdicts.add(1, self._bounded(n.METRIC_CRITERION_VERDICTS, {
                **base, n.M_CRITERION: self._criterion(result.scorer, ident),
                n.M_SATISFIED: str(satisfied).lower(), n.M_REQUIRED: str(required).lower(),
                n.M_JUDGE_MODEL: model, n.M_VERSION: version_label}), context=context)
        for side, dimension, score in analysis.dimension_rows(result.mode):
            self.dimensions.record(score, self._bounded(n.METRIC_DIMENSION_SCORE, {
                **base, n.M_SIDE: side, n.M_DIMENSION: dimension}))

    def _bounded(self, metric: str, attrs: dict[str, Any]) -> dict[str, Any]:
        """``attrs``, or with agent and criterion folded to ``_other`` once ``metric`` holds
        :data:`MAX_SERIES` attribute sets (counted, ``label="series"``). A set is known by its
        items in order, unsorted: each metric's attributes are built in one order, and a set
        seen in two orders would only count twice toward the cap (folded early, never late)."""
        key = tuple(attrs.items())
        with self._lock:
            seen = self._series.setdefault(metric, set())
            if key in seen:
                return attrs
            if len(seen) < MAX_SERIES:
                seen.add(key)
                return attrs
        self.overflow.add(1, {n.M_LABEL: "series"})
        return {key: (OTHER if key in _FOLDED else value) for key, value in attrs.items()}

    def _version(self, version: str | None) -> str:
        """``version``'s label (``none`` without one), keeping the :data:`MAX_VERSIONS` most
        recently seen: a new one past them takes the place of the least recently seen."""
        if version is None:
            return "none"
        with self._lock:
            versions = self._versions
            if version in versions:
                if next(reversed(versions)) != version:  # the newest stays last
                    del versions[version]
                    versions[version] = None
                return version
            versions[version] = None
            if len(versions) <= MAX_VERSIONS:
                return version
            del versions[next(iter(versions))]
        self.overflow.add(1, {n.M_LABEL: "version"})
        return version

    def _criterion(self, scorer: str, criterion: str) -> str:
        with self._lock:
            seen = self._criteria.setdefault(scorer, set())
        return self._capped(seen, criterion, self._max_criteria, "criterion")

    def _capped(self, seen: set[str], value: str, limit: int, label: str) -> str:
        """``value``, or ``_other`` once ``limit`` distinct values were seen (counted)."""
        with self._lock:
            if value in seen:
                return value
            if len(seen) < limit:
                seen.add(value)
                return value
        self.overflow.add(1, {n.M_LABEL: label})
        return OTHER
