"""The settings models: everything the processor can be configured with outside Python code.

Validated by pydantic; unknown keys are an error; values are frozen.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    SerializeAsAny,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)

from otel_scorers import registry
from otel_scorers.registry import Options

__all__ = [
    "BoostSettings",
    "CaptureSettings",
    "CriterionSettings",
    "JudgeSettings",
    "SamplingSettings",
    "ScorerSettings",
    "SelectionSettings",
    "SessionSettings",
    "Settings",
    "SinkSettings",
]

Scalar = str | int | float | bool


class StrictModel(BaseModel):
    """Base of every settings block: unknown keys are an error, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)




class JudgeSettings(StrictModel):
    model: str | None = None
    api_base: str | None = None
    api_key: SecretStr | None = None
    timeout_s: float = Field(default=60.0, gt=0)
    max_tokens: int = Field(default=2048, gt=0)
    temperature: float = Field(default=0.0, ge=0, le=2)
    max_retries: int = Field(default=3, ge=0)
    structured_output: Literal["auto", "json_schema", "json_object", "json_object_schema",
                               "prompt"] = "auto"
    transport: Literal["auto", "litellm"] = "auto"
    redact: bool = False
    service_tier: Literal["standard", "flex"] = "standard"
    flex_fallback: Literal["standard", "wait"] = "standard"


class BoostSettings(StrictModel):
    attribute: str
    value: Scalar
    ratio: float = Field(ge=0, le=1)


class SamplingSettings(StrictModel):
    ratio: float = Field(default=1.0, ge=0, le=1)
    error_ratio: float | None = Field(default=None, ge=0, le=1)
    boosts: list[BoostSettings] = []
    rate_limit: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    budget_tokens_per_hour: int | None = Field(default=None, gt=0)
    budget_cost_per_hour: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    budget_tokens_per_day: int | None = Field(default=None, gt=0)
    budget_cost_per_day: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    #: with a budget, spread it over its hour: the ratio adapts to the traffic (pipeline.sampling)
    pace_budget: bool = True
    salt: str = ""


class BatchSettings(StrictModel):
    """The batch lane of the scorers with ``lane: batch`` (pipeline.batch.lane)."""

    #: scorers (by name) judged in the batch lane, as ``lane: batch`` on each would
    scorers: list[str] = []
    directory: str = ".otel-scorers/batch"
    max_bytes: int = Field(default=256 * 1024 * 1024, gt=0)
    interval_s: float = Field(default=60.0, gt=0, allow_inf_nan=False)
    max_lines: int = Field(default=50_000, gt=0, le=50_000)
    max_attempts: int = Field(default=3, ge=1, le=10)
    completion_window: Literal["24h"] = "24h"
    give_up_after_s: float = Field(default=90_000.0, gt=0, allow_inf_nan=False)


class CriterionSettings(StrictModel):
    description: str | None = None
    id: str | None = None
    required: bool = True
    #: a quick check decided in code (``called_tool get_weather``) instead of by the judge
    check: str | None = None

    @model_validator(mode="after")
    def _described(self) -> CriterionSettings:
        if not self.check and not (self.description or "").strip():
            raise ValueError("a criterion needs a description or a check")
        return self


#: The fields every scorer has, whatever its type; the others are its type's options.
COMMON_FIELDS = frozenset({"type", "name", "scale", "sampling", "service_tier", "lane",
                           "options"})


