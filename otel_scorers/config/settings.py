"""The settings models: everything the processor can be configured with outside Python code.

Validated by pydantic; unknown keys are an error; values are frozen.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, SecretStr, model_validator

__all__ = [
    "BoostSettings",
    "CaptureSettings",
    "CriterionSettings",
    "ExpectedStepSettings",
    "JudgeSettings",
    "MLflowSettings",
    "PhoenixSettings",
    "SamplingSettings",
    "ScorerSettings",
    "SelectionSettings",
    "SessionSettings",
    "Settings",
    "SinkSettings",
]

Scalar = str | int | float | bool


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class JudgeSettings(_Strict):
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


class BoostSettings(_Strict):
    attribute: str
    value: Scalar
    ratio: float = Field(ge=0, le=1)


class SamplingSettings(_Strict):
    ratio: float = Field(default=1.0, ge=0, le=1)
    error_ratio: float | None = Field(default=None, ge=0, le=1)
    boosts: list[BoostSettings] = []
    rate_limit: float | None = Field(default=None, gt=0)
    budget_tokens_per_hour: int | None = Field(default=None, gt=0)
    budget_cost_per_hour: float | None = Field(default=None, gt=0)
    salt: str = ""


class CriterionSettings(_Strict):
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


class ExpectedStepSettings(_Strict):
    name: str
    kind: Literal["tool", "retrieval", "handoff"] | None = None
    arguments: dict[str, Any] | None = None


#: The scorer types, and the options each accepts besides the common ones.
SCORER_OPTIONS: dict[str, frozenset[str]] = {
    "rubric": frozenset({"criteria", "examples", "examples_max_tokens", "include_trajectory",
                         "session"}),
    "prompt_alignment": frozenset({"evaluation_mode", "pass_threshold", "examples",
                                   "examples_max_tokens", "include_trajectory", "session"}),
    "trajectory": frozenset({"expected", "ordering", "allow_repeated_steps", "max_steps",
                             "max_total_tokens", "max_duration_s", "no_redundant_calls",
                             "max_retries_per_tool", "blacklist", "blacklisted_sequences",
                             "pass_threshold"}),
    "checks": frozenset({"checks"}),
    "tool_use": frozenset({"pass_threshold"}),
    "faithfulness": frozenset({"context", "pass_threshold"}),
    "multi_turn": frozenset({"criteria", "include_trajectory"}),
}


def scorer_type(value: object) -> object:
    """``prompt-alignment`` (the CLI's spelling) and ``prompt_alignment`` are one scorer."""
    return value.strip().lower().replace("-", "_") if isinstance(value, str) else value


class ScorerSettings(_Strict):
    """One scorer. Options beyond ``type``, ``name``, ``scale`` and ``sampling`` belong to some
    types only (:data:`SCORER_OPTIONS`): one given to another type is an error, not ignored."""

    type: Annotated[Literal["rubric", "prompt_alignment", "trajectory", "checks", "tool_use",
                            "faithfulness", "multi_turn"], BeforeValidator(scorer_type)]
    name: str | None = None
    criteria: str | list[str | CriterionSettings] | None = None
    scale: float = Field(default=1.0, gt=0)
    evaluation_mode: Literal["user", "system", "both"] = "both"
    pass_threshold: float | None = Field(default=None, ge=0, le=1)
    sampling: SamplingSettings | None = None
    #: A JSON-lines file of labelled cases of this scorer's kind, shown to the judge as
    #: few-shot examples (``otel-scorers calibrate --examples`` measures their effect).
    examples: str | None = None
    examples_max_tokens: int = Field(default=1500, gt=0)
    include_trajectory: bool = False
    #: judge whole conversations (each session once it goes idle) instead of each turn
    session: bool = False
    expected: list[str | ExpectedStepSettings] | None = None
    ordering: Literal["strict", "relaxed", "unordered"] = "relaxed"
    allow_repeated_steps: bool = True
    max_steps: int | None = Field(default=None, gt=0)
    max_total_tokens: int | None = Field(default=None, gt=0)
    max_duration_s: float | None = Field(default=None, gt=0)
    no_redundant_calls: bool = True
    max_retries_per_tool: int = Field(default=2, ge=0)
    blacklist: list[str] = []
    blacklisted_sequences: list[list[str]] = []
    checks: list[str] = []
    context: list[str] | None = None

    @model_validator(mode="after")
    def _options_fit_type(self) -> ScorerSettings:
        common = {"type", "name", "scale", "sampling"}
        fields = type(self).model_fields
        foreign = sorted(name for name in self.model_fields_set - common - SCORER_OPTIONS[self.type]
                         if getattr(self, name) != fields[name].get_default(
                             call_default_factory=True))
        if foreign:
            raise ValueError(f"a {self.type} scorer has no option {', '.join(foreign)} "
                             f"(its options: {', '.join(sorted(SCORER_OPTIONS[self.type]))})")
        if self.type == "checks" and not self.checks:
            raise ValueError("a checks scorer needs checks (e.g. ['called_tool get_weather'])")
        return self


class SelectionSettings(_Strict):
    agent_conventions: bool = True
    include_llm_spans: bool = False
    span_names: list[str] = []
    attributes: dict[str, Scalar | list[Scalar]] = {}
    agents: list[str] = []
    #: judge every agent span on its own instead of each interaction once
    per_agent: bool = False


class SessionSettings(_Strict):
    """Session scoring: where the key is read, when a session is judged, what is held."""

    key_attributes: list[str] = ["gen_ai.conversation.id", "session.id"]
    idle_s: float = Field(default=300.0, gt=0)
    keep_s: float = Field(default=3600.0, gt=0)
    max_sessions: int = Field(default=10_000, gt=0)
    max_turns: int = Field(default=100, ge=2)
    max_chars: int = Field(default=262_144, gt=0)
    #: a gateway fleet: send each turn, as a log record keyed by its session, to this OTLP/HTTP
    #: endpoint (a Collector that routes it to the gateway judging the session) instead of
    #: keeping it here
    forward_endpoint: str | None = None

    @model_validator(mode="after")
    def _endpoint_is_http(self) -> SessionSettings:
        endpoint = self.forward_endpoint
        if endpoint is not None and not endpoint.startswith(("http://", "https://")):
            raise ValueError("sessions.forward_endpoint must be an http:// or https:// URL "
                             "(an OTLP/HTTP receiver)")
        return self


class PhoenixSettings(_Strict):
    """Where results are written as Phoenix span annotations (off without an endpoint)."""

    endpoint: str | None = None
    project: str = "default"
    api_key: SecretStr | None = None


class MLflowSettings(_Strict):
    """Where results are written as MLflow assessments (off without a tracking URI)."""

    tracking_uri: str | None = None
    experiment: str | None = None


class SinkSettings(_Strict):
    """The queue in front of every result sink."""

    queue_size: int = Field(default=10_000, gt=0)
    retry_s: float = Field(default=120.0, gt=0)


class CaptureSettings(_Strict):
    input: str | None = None
    output: str | None = None
    system: str | None = None
    agent: str | None = None


def _default_scorers() -> list[ScorerSettings]:
    return [ScorerSettings(type="rubric"), ScorerSettings(type="prompt_alignment")]


class Settings(_Strict):
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
    isolation: Literal["thread", "process"] = "thread"
    sessions: SessionSettings = SessionSettings()
    phoenix: PhoenixSettings = PhoenixSettings()
    mlflow: MLflowSettings = MLflowSettings()
    sinks: SinkSettings = SinkSettings()
