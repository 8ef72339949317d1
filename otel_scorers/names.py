"""Every attribute, event and metric name this library emits, in one place.

The README tables, the Grafana dashboards and the Prometheus rules are tested against this
module, so a rename here cannot silently break them.
"""

from __future__ import annotations

from typing import Final

# -- OpenTelemetry GenAI semantic conventions (evaluation, v1.38+) -----------------------------
GEN_AI_EVALUATION_NAME: Final = "gen_ai.evaluation.name"
GEN_AI_EVALUATION_SCORE_VALUE: Final = "gen_ai.evaluation.score.value"
GEN_AI_EVALUATION_SCORE_LABEL: Final = "gen_ai.evaluation.score.label"
GEN_AI_EVALUATION_EXPLANATION: Final = "gen_ai.evaluation.explanation"
GEN_AI_EVALUATION_RESULT_EVENT: Final = "gen_ai.evaluation.result"
# Evaluator identity as the OTel GenAI proposal names it (semantic-conventions-genai PR 359,
# development): the scorer's name and whether a judge (llm) or code decided.
GEN_AI_EVALUATION_EVALUATOR_ID: Final = "gen_ai.evaluation.evaluator.id"
GEN_AI_EVALUATION_EVALUATOR_TYPE: Final = "gen_ai.evaluation.evaluator.type"
ERROR_TYPE: Final = "error.type"
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_AGENT_NAME: Final = "gen_ai.agent.name"
SERVICE_VERSION: Final = "service.version"
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_TOKEN_TYPE: Final = "gen_ai.token.type"
GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"

#: Operation name of evaluation spans (``gen_ai.operation.name``).
EVALUATION_OPERATION: Final = "evaluation"
#: Evaluation spans are named ``"gen_ai.evaluation <scorer>"``.
EVALUATION_SPAN_PREFIX: Final = "gen_ai.evaluation"
#: The instrumentation scope of everything this library emits; the processor never scores it.
SCOPE_NAME: Final = "otel_scorers"
#: A selected run a scorer did not judge (its queue was full, its judge budget spent) gets a
#: child span ``"otel_scorers.unjudged <scorer>"``, at most one per scorer and decision every
#: :data:`UNJUDGED_MARK_INTERVAL_S`: examples of those runs, for the alerts about them to link to.
UNJUDGED_SPAN_PREFIX: Final = "otel_scorers.unjudged"
UNJUDGED_MARK_INTERVAL_S: Final = 10.0
#: Each judge canary verdict is a span of a trace of its own, ``"otel_scorers.canary <scorer>"``.
CANARY_SPAN_PREFIX: Final = "otel_scorers.canary"

