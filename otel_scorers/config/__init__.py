"""Settings from arguments, ``OTEL_SCORERS_*`` environment variables and a YAML file.

Precedence: argument, then environment, then file, then default. The file is named by the
``config`` argument or ``OTEL_SCORERS_CONFIG``; it is validated by pydantic and unknown keys are
an error. Environment variables are read when settings are loaded (processor construction),
never at import. A bad argument or file raises :class:`ConfigError`; a bad environment value,
or an ``OTEL_SCORERS_*`` name nobody reads (a misspelling), raises :class:`EnvConfigError`
naming each variable and what it accepts. Unlike the OTel SDK, which warns and falls back, a
bad value is never ignored here: falling back would mean judging every run with no budget.
The processor turns that error into one logged line and scoring off; the CLI into exit 2.

``load_settings`` returns the settings and, for every leaf, where its value came from
(``otel-scorers check-config`` prints both).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from otel_scorers.config.environment import ENV_VARS, env_layer, merge
from otel_scorers.config.settings import (
    BoostSettings,
    CaptureSettings,
    CriterionSettings,
    JudgeSettings,
    SamplingSettings,
    ScorerSettings,
    SelectionSettings,
    Settings,
)
from otel_scorers.errors import ConfigError, EnvConfigError

__all__ = [
    "ENV_VARS",
    "BoostSettings",
    "CaptureSettings",
    "CriterionSettings",
    "JudgeSettings",
    "ResolvedSettings",
    "SamplingSettings",
    "ScorerSettings",
    "SelectionSettings",
    "Settings",
    "load_settings",
]

ENV_CONFIG = "OTEL_SCORERS_CONFIG"


@dataclass(frozen=True)
class ResolvedSettings:
    settings: Settings
    sources: Mapping[str, str]


def _leaves(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value and key not in ("rubrics", "attributes"):
            out.update(_leaves(value, path + "."))
        else:
            out[path] = value
    return out


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
        data = merge(data, layer)
        sources.update(dict.fromkeys(_leaves(layer), f"file {path}"))
    env_data, env_sources, problems = env_layer(env, data)
    if problems:
        raise EnvConfigError("invalid otel-scorers environment: " + "; ".join(problems),
                             problems)
    data = merge(data, env_data)
    sources.update(env_sources)
    if arguments:
        data = merge(data, arguments)
        sources.update(dict.fromkeys(_leaves(arguments), "argument"))
    try:
        settings = Settings.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"invalid settings:\n{_errors(exc)}") from exc
    return ResolvedSettings(settings, sources)