class ScorerSettings(StrictModel):
    """One scorer: its ``type`` (a row of :mod:`otel_scorers.registry`), ``name``, ``scale``,
    ``sampling``, and the options its type takes (its row's options model). Options are given
    beside the common fields (``{type: rubric, criteria: ...}``) or under ``options``; one that
    belongs to another type is an error naming the type's options, never ignored."""

    type: str
    name: str | None = None
    scale: float = Field(default=1.0, gt=0)
    sampling: SamplingSettings | None = None
    #: the judge's provider tier for this scorer (``None``: ``judge.service_tier``)
    service_tier: Literal["standard", "flex"] | None = None
    #: ``batch``: judged through the provider's batch API, emitted late (``batch`` settings)
    lane: Literal["live", "batch"] = "live"
    options: SerializeAsAny[Options]

    @model_validator(mode="before")
    @classmethod
    def _typed(cls, data: Any) -> Any:
        if not isinstance(data, Mapping) or not isinstance(data.get("type"), str):
            return data
        try:
            row = registry.scorer_type(data["type"])
        except KeyError as exc:
            raise ValueError(str(exc.args[0])) from None
        given = data.get("options")
        if isinstance(given, row.options):
            values: dict[str, Any] = given.model_dump(exclude_unset=True)
        elif isinstance(given, Mapping) or given is None:
            values = dict(given or {})
        else:
            raise ValueError(f"the options of a {row.name} scorer are a mapping")
        values.update({key: value for key, value in data.items() if key not in COMMON_FIELDS})
        accepted = row.options.model_fields
        foreign = sorted(set(values) - set(accepted))
        if foreign:
            raise ValueError(f"a {row.name} scorer has no option {', '.join(foreign)} (its "
                             f"options: {', '.join(sorted(accepted)) or 'none'})")
        out = {key: value for key, value in data.items() if key in COMMON_FIELDS}
        out.update(type=row.name, options=row.options.model_validate(values))
        return out

    @model_serializer(mode="wrap")
    def _flat(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Dumped as it is written: the options beside the common fields."""
        data: dict[str, Any] = handler(self)
        options = data.pop("options", None) or {}
        return {**data, **options}


class SelectionSettings(StrictModel):
    agent_conventions: bool = True
    include_llm_spans: bool = False
    span_names: list[str] = []
    attributes: dict[str, Scalar | list[Scalar]] = {}
    agents: list[str] = []
    #: judge every agent span on its own instead of each interaction once
    per_agent: bool = False


class SessionSettings(StrictModel):
    """Session scoring: where the key is read and what scopes it, when a session is judged,
    what is held, and who may send turns."""

    key_attributes: list[str] = ["gen_ai.conversation.id", "session.id"]
    #: resource attributes that scope a key: two services whose conversation ids collide are
    #: two sessions (none: a key is global)
    scope_attributes: list[str] = ["service.name"]
    idle_s: float = Field(default=300.0, gt=0)
    keep_s: float = Field(default=3600.0, gt=0)
    max_sessions: int = Field(default=10_000, gt=0)
    max_turns: int = Field(default=100, ge=2)
    max_chars: int = Field(default=262_144, gt=0)
    #: all sessions' turns together, in bytes: past it the least recently active session
    #: makes room (judged at once when it has turns not judged)
    max_bytes: int = Field(default=64 * 1024 * 1024, gt=0)
    #: a gateway fleet: send each turn, as a log record keyed by its session, to this OTLP/HTTP
    #: endpoint (a Collector that routes it to the gateway judging the session) instead of
    #: keeping it here
    forward_endpoint: str | None = None
    #: signs the turn records a gateway sends, and is required of the records it takes
    turn_secret: SecretStr | None = None
    #: take turn records without a turn secret on a gateway without a token (off: they are
    #: dropped, counted and said; anyone who can reach the port could send them)
    accept_turns: bool = False

    @model_validator(mode="after")
    def _endpoint_is_http(self) -> SessionSettings:
        endpoint = self.forward_endpoint
        if endpoint is not None and not endpoint.startswith(("http://", "https://")):
            raise ValueError("sessions.forward_endpoint must be an http:// or https:// URL "
                             "(an OTLP/HTTP receiver)")
        return self


class CanarySettings(StrictModel):
    """Judge canaries: labelled cases replayed through each LLM scorer's live judge on a
    schedule (:mod:`otel_scorers.pipeline.canary`)."""

    #: on wherever a scorer has a judge (nothing runs without one)
    enabled: bool = True
    #: seconds between rounds; the first round is one interval after start
    interval_s: float = Field(default=3600.0, gt=0)
    cases_per_round: int = Field(default=4, gt=0, le=100)
    #: the share of a scorer's hourly judge budget canaries may spend
    budget_share: float = Field(default=0.05, gt=0, le=1)
    #: ``bundled`` (the golden set), ``agents`` (the agent set), ``phoenix`` / ``mlflow`` (the
    #: reviewers' labels there), or a labelled JSONL file
    cases: str = "bundled"
    #: the last verdicts the live true rates are measured over
    window: int = Field(default=200, ge=10)


class SinkSettings(StrictModel):
    """The queue in front of every result sink."""

    queue_size: int = Field(default=10_000, gt=0)
    #: the JSON size of the results waiting per sink (large rubric results fill it first)
    queue_bytes: int = Field(default=64 * 1024 * 1024, ge=65_536)
    retry_s: float = Field(default=120.0, gt=0)


class CaptureSettings(StrictModel):
    input: str | None = None
    output: str | None = None
    system: str | None = None
    agent: str | None = None
    version: str | None = None


def _default_scorers() -> list[ScorerSettings]:
    return [ScorerSettings.model_validate({"type": kind}) for kind in ("rubric",
                                                                       "prompt_alignment")]


class Settings(StrictModel):
    """Everything the processor can be configured with outside Python code.

    ``enabled`` is the zero-code switch: ``opentelemetry-instrument`` adds the processor only
    when it is true. A processor built in code ignores it.
    """

    enabled: bool = False
    judge: JudgeSettings = JudgeSettings()
    scorers: list[ScorerSettings] = Field(default_factory=_default_scorers)
    rubrics: dict[str, str | list[str | CriterionSettings]] = {}
    selection: SelectionSettings = SelectionSettings()
    sampling: SamplingSettings = SamplingSettings()
    capture: CaptureSettings = CaptureSettings()
    evaluation_spans: bool = True
    events: bool = True
    reasons: Literal["full", "truncate", "none"] = "full"
    max_reason_chars: int = Field(default=1_000, gt=0)
    queue_size: int = Field(default=2_048, gt=0)
    concurrency: int = Field(default=8, gt=0)
    cache_ttl_s: float = Field(default=600.0, ge=0)
    cache_size: int = Field(default=10_000, ge=0)
    evaluation_timeout_s: float = Field(default=300.0, gt=0)
    hold_timeout_s: float = Field(default=30.0, gt=0)
    max_held: int = Field(default=2_048, gt=0)
    shutdown_timeout_s: float = Field(default=30.0, gt=0)
    exit_timeout_s: float = Field(default=30.0, ge=0)
    assemble_from_trace: bool = True
    exported_content: Literal["keep", "strip"] = "keep"
    log_wait_s: float = Field(default=5.0, ge=0)
    #: an interaction whose trace's local root has not ended is decided once no span of the
    #: trace has ended for this long
    interaction_wait_s: float = Field(default=60.0, gt=0)
    max_agents: int = Field(default=100, gt=0)
    fuse_judge_calls: bool = False
    #: one judge request at start, off the application's thread, its outcome logged
    check_judge: bool = False
    #: a file of the judges' true rates (``calibrate --save``): exported as gauges for the
    #: corrected pass rate
    judge_rates: str | None = None
    isolation: Literal["thread", "process"] = "thread"
    sessions: SessionSettings = SessionSettings()
    sinks: SinkSettings = SinkSettings()
    canary: CanarySettings = CanarySettings()
    batch: BatchSettings = BatchSettings()

    # Every result backend's block (``phoenix:``, ``mlflow:``, a plug-in's) sits beside the
    # fields above, validated by its registry row's settings model: an extra key is allowed
    # only when it names a backend.
    model_config = ConfigDict(extra="allow", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _backend_blocks(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        rows = {row.name: row for row in registry.backends()}
        unknown = sorted(key for key in data if key not in cls.model_fields and key not in rows)
        if unknown:
            raise ValueError(f"unknown setting {', '.join(map(repr, unknown))} (settings: "
                             f"{', '.join([*cls.model_fields, *rows])})")
        out = dict(data)
        for name, row in rows.items():
            block = out.get(name)
            if isinstance(block, row.settings):
                continue
            try:
                out[name] = row.settings.model_validate(block or {})
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(part) for part in (name, *first["loc"]))
                raise ValueError(f"{where}: {first['msg']}") from None
        return out

    def backend(self, name: str) -> Any:
        """The settings block of the backend ``name`` (its row's settings model)."""
        return (self.__pydantic_extra__ or {})[name]