# -- This library's attributes --------------------------------------------------------------------
# On an evaluation span they appear as written (``otel_scorers.score``); on an enriched span
# (the evaluated span itself, exported with its scores) they carry the scorer name after the
# prefix (``otel_scorers.rubric.score``) so several scorers can coexist.
PREFIX: Final = "otel_scorers."
ATTR_SCORE: Final = "score"                      # float, 0..scale
ATTR_SCORE_NORMALIZED: Final = "score.normalized"  # float, score / scale
ATTR_LABEL: Final = "label"                      # pass|fail|skipped, or excellent..very_poor
ATTR_PASS: Final = "pass"                        # bool, when the scorer has a pass verdict
ATTR_SCALE: Final = "scale"
ATTR_SCORE_MIN: Final = "score.min"
ATTR_EVALUATOR_FINGERPRINT: Final = "evaluator.fingerprint"
ATTR_MODE: Final = "mode"                        # user|system|both (prompt alignment)
ATTR_SKIPPED: Final = "skipped"                  # why a scorer did nothing (no_rubric)
ATTR_REASON: Final = "reason"                    # the full reason text (content)
ATTR_ERROR_TYPE: Final = "error.type"
ATTR_ERROR_MESSAGE: Final = "error.message"
ATTR_CACHED: Final = "cached"
ATTR_SAMPLE_RATE: Final = "sample_rate"          # the effective ratio a paced run was sampled at
# On unjudged markers and canary spans (never evaluation spans: no gen_ai.evaluation.name)
ATTR_SCORER: Final = "scorer"                    # the scorer a marker or canary is about
ATTR_DECISION: Final = "decision"                # dropped|budget_exhausted (unjudged marker)
ATTR_DECISION_REASON: Final = "decision.reason"  # queue_full, ... (the decision's reason)
ATTR_CANARY_CASE: Final = "canary.case"          # the labelled case's id
ATTR_CANARY_EXPECTED: Final = "canary.expected"  # pass|fail: its label
ATTR_CANARY_JUDGED: Final = "canary.judged"      # pass|fail|error: the judge's verdict
ATTR_CANARY_AGREES: Final = "canary.agrees"      # bool: the verdict matches the label
# Rubric, per criterion: otel_scorers.criterion.<id>.{description,required,satisfied,reasoning}
ATTR_CRITERION: Final = "criterion"
ATTR_CRITERIA_IDS: Final = "criteria.ids"
ATTR_CRITERIA_UNMET: Final = "criteria.unmet"    # ids of gating criteria not satisfied
ATTR_CRITERIA_OMITTED: Final = "criteria.omitted"  # criteria whose details did not fit the span
ATTR_REQUIRED_UNMET: Final = "criteria.required_unmet"
ATTR_OVERALL_ASSESSMENT: Final = "overall_assessment"
# Prompt alignment, per side (user|system) and dimension:
# otel_scorers.dimension.<side>.<intent|requirements|completeness|appropriateness>.{score,reasoning}
ATTR_DIMENSION: Final = "dimension"
ATTR_PRIMARY_INTENT: Final = "primary_intent"
ATTR_REQUIREMENTS_UNFULFILLED: Final = "requirements.unfulfilled"
ATTR_MISSING_ELEMENTS: Final = "missing_elements"
# Judge usage
ATTR_JUDGE_MODEL: Final = "judge.model"
ATTR_JUDGE_CALLS: Final = "judge.calls"
ATTR_JUDGE_RETRIES: Final = "judge.retries"      # transient failures retried
ATTR_JUDGE_REASKS: Final = "judge.reasks"        # corrective re-asks after a broken answer
ATTR_JUDGE_INPUT_TOKENS: Final = "judge.input_tokens"
ATTR_JUDGE_OUTPUT_TOKENS: Final = "judge.output_tokens"
ATTR_JUDGE_CACHED_INPUT_TOKENS: Final = "judge.cached_input_tokens"  # of the input tokens
ATTR_JUDGE_COST_USD: Final = "judge.cost_usd"
ATTR_JUDGE_SERVICE_TIER: Final = "judge.service_tier"  # the tier that answered, when not standard
ATTR_JUDGE_FLEX_REFUSALS: Final = "judge.flex_refusals"  # flex calls refused for capacity
ATTR_JUDGE_LATENCY_S: Final = "judge.latency_s"
ATTR_INPUT_TRUNCATED: Final = "input.truncated"  # fields shown to the judge cut (string[])
ATTR_JUDGE_TOKENS_ESTIMATED: Final = "judge.tokens_estimated"  # no usage reported: estimated
# What was evaluated
ATTR_AGENT_NAME: Final = "agent.name"
ATTR_EVALUATED_SPAN_ID: Final = "evaluated.span_id"
ATTR_EVALUATED_SPAN_NAME: Final = "evaluated.span_name"
ATTR_CAPTURE_SOURCE: Final = "capture.source"    # which convention the run was read from
#: the version of what was evaluated (resource service.version, or the capture.version key)
ATTR_VERSION: Final = "version"
# A session evaluation (the whole conversation, reported on its last turn's span)
ATTR_SESSION_ID: Final = "session.id"            # the session key (also gen_ai.conversation.id)
ATTR_SESSION_SCOPE: Final = "session.scope"      # what scopes the key (service.name)
ATTR_SESSION_FIRST_TURN: Final = "session.first_turn"  # the first turn judged (1)
ATTR_SESSION_LAST_TURN: Final = "session.last_turn"    # the last turn judged
ATTR_SESSION_TURNS: Final = "session.turns"      # turns the judge saw
ATTR_SESSION_NEW_TURNS: Final = "session.new_turns"  # turns since the session was last judged
ATTR_SESSION_DROPPED_TURNS: Final = "session.dropped_turns"  # left out by the memory bounds
ATTR_SESSION_UNREAD_TURNS: Final = "session.unread_turns"    # interactions with no content
ATTR_SESSION_TRIGGER: Final = "session.trigger"  # idle|requested|exit|shutdown|evicted

#: Attribute an application sets on an agent span to give a rubric for that run.
RUBRIC_ATTRIBUTE: Final = "otel_scorers.rubric"

DIMENSIONS: Final = ("intent", "requirements", "completeness", "appropriateness")

