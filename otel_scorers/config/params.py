"""Every setting, declared once: where it lives, its environment variable, what it means.

The settings models (:mod:`otel_scorers.config.settings`) give each setting its type, default
and bounds; this table (logfire's ``ConfigParam`` table is the model) gives the rest. Everything
else is read from the two, so no entry point can disagree with another:

- the environment reader (:mod:`otel_scorers.config.environment`): one variable per row with
  an ``env``, parsed by the field's type (``parse`` for the few that are not plain values);
- the keyword arguments of :class:`~otel_scorers.pipeline.ScoringSpanProcessor` (and
  ``otel_scorers.install``): the rows marked ``argument``, typed by :class:`PipelineSettings`
  (a test checks the two against each other and the models);
- the configuration reference (docs/configuration.md): :func:`reference_table`, checked by a
  test to be the table in the page.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel
from typing_extensions import TypedDict

from otel_scorers import registry
from otel_scorers.config.fields import field_of, flatten
from otel_scorers.config.values import parse_bool, parse_list, parse_rubric_value

__all__ = ["ARGUMENTS", "CORE_PARAMS", "Param", "PipelineSettings", "field_of", "params",
           "parser_for", "reference_table", "scorer_types_table"]


@dataclass(frozen=True)
class Param:
    """One setting. ``path`` is its place in the settings (``judge.timeout_s``; ``*`` for the
    every-scorer or every-agent forms), ``env`` its variable, ``doc`` its meaning in a line,
    ``argument`` whether it is a keyword argument of the processor, ``parse`` how the
    variable's text becomes a value when the field's type cannot say."""

    path: str
    env: str | None
    doc: str
    argument: bool = False
    parse: Callable[[str], Any] | None = None

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(self.path.split("."))


P = Param
#: The settings of the library itself; each scorer type's options and each backend's block
#: come from their registry rows (:func:`params`).
CORE_PARAMS: tuple[Param, ...] = (
    P("enabled", "OTEL_SCORERS_ENABLED", "zero-code switch: `opentelemetry-instrument` adds "
      "scoring only when true"),
    P("judge.model", "OTEL_SCORERS_JUDGE_MODEL", "judge model: a litellm model string "
      "(`openai/gpt-5-mini`, `anthropic/...`, `ollama/...`), or `local/smollm2`, the embedded "
      "model (the default when none is set)"),
    P("judge.api_base", "OTEL_SCORERS_JUDGE_API_BASE", "OpenAI-compatible endpoint"),
    P("judge.api_key", "OTEL_SCORERS_JUDGE_API_KEY", "judge key (else the provider's own "
      "variable); never printed"),
    P("judge.timeout_s", "OTEL_SCORERS_JUDGE_TIMEOUT", "seconds per judge call"),
    P("judge.max_tokens", "OTEL_SCORERS_JUDGE_MAX_TOKENS", "judge answer bound"),
    P("judge.temperature", None, "judge temperature"),
    P("judge.max_retries", None, "retries of a transient judge failure (timeout, connection, "
      "429, 5xx), with jittered backoff"),
    P("judge.structured_output", "OTEL_SCORERS_JUDGE_STRUCTURED_OUTPUT", "how JSON is "
      "requested: `auto` (a JSON schema where the model enforces one, else JSON mode), "
      "`json_schema`, `json_object`, `json_object_schema` (llama.cpp), `prompt`"),
    P("judge.transport", "OTEL_SCORERS_JUDGE_TRANSPORT", "`auto`: an `openai/<model>` judge "
      "with an `api_base` (and no extra parameters) is called over HTTP directly, with a "
      "shared connection pool, instead of through litellm (a fifth of the CPU per call; "
      "litellm never imported), `local/...` in process; `litellm`: always litellm"),
    P("judge.service_tier", "OTEL_SCORERS_JUDGE_SERVICE_TIER", "`flex`: ask the provider's "
      "flex tier (OpenAI's `service_tier: flex`: the same call at about half the price, slower, "
      "sometimes refused for capacity), priced at the price map's `*_flex` rates; `standard`: "
      "the usual tier. Providers without tiers ignore it"),
    P("judge.flex_fallback", "OTEL_SCORERS_JUDGE_FLEX_FALLBACK", "a flex call refused for "
      "capacity: `standard` asks again at once at the standard tier; `wait` retries at flex "
      "with the retry backoff within the judge's deadline (then a `rate_limited` error); "
      "counted either way (`otel_scorers.judge.flex_refusals`)"),
    P("judge.redact", "OTEL_SCORERS_REDACT", "built-in PII/secret redaction of everything "
      "sent to the judge"),
    P("scorers", "OTEL_SCORERS_SCORERS", "scorers when none are passed in code (comma list of "
      "types: see the scorer types below)", parse=parse_list),
    P("scorers.*.name", None, "the scorer's name (in attribute and metric names)"),
    P("scorers.*.scale", None, "the score's maximum"),
    P("scorers.*.sampling", None, "the scorer's own sampling (as `sampling`)"),
    P("scorers.*.lane", None, "`batch`: the scorer's judgements go through the provider's "
      "batch API at the batch price (OpenAI's files and batches endpoints; an `openai/<model>` "
      "judge), emitted late on the evaluated span's context (`batch` settings); `live`: now"),
    P("scorers.*.service_tier", None, "the scorer's own judge tier (as `judge.service_tier`): "
      "flex for the trend scorers, standard for the ones that alert"),
    P("rubrics", "OTEL_SCORERS_RUBRIC", "rubric per agent name (the variable sets "
      "`rubrics[\"*\"]`: every agent; a checklist, one criterion per line, or a JSON list "
      "of criteria)", parse=parse_rubric_value),
    P("sampling.ratio", "OTEL_SCORERS_SAMPLE_RATIO", "share of traces judged"),
    P("sampling.error_ratio", "OTEL_SCORERS_ERROR_SAMPLE_RATIO", "share of error spans "
      "judged"),
    P("sampling.rate_limit", "OTEL_SCORERS_RATE_LIMIT", "evaluations per second per scorer"),
    P("sampling.budget_tokens_per_hour", "OTEL_SCORERS_BUDGET_TOKENS_PER_HOUR", "judge tokens "
      "per hour per scorer"),
    P("sampling.budget_cost_per_hour", "OTEL_SCORERS_BUDGET_COST_PER_HOUR", "judge USD per "
      "hour per scorer"),
    P("sampling.budget_tokens_per_day", "OTEL_SCORERS_BUDGET_TOKENS_PER_DAY", "judge tokens "
      "per day per scorer: a ceiling over the last 24 hours, beside or instead of the hourly "
      "budget (paced over the day too; per process: a restart starts it anew)"),
    P("sampling.budget_cost_per_day", "OTEL_SCORERS_BUDGET_COST_PER_DAY", "judge USD per day "
      "per scorer (as `budget_tokens_per_day`)"),
    P("sampling.pace_budget", "OTEL_SCORERS_PACE_BUDGET", "with a token or cost budget, "
      "spread it over its hour: the sampling ratio adapts to the traffic so the budget lasts, "
      "bursts thinned evenly (`otel_scorers.sampling.effective_ratio`, `sample_rate` on each "
      "result); `false`: first come, first served until it is spent"),
    P("sampling.salt", "OTEL_SCORERS_SAMPLE_SALT", "sampling salt"),
    P("sampling.boosts", None, "higher ratios for chosen attribute values "
      "(`{attribute, value, ratio}`)"),
    P("selection.agent_conventions", None, "the agent-run and workflow conventions mark "
      "candidates"),
    P("selection.include_llm_spans", "OTEL_SCORERS_INCLUDE_LLM_SPANS", "also score LLM `chat` "
      "spans that are no part of an interaction"),
    P("selection.span_names", "OTEL_SCORERS_SPAN_NAMES", "span-name globs (comma list)"),
    P("selection.attributes", None, "attribute predicates (all must hold; a list means one "
      "of)"),
    P("selection.agents", "OTEL_SCORERS_AGENTS", "only the interactions of these agents "
      "(comma list; an interaction matches when its span or an agent span inside it has one "
      "of the names)"),
    P("selection.per_agent", "OTEL_SCORERS_PER_AGENT", "judge every agent span on its own, on "
      "the LLM calls it owns, instead of each interaction once (see docs/frameworks.md)"),
    P("capture.input", None, "your own attribute holding the question"),
    P("capture.output", None, "your own attribute holding the answer"),
    P("capture.system", None, "your own attribute holding the instructions"),
    P("capture.agent", None, "your own attribute holding the agent name"),
    P("capture.version", "OTEL_SCORERS_CAPTURE_VERSION", "the attribute holding the version "
      "of what was evaluated (an agent or prompt version; on the span, else its resource): "
      "the metrics' `version` label and the evaluation span's `otel_scorers.version`, which "
      "the drop alerts name; unset: the resource's `service.version`"),
    P("sessions.key_attributes", "OTEL_SCORERS_SESSION_KEY", "attributes holding the session "
      "key of an interaction, first found wins (comma list)"),
    P("sessions.scope_attributes", "OTEL_SCORERS_SESSION_SCOPE", "resource attributes that "
      "scope a session key (comma list): two services whose conversation ids collide are two "
      "sessions; empty: a key is global"),
    P("sessions.idle_s", "OTEL_SCORERS_SESSION_IDLE_S", "a session is judged once no turn has "
      "come for this long (and at exit, and on `score_sessions()`); a turn after that judges "
      "it again, whole"),
    P("sessions.keep_s", None, "a judged session is kept this long for a resume, then "
      "forgotten (a later turn starts it afresh)"),
    P("sessions.max_sessions", "OTEL_SCORERS_SESSION_MAX", "sessions held at once; the least "
      "recently active makes room (judged at once if it has turns not judged)"),
    P("sessions.max_turns", None, "turns kept per session; past it the oldest after the first "
      "are left out (counted)"),
    P("sessions.max_chars", None, "characters kept per session (questions, answers, steps); "
      "past it the oldest turns after the first are left out (counted)"),
    P("sessions.max_bytes", "OTEL_SCORERS_SESSION_MAX_BYTES", "bytes all sessions' turns may "
      "hold together; past it the least recently active session makes room (judged at once "
      "if it has turns not judged; counted)"),
    P("sessions.forward_endpoint", "OTEL_SCORERS_SESSION_FORWARD", "gateway fleets: send each "
      "turn as a log record keyed by its session to this OTLP/HTTP endpoint (a Collector "
      "routing logs by `otel_scorers.session.id` to the gateways) instead of keeping it here "
      "(docs/sessions.md)"),
    P("sessions.turn_secret", "OTEL_SCORERS_SESSION_TURN_SECRET", "a gateway fleet's shared "
      "secret: turn records sent are signed with it, and records received must be (others are "
      "dropped, counted); never printed"),
    P("sessions.accept_turns", "OTEL_SCORERS_SESSION_ACCEPT_TURNS", "a gateway without a "
      "token or a turn secret takes turn records only when this is true (docs/sessions.md)"),
    P("batch.scorers", "OTEL_SCORERS_BATCH_SCORERS", "scorers (by name, comma-separated) "
      "judged through the provider's batch API at the batch price and emitted late, as "
      "`lane: batch` on the scorer (an `openai/<model>` judge)"),
    P("batch.directory", "OTEL_SCORERS_BATCH_DIR", "the batch lane's spool: deferred judge "
      "requests and submitted batches, one file each, re-read at start (keep it on a "
      "persistent, private disk; a server's workers share it: one at a time submits and "
      "emits for all); it must be owned by this user and writable by no one else (else "
      "refused at start)"),
    P("batch.max_bytes", "OTEL_SCORERS_BATCH_MAX_BYTES", "the most the spool holds; a "
      "judgement past it is dropped, reason `spool_full`"),
    P("batch.interval_s", "OTEL_SCORERS_BATCH_INTERVAL_S", "seconds between the lane's "
      "rounds: submit what waits, poll the open batches, emit what came back"),
    P("batch.max_lines", "OTEL_SCORERS_BATCH_MAX_LINES", "the most requests in one batch"),
    P("batch.max_attempts", "OTEL_SCORERS_BATCH_MAX_ATTEMPTS", "batches a request is sent in "
      "before a line that failed, expired or was lost is emitted as an error result "
      "(`batch_failed`, `batch_expired`, `batch_lost`)"),
    P("batch.completion_window", None, "the batch API's completion window"),
    P("batch.give_up_after_s", "OTEL_SCORERS_BATCH_GIVE_UP_AFTER_S", "a batch not finished "
      "this long after it was created is given up: cancelled at the provider, its requests "
      "sent again (docs/performance.md: the lane's promise)"),
    P("canary.enabled", "OTEL_SCORERS_CANARY", "judge canaries: labelled cases replayed "
      "through each LLM scorer's live judge on a schedule, their agreement, TPR and TNR "
      "exported (docs/calibration.md); on wherever a scorer has a judge"),
    P("canary.interval_s", "OTEL_SCORERS_CANARY_INTERVAL_S", "seconds between canary rounds "
      "(the first one interval after start)"),
    P("canary.cases_per_round", "OTEL_SCORERS_CANARY_CASES", "cases each scorer judges per "
      "round, passing and failing labels alternating"),
    P("canary.budget_share", "OTEL_SCORERS_CANARY_BUDGET_SHARE", "the share of a scorer's "
      "hourly judge budget canaries may spend (inside the budget and the rate limit)"),
    P("canary.cases", "OTEL_SCORERS_CANARY_FILE", "`bundled` (the golden set), `agents`, or "
      "your labelled JSONL file (the `calibrate --cases` format), or `phoenix` / `mlflow`: "
      "the labels your reviewers gave there, read again daily"),
    P("canary.window", None, "the last canary verdicts the live true rates are measured over"),
    P("sinks.queue_size", None, "results waiting per sink; past it they are dropped and "
      "counted (`queue_full`)"),
    P("sinks.queue_bytes", None, "the most bytes of results (their JSON size) waiting per "
      "sink; past it they are dropped and counted (`queue_full`)"),
    P("sinks.retry_s", None, "how long a failed write to a sink is retried, with backoff, "
      "before it is dropped and counted (`retries_exhausted`)"),
    P("evaluation_spans", "OTEL_SCORERS_EVALUATION_SPANS", "emit evaluation spans",
      argument=True),
    P("events", "OTEL_SCORERS_EVENTS", "emit `gen_ai.evaluation.result` log events",
      argument=True),
    P("reasons", "OTEL_SCORERS_REASONS", "judge text in telemetry: `full`, `truncate`, `none`",
      argument=True),
    P("max_reason_chars", "OTEL_SCORERS_MAX_REASON_CHARS", "kept per text when truncating",
      argument=True),
    P("queue_size", "OTEL_SCORERS_QUEUE_SIZE", "runs waiting for evaluation; the same bound "
      "again for ended spans not yet decided (the worker's intake)", argument=True),
    P("concurrency", "OTEL_SCORERS_CONCURRENCY", "judge calls in flight", argument=True),
    P("cache_ttl_s", "OTEL_SCORERS_CACHE_TTL", "seconds a judgement is reused (0: off)",
      argument=True),
    P("cache_size", None, "judgements kept for reuse", argument=True),
    P("evaluation_timeout_s", "OTEL_SCORERS_EVALUATION_TIMEOUT", "per evaluation, retries "
      "included", argument=True),
    P("hold_timeout_s", "OTEL_SCORERS_HOLD_TIMEOUT", "enriched export: seconds a span waits "
      "for its scores", argument=True),
    P("max_held", None, "enriched export: spans held at once", argument=True),
    P("shutdown_timeout_s", None, "seconds `shutdown()` drains queued evaluations",
      argument=True),
    P("exit_timeout_s", "OTEL_SCORERS_EXIT_TIMEOUT_S", "seconds pending evaluations may take "
      "at interpreter exit", argument=True),
    P("assemble_from_trace", None, "read a run's content from the spans under it",
      argument=True),
    P("exported_content", "OTEL_SCORERS_EXPORTED_CONTENT", "`strip`: GenAI content judged, "
      "never exported", argument=True),
    P("log_wait_s", "OTEL_SCORERS_LOG_WAIT_S", "seconds a run found without content waits for "
      "its log records", argument=True),
    P("interaction_wait_s", "OTEL_SCORERS_INTERACTION_WAIT_S", "an interaction is decided when "
      "its trace's local root span ends; one whose root has not ended (a long-lived wrapper "
      "span, a parent in another service) is decided once no span of its trace has ended for "
      "this long (and at `force_flush`, shutdown and exit)", argument=True),
    P("max_agents", "OTEL_SCORERS_MAX_AGENTS", "distinct agent names in metric labels; more "
      "count as `_other`", argument=True),
    P("isolation", "OTEL_SCORERS_ISOLATION", "`process`: judge in one child process per "
      "application process (the application keeps selection, capture and emission and hands "
      "each captured run over a pipe); `thread`: on the library's background thread",
      argument=True),
    P("fuse_judge_calls", "OTEL_SCORERS_FUSE_JUDGE_CALLS", "one judge call for the scorers "
      "that judge a run with the same judge (half the calls with both scorers; a broken half "
      "of the answer fails only its scorer); off until `otel-scorers calibrate --fused` on "
      "your judge shows no loss", argument=True),
    P("check_judge", "OTEL_SCORERS_CHECK_JUDGE", "at start, one request to each judge in its "
      "structured-output mode, off the application's thread: a wrong model, base, key or mode, "
      "or a missing embedded model, is logged with its fix before the first run "
      "(`serve --check-judge` exits 2 instead)", argument=True),
    P("judge_rates", "OTEL_SCORERS_JUDGE_RATES", "a file of the judges' true positive and "
      "negative rates (`otel-scorers calibrate --save FILE`), by scorer name: exported as "
      "gauges when the scorer's judge is the model they were measured with, for the corrected "
      "pass rate of the shipped recording rules"),
)


class PipelineSettings(TypedDict, total=False):
    """The settings :class:`~otel_scorers.pipeline.ScoringSpanProcessor` takes as keyword
    arguments (the ``argument`` rows of :data:`CORE_PARAMS`, with the settings models' types)."""

    evaluation_spans: bool
    events: bool
    reasons: Literal["full", "truncate", "none"]
    max_reason_chars: int
    queue_size: int
    concurrency: int
    cache_ttl_s: float
    cache_size: int
    evaluation_timeout_s: float
    hold_timeout_s: float
    max_held: int
    shutdown_timeout_s: float
    exit_timeout_s: float
    assemble_from_trace: bool
    exported_content: Literal["keep", "strip"]
    log_wait_s: float
    interaction_wait_s: float
    max_agents: int
    isolation: Literal["thread", "process"]
    fuse_judge_calls: bool
    check_judge: bool


ARGUMENTS: frozenset[str] = frozenset(p.path for p in CORE_PARAMS if p.argument)

_derived: tuple[int, tuple[Param, ...]] | None = None


def _env_of(info: Any) -> str | None:
    """The variable a documented field (:func:`otel_scorers.registry.option`) names."""
    extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
    env = extra.get("env")
    return env if isinstance(env, str) else None


def _separated(info: Any) -> Callable[[str], Any] | None:
    """A list option whose items hold commas (quick checks) names its own ``separator``."""
    extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
    separator = extra.get("separator")
    if not isinstance(separator, str):
        return None
    return lambda text: [item.strip() for item in text.split(separator) if item.strip()]


def params() -> tuple[Param, ...]:
    """Every setting: :data:`CORE_PARAMS`, with the options of every registered scorer type
    after ``scorers.*.sampling`` (one row per option name: the types that take it, its doc and
    variable from the first type's options model) and every backend's block before
    ``sinks.*``."""
    global _derived
    version = registry.version()
    if _derived is not None and _derived[0] == version:
        return _derived[1]
    options: dict[str, tuple[list[str], Any]] = {}
    for row in registry.scorer_types():
        for name, info in row.options.model_fields.items():
            options.setdefault(name, ([], info))[0].append(row.name)
    derived = [Param(f"scorers.*.{name}", _env_of(info),
                     f"{', '.join(f'`{t}`' for t in kinds)}: {info.description or ''}",
                     parse=_separated(info))
               for name, (kinds, info) in options.items()]
    split = next(i for i, p in enumerate(CORE_PARAMS) if p.path == "scorers.*.sampling") + 1
    blocks = [Param(f"{row.name}.{name}", _env_of(info), info.description or "")
              for row in registry.backends() for name, info in row.settings.model_fields.items()]
    before_sinks = next(i for i, p in enumerate(CORE_PARAMS) if p.path.startswith("sinks."))
    made = (*CORE_PARAMS[:split], *derived, *CORE_PARAMS[split:before_sinks], *blocks,
            *CORE_PARAMS[before_sinks:])
    _derived = (version, made)
    return made


def parser_for(param: Param) -> Callable[[str], Any]:
    """How ``param``'s variable is read: ``parse``, else by the field's type (booleans, whole
    numbers, numbers, comma lists, text)."""
    if param.parse is not None:
        return param.parse
    annotation, _ = field_of(param.keys)
    kinds = set(flatten(annotation)) - {type(None)}
    if kinds == {bool}:
        return parse_bool
    if kinds == {int}:
        return int
    if kinds <= {float, int} and kinds:
        return float
    if list in kinds:
        return parse_list
    return str


def reference_table() -> str:
    """The configuration reference (docs/configuration.md's table), from the table and the
    settings models' defaults."""
    rows = ["| setting | env var | default | meaning |", "|---|---|---|---|"]
    for param in params():
        _, default = field_of(param.keys)
        env = f"`{param.env}`" if param.env else "(file or code)"
        rows.append(f"| `{param.path.replace('.*.', '[].')}` | {env} | {_shown(default)} | "
                    f"{param.doc} |")
    return "\n".join(rows)


def _shown(value: Any) -> str:
    if value is None or value in ({}, []):
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list):
        return ",".join(str(getattr(item, "type", item)) for item in value)
    if isinstance(value, Mapping | BaseModel):
        return ""
    return str(value) if value != "" else '""'


def scorer_types_table() -> str:
    """The scorer types (docs/configuration.md's second table), from the registry rows."""
    rows = ["| type | judges | judges at | options | what it scores |", "|---|---|---|---|---|"]
    for row in registry.scorer_types():
        options = ", ".join(f"`{name}`" for name in row.options.model_fields) or "none"
        rows.append(f"| `{row.name}` | {'yes' if row.judges else 'no (code)'} | "
                    f"{', '.join(row.levels)} | {options} | {row.summary} |")
    return "\n".join(rows)


if __name__ == "__main__":  # python -m otel_scorers.config.params: the two generated tables
    print(reference_table())
    print()
    print(scorer_types_table())
