"""Settings from arguments, ``OTEL_SCORERS_*`` environment variables and a YAML file.

Precedence: argument, then environment, then file, then default. The file is named by the
``config`` argument or ``OTEL_SCORERS_CONFIG``; it is validated by pydantic and unknown keys are
an error. Environment variables are read when settings are loaded (processor construction),
never at import. As in the OTel SDK, a bad argument or file raises :class:`ConfigError`, while a
bad environment value is logged and ignored.

``load_settings`` returns the settings and, for every leaf, where its value came from
(``otel-scorers check-config`` prints both).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from otel_scorers.errors import ConfigError

__all__ = [
    "ENV_VARS",
    "JudgeSettings",
    "ResolvedSettings",
    "SamplingSettings",
    "ScorerSettings",
    "SelectionSettings",
    "Settings",
    "load_settings",
]

logger = logging.getLogger(__name__)

ENV_CONFIG = "OTEL_SCORERS_CONFIG"
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
    description: str
    id: str | None = None
    required: bool = True


class ScorerSettings(_Strict):
    type: Literal["rubric", "prompt_alignment"]
    name: str | None = None
    criteria: str | list[str | CriterionSettings] | None = None
    scale: float = Field(default=1.0, gt=0)
    evaluation_mode: Literal["user", "system", "both"] = "both"
    pass_threshold: float | None = Field(default=None, ge=0, le=1)
    sampling: SamplingSettings | None = None


class SelectionSettings(_Strict):
    agent_conventions: bool = True
    include_llm_spans: bool = False
    span_names: list[str] = []
    attributes: dict[str, Scalar | list[Scalar]] = {}
    agents: list[str] = []


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
    assemble_from_trace: bool = True


# -- environment variables ----------------------------------------------------------------------
def _bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"not a boolean: {text!r}")


def _list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


@dataclass(frozen=True)
class EnvVar:
    path: tuple[str, ...]
    parse: Callable[[str], Any]
    help: str


ENV_VARS: Mapping[str, EnvVar] = {
    "OTEL_SCORERS_ENABLED": EnvVar(("enabled",), _bool, "turn zero-code scoring on or off"),
    "OTEL_SCORERS_JUDGE_MODEL": EnvVar(("judge", "model"), str, "judge model (litellm string)"),
    "OTEL_SCORERS_JUDGE_API_BASE": EnvVar(("judge", "api_base"), str, "judge API base URL"),
    "OTEL_SCORERS_JUDGE_API_KEY": EnvVar(("judge", "api_key"), str, "judge API key"),
    "OTEL_SCORERS_JUDGE_TIMEOUT": EnvVar(("judge", "timeout_s"), float,
                                         "seconds per judge call"),
    "OTEL_SCORERS_JUDGE_MAX_TOKENS": EnvVar(("judge", "max_tokens"), int,
                                            "max tokens per judge answer"),
    "OTEL_SCORERS_JUDGE_STRUCTURED_OUTPUT": EnvVar(("judge", "structured_output"), str,
                                                   "auto|json_schema|json_object|..."),
    "OTEL_SCORERS_REDACT": EnvVar(("judge", "redact"), _bool,
                                  "redact PII and secrets before judging"),
    "OTEL_SCORERS_SCORERS": EnvVar(("scorers",), _list,
                                   "comma list of scorer types: rubric,prompt_alignment"),
    "OTEL_SCORERS_ALIGNMENT_MODE": EnvVar(("scorers", "*", "evaluation_mode"), str,
                                          "prompt-alignment mode: user|system|both"),
    "OTEL_SCORERS_RUBRIC": EnvVar(("rubrics", "*"), str,
                                  "rubric checklist for every agent (newline separated)"),
    "OTEL_SCORERS_SAMPLE_RATIO": EnvVar(("sampling", "ratio"), float,
                                        "share of traces judged (0..1)"),
    "OTEL_SCORERS_ERROR_SAMPLE_RATIO": EnvVar(("sampling", "error_ratio"), float,
                                              "share of error spans judged"),
    "OTEL_SCORERS_RATE_LIMIT": EnvVar(("sampling", "rate_limit"), float,
                                      "max evaluations per second per scorer"),
    "OTEL_SCORERS_BUDGET_TOKENS_PER_HOUR": EnvVar(("sampling", "budget_tokens_per_hour"), int,
                                                  "judge tokens per hour per scorer"),
    "OTEL_SCORERS_BUDGET_COST_PER_HOUR": EnvVar(("sampling", "budget_cost_per_hour"), float,
                                                "judge USD per hour per scorer"),
    "OTEL_SCORERS_SAMPLE_SALT": EnvVar(("sampling", "salt"), str, "trace-id sampling salt"),
    "OTEL_SCORERS_INCLUDE_LLM_SPANS": EnvVar(("selection", "include_llm_spans"), _bool,
                                             "also score LLM chat spans"),
    "OTEL_SCORERS_SPAN_NAMES": EnvVar(("selection", "span_names"), _list,
                                      "comma list of span-name globs to score"),
    "OTEL_SCORERS_AGENTS": EnvVar(("selection", "agents"), _list,
                                  "comma list: score only these agents"),
    "OTEL_SCORERS_EVALUATION_SPANS": EnvVar(("evaluation_spans",), _bool,
                                            "emit evaluation spans"),
    "OTEL_SCORERS_EVENTS": EnvVar(("events",), _bool, "emit gen_ai.evaluation.result events"),
    "OTEL_SCORERS_REASONS": EnvVar(("reasons",), str,
                                   "judge text in telemetry: full|truncate|none"),
    "OTEL_SCORERS_MAX_REASON_CHARS": EnvVar(("max_reason_chars",), int,
                                            "characters kept per text when truncating"),
    "OTEL_SCORERS_QUEUE_SIZE": EnvVar(("queue_size",), int, "runs waiting for evaluation"),
    "OTEL_SCORERS_CONCURRENCY": EnvVar(("concurrency",), int, "judge calls in flight"),
    "OTEL_SCORERS_CACHE_TTL": EnvVar(("cache_ttl_s",), float, "seconds a judgement is reused"),
    "OTEL_SCORERS_EVALUATION_TIMEOUT": EnvVar(("evaluation_timeout_s",), float,
                                              "seconds per evaluation, retries included"),
    "OTEL_SCORERS_HOLD_TIMEOUT": EnvVar(("hold_timeout_s",), float,
                                        "enriched export: seconds a span waits for scores"),
}


# -- merging --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ResolvedSettings:
    settings: Settings
    sources: Mapping[str, str]


def _merge(base: dict[str, Any], layer: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in layer.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merge(dict(out[key]), value)
        else:
            out[key] = value
    return out


def _leaves(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value and key not in ("rubrics", "attributes"):
            out.update(_leaves(value, path + "."))
        else:
            out[path] = value
    return out


def _nested(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    out: Any = value
    for key in reversed(path):
        out = {key: out}
    return dict(out)


def _env_layer(env: Mapping[str, str], base: dict[str, Any]) -> tuple[dict[str, Any],
                                                                      dict[str, str]]:
    layer: dict[str, Any] = {}
    sources: dict[str, str] = {}
    scorer_types: list[str] | None = None
    mode: str | None = None
    for name, var in ENV_VARS.items():
        raw = env.get(name)
        if raw is None or raw == "":
            continue
        try:
            value = var.parse(raw)
        except ValueError as exc:
            logger.warning("ignoring %s=%r: %s", name, raw, exc)
            continue
        if var.path == ("scorers",):
            scorer_types = value
            continue
        if var.path[:2] == ("scorers", "*"):
            mode = value
            continue
        candidate = _merge(layer, _nested(var.path, value))
        if not _valid(_merge(base, candidate)):
            logger.warning("ignoring %s=%r: not a valid value", name, raw)
            continue
        layer = candidate
        sources["rubrics" if var.path[0] == "rubrics" else ".".join(var.path)] = f"env {name}"
    if scorer_types is not None or mode is not None:
        types = scorer_types or [s["type"] for s in base.get("scorers", [])]
        scorers = [{"type": t, **({"evaluation_mode": mode}
                                  if mode and t == "prompt_alignment" else {})} for t in types]
        candidate = _merge(layer, {"scorers": scorers})
        if _valid(_merge(base, candidate)):
            layer = candidate
            sources["scorers"] = "env OTEL_SCORERS_SCORERS/OTEL_SCORERS_ALIGNMENT_MODE"
        else:
            logger.warning("ignoring OTEL_SCORERS_SCORERS/OTEL_SCORERS_ALIGNMENT_MODE: invalid")
    return layer, sources


def _valid(data: Mapping[str, Any]) -> bool:
    try:
        Settings.model_validate(data)
    except ValidationError:
        return False
    return True


def _file_layer(path: str | Path) -> dict[str, Any]:
    try:
        text = Path(path).read_text(encoding="utf-8")
        data = yaml.safe_load(text)
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"config file {path} must hold a mapping at the top level")
    try:
        Settings.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"invalid config file {path}:\n{_errors(exc)}") from exc
    return dict(data)


def _errors(exc: ValidationError) -> str:
    return "\n".join(f"  {'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())


def load_settings(arguments: Mapping[str, Any] | None = None, *,
                  config: str | Path | None = None,
                  env: Mapping[str, str] | None = None) -> ResolvedSettings:
    """Resolve settings: ``arguments`` over environment over file over defaults."""
    env = os.environ if env is None else env
    data: dict[str, Any] = Settings().model_dump()
    sources = dict.fromkeys(_leaves(data), "default")
    path = config or env.get(ENV_CONFIG)
    if path:
        layer = _file_layer(path)
        data = _merge(data, layer)
        sources.update(dict.fromkeys(_leaves(layer), f"file {path}"))
    env_data, env_sources = _env_layer(env, data)
    data = _merge(data, env_data)
    sources.update(env_sources)
    if arguments:
        data = _merge(data, arguments)
        sources.update(dict.fromkeys(_leaves(arguments), "argument"))
    try:
        settings = Settings.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"invalid settings:\n{_errors(exc)}") from exc
    return ResolvedSettings(settings, sources)