# -- Metrics --------------------------------------------------------------------------------------
# Instrument names, with the Prometheus names they become (OTel -> Prometheus translation:
# dots to underscores, unit suffix, _total for counters).
METRIC_SCORE: Final = "otel_scorers.evaluation.score"            # histogram of score / scale
METRIC_EVALUATIONS: Final = "otel_scorers.evaluations"           # counter
METRIC_CRITERION_VERDICTS: Final = "otel_scorers.criterion.verdicts"  # counter
METRIC_DIMENSION_SCORE: Final = "otel_scorers.dimension.score"   # histogram 0..1
METRIC_DECISIONS: Final = "otel_scorers.decisions"               # counter
METRIC_JUDGE_DURATION: Final = "otel_scorers.judge.duration"     # histogram, seconds
METRIC_JUDGE_TOKENS: Final = "otel_scorers.judge.tokens"         # counter
METRIC_JUDGE_COST: Final = "otel_scorers.judge.cost"             # counter, USD
METRIC_JUDGE_FLEX_REFUSALS: Final = "otel_scorers.judge.flex_refusals"  # counter, by answered
METRIC_JUDGE_TPR: Final = "otel_scorers.judge.true_positive_rate"  # gauge, by scorer, model
METRIC_JUDGE_TNR: Final = "otel_scorers.judge.true_negative_rate"  # gauge, by scorer, model
METRIC_CANARY_VERDICTS: Final = "otel_scorers.canary.verdicts"  # counter, expected vs judged
METRIC_EFFECTIVE_RATIO: Final = "otel_scorers.sampling.effective_ratio"  # gauge, paced budgets
METRIC_QUEUE_DEPTH: Final = "otel_scorers.queue.depth"           # gauge
METRIC_HELD_SPANS: Final = "otel_scorers.held.spans"             # gauge (enriched export)
METRIC_UNSCORED_EXPORTS: Final = "otel_scorers.enriched.unscored"  # counter, by reason
METRIC_BUFFER_DROPPED: Final = "otel_scorers.trace_buffer.dropped"  # counter, by reason
METRIC_OVERFLOW: Final = "otel_scorers.metric.overflow"  # counter, values folded into _other
METRIC_TOOL_CALLS: Final = "otel_scorers.agent.tool_calls"  # counter, by tool and outcome
METRIC_SINK_RESULTS: Final = "otel_scorers.sink.results"  # counter, by sink, outcome, reason
# Sessions: scores and pass verdicts of whole conversations, and what the session store holds
METRIC_SESSION_SCORE: Final = "otel_scorers.session.score"  # histogram of score / scale
METRIC_SESSION_EVALUATIONS: Final = "otel_scorers.session.evaluations"  # counter
METRIC_SESSION_TURNS: Final = "otel_scorers.session.turns"  # histogram, turns per evaluation
METRIC_SESSIONS_OPEN: Final = "otel_scorers.sessions.open"  # gauge, sessions not judged yet
METRIC_SESSIONS_HELD: Final = "otel_scorers.sessions.held"  # gauge, sessions in memory
METRIC_SESSION_TURNS_DROPPED: Final = "otel_scorers.session.turns_dropped"  # counter, reason
METRIC_SESSIONS_EVICTED: Final = "otel_scorers.sessions.evicted"  # counter, by judged
# The OTLP gateway (``otel-scorers serve``).
METRIC_GATEWAY_REQUESTS: Final = "otel_scorers.gateway.requests"  # counter, by outcome
METRIC_GATEWAY_SPANS: Final = "otel_scorers.gateway.spans"        # counter, spans forwarded
METRIC_GATEWAY_FORWARD_DURATION: Final = "otel_scorers.gateway.forward.duration"  # histogram, s
# `otel-scorers calibrate --emit`: one value per run (gauges)
METRIC_CALIBRATION_AGREEMENT: Final = "otel_scorers.calibration.verdict_agreement"
METRIC_CALIBRATION_KAPPA: Final = "otel_scorers.calibration.kappa"
METRIC_CALIBRATION_MAE: Final = "otel_scorers.calibration.alignment_mae"
METRIC_CALIBRATION_BAND_HITS: Final = "otel_scorers.calibration.band_hit_rate"
METRIC_CALIBRATION_ERRORS: Final = "otel_scorers.calibration.errors"

# Metric attribute keys (all low-cardinality: never text or ids of runs).
M_SCORER: Final = "scorer"
M_LABEL: Final = "label"
M_PASSED: Final = "passed"
M_AGENT: Final = "agent"
M_JUDGE_MODEL: Final = "judge_model"
M_JUDGE_FINGERPRINT: Final = "judge_fingerprint"
M_CRITERION: Final = "criterion"
M_TOOL: Final = "tool"
M_SINK: Final = "sink"
M_SATISFIED: Final = "satisfied"
M_REQUIRED: Final = "required"
M_DIMENSION: Final = "dimension"
M_SIDE: Final = "side"
M_DECISION: Final = "decision"
M_REASON: Final = "reason"
M_ERROR_TYPE: Final = "error_type"
M_OUTCOME: Final = "outcome"
M_SIGNAL: Final = "signal"
M_TOKEN_TYPE: Final = "token_type"
M_SERVICE_TIER: Final = "service_tier"
M_ANSWERED: Final = "answered"
M_CASES: Final = "cases"
M_SOURCE: Final = "source"
M_EXPECTED: Final = "expected"
M_TRUNCATED: Final = "truncated"
M_JUDGED: Final = "judged"
M_VERSION: Final = "version"

SCORE_BUCKETS: Final = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0)
JUDGE_DURATION_BUCKETS: Final = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 40.0, 80.0)
SESSION_TURN_BUCKETS: Final = (1, 2, 3, 5, 10, 20, 50, 100)


class Decision:
    """Values of the ``decision`` metric attribute.

    Every selected (span, scorer) pair ends in exactly one terminal decision, so
    ``selected == sampled_out + rate_limited + filtered + dropped + budget_exhausted + cached
    + scored + error``.
    """

    SELECTED: Final = "selected"
    SAMPLED_OUT: Final = "sampled_out"
    RATE_LIMITED: Final = "rate_limited"
    FILTERED: Final = "filtered"
    DROPPED: Final = "dropped"
    BUDGET_EXHAUSTED: Final = "budget_exhausted"
    CACHED: Final = "cached"
    SCORED: Final = "scored"
    ERROR: Final = "error"

    TERMINAL: Final = (SAMPLED_OUT, RATE_LIMITED, FILTERED, DROPPED, BUDGET_EXHAUSTED, CACHED,
                       SCORED, ERROR)


class Reason:
    """Values of the ``reason`` attribute of ``filtered`` and ``dropped`` decisions."""

    NO_CONTENT: Final = "no_content"        # no usable input/output on the span or its trace
    MALFORMED: Final = "malformed"          # content attributes that could not be parsed
    UNREADABLE: Final = "unreadable"        # content in a shape that is not text (a framework
    #                                         state dump, a Python repr): never sent as text
    TOO_LARGE: Final = "too_large"          # content over the capture size limit
    INVALID_INPUT: Final = "invalid_input"  # the scorer rejected the run (e.g. no user prompt)
    NO_RUBRIC: Final = "no_rubric"          # a rubric scorer found no rubric for the run
    NO_STEPS: Final = "no_steps"            # an agent scorer found no steps (tool/LLM spans)
    NO_TOOLS: Final = "no_tools"            # tool use: no tool called, none known to exist
    NO_CONTEXT: Final = "no_context"        # faithfulness: no tool result, document or context
    NO_CLAIMS: Final = "no_claims"          # faithfulness: the answer makes no factual claim
    INPUT_TOO_LARGE: Final = "input_too_large"  # the response or request is over 10x what
    #                                             the judge is shown of a field: not judged
    CONTEXT_TRUNCATED: Final = "context_truncated"  # faithfulness: every claim undecidable on
    #                                                 the part of the context shown
    STEPS_TRUNCATED: Final = "steps_truncated"  # a check needs steps the run left out past
    #                                             its bound, and none kept fails it
    NESTED_AGENT: Final = "nested_agent"    # its LLM calls belong to nested agent spans
    NO_SESSION: Final = "no_session"        # a session scorer: the interaction has no session
    #                                         key (sessions.key_attributes)
    QUEUE_FULL: Final = "queue_full"
    SPOOL_FULL: Final = "spool_full"        # the batch lane's spool is at batch.max_bytes
    SHUTDOWN: Final = "shutdown"            # the processor stopped before evaluating
    EXIT: Final = "exit"                    # cut off at interpreter exit (exit_timeout_s)
    INTERNAL: Final = "internal_error"
    # enriched export (``otel_scorers.enriched.unscored``)
    HOLD_OVERFLOW: Final = "hold_overflow"  # too many spans held at once
    HOLD_TIMEOUT: Final = "hold_timeout"    # the scores came too late
    # trace buffer (``otel_scorers.trace_buffer.dropped``)
    TRACE_LIMIT: Final = "trace_limit"      # too many traces buffered: oldest evicted
    SPAN_LIMIT: Final = "span_limit"        # too many content spans in one trace
    BYTE_LIMIT: Final = "byte_limit"        # buffer byte budget spent
    EXPIRED: Final = "expired"              # older than the buffer's max age
    # session store (``otel_scorers.session.turns_dropped``)
    TURN_LIMIT: Final = "turn_limit"        # more turns in a session than sessions.max_turns
    SESSION_BYTE_LIMIT: Final = "byte_limit"  # a session's text past sessions.max_chars
    SESSION_LIMIT: Final = "session_limit"  # a session forgotten with turns not judged (a
    #                                         flood of new sessions past sessions.max_sessions)
