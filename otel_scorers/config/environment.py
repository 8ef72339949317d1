"""``OTEL_SCORERS_*`` environment variables: names, parsers and the settings they set."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from otel_scorers.config.settings import Settings

__all__ = ["ENV_VARS", "OTHER_VARS", "EnvVar", "env_layer", "merge", "nested", "unknown_vars"]

logger = logging.getLogger(__name__)


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
    "OTEL_SCORERS_JUDGE_TRANSPORT": EnvVar(("judge", "transport"), str,
                                           "auto (direct HTTP to an OpenAI-compatible "
                                           "api_base) | litellm"),
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
    "OTEL_SCORERS_PER_AGENT": EnvVar(("selection", "per_agent"), _bool,
                                     "judge every agent span on its own, not each interaction "
                                     "once"),
    "OTEL_SCORERS_INTERACTION_WAIT_S": EnvVar(("interaction_wait_s",), float,
                                              "seconds an interaction whose trace root has not "
                                              "ended waits for more of its spans"),
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
    "OTEL_SCORERS_EXIT_TIMEOUT_S": EnvVar(("exit_timeout_s",), float,
                                          "seconds pending evaluations may take at exit"),
    "OTEL_SCORERS_EXPORTED_CONTENT": EnvVar(("exported_content",), str,
                                            "GenAI content on exported spans and logs: "
                                            "keep|strip"),
    "OTEL_SCORERS_MAX_AGENTS": EnvVar(("max_agents",), int,
                                      "distinct agent names in metric labels (then _other)"),
    "OTEL_SCORERS_LOG_WAIT_S": EnvVar(("log_wait_s",), float,
                                      "seconds a run without content waits for its log "
                                      "records"),
    "OTEL_SCORERS_ISOLATION": EnvVar(("isolation",), str,
                                     "thread (judging in the app's process) | process (in a "
                                     "child process)"),
    "OTEL_SCORERS_FUSE_JUDGE_CALLS": EnvVar(("fuse_judge_calls",), _bool,
                                            "one judge call for the scorers judging a run with "
                                            "the same judge"),
}


def merge(base: dict[str, Any], layer: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in layer.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(dict(out[key]), value)
        else:
            out[key] = value
    return out


def nested(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    out: Any = value
    for key in reversed(path):
        out = {key: out}
    return dict(out)


#: ``OTEL_SCORERS_*`` variables read elsewhere than the settings (not misspellings).
OTHER_VARS = frozenset({"OTEL_SCORERS_CONFIG", "OTEL_SCORERS_UPSTREAM",
                        "OTEL_SCORERS_GATEWAY_TOKEN"})


def env_layer(env: Mapping[str, str], base: dict[str, Any]
              ) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    """The settings the environment sets, where each came from, and the problems found: one
    line per variable with a bad value or an unknown ``OTEL_SCORERS_*`` name (with the
    accepted values, or the name it probably meant)."""
    layer: dict[str, Any] = {}
    sources: dict[str, str] = {}
    problems = unknown_vars(env)
    scorer_types: list[str] | None = None
    mode: str | None = None
    for name, var in ENV_VARS.items():
        raw = env.get(name)
        if raw is None or raw == "":
            continue
        try:
            value = var.parse(raw)
        except ValueError as exc:
            problems.append(f"{name}={_shown(name, raw)}: {exc} (expected {var.help})")
            continue
        if var.path == ("scorers",):
            scorer_types = value
            continue
        if var.path[:2] == ("scorers", "*"):
            mode = value
            continue
        candidate = merge(layer, nested(var.path, value))
        error = _invalid(merge(base, candidate))
        if error:
            problems.append(f"{name}={_shown(name, raw)}: {error} ({var.help})")
            continue
        layer = candidate
        sources["rubrics" if var.path[0] == "rubrics" else ".".join(var.path)] = f"env {name}"
    if scorer_types is not None or mode is not None:
        types = scorer_types or [s["type"] for s in base.get("scorers", [])]
        scorers = [{"type": t, **({"evaluation_mode": mode}
                                  if mode and t.replace("-", "_") == "prompt_alignment"
                                  else {})} for t in types]
        candidate = merge(layer, {"scorers": scorers})
        error = _invalid(merge(base, candidate))
        if error:
            problems.append(f"OTEL_SCORERS_SCORERS/OTEL_SCORERS_ALIGNMENT_MODE: {error} "
                            "(scorers: rubric, prompt_alignment; mode: user, system, both)")
        else:
            layer = candidate
            sources["scorers"] = "env OTEL_SCORERS_SCORERS/OTEL_SCORERS_ALIGNMENT_MODE"
    return layer, sources, problems


def unknown_vars(env: Mapping[str, str]) -> list[str]:
    """Problems for ``OTEL_SCORERS_*`` names nobody reads: most likely misspellings."""
    import difflib

    known = [*ENV_VARS, *OTHER_VARS]
    problems = []
    for name in sorted(env):
        if name.startswith("OTEL_SCORERS_") and name not in known:
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]}?" if close else ""
            problems.append(f"{name} is not an otel-scorers setting{hint}")
    return problems


def _shown(name: str, raw: str) -> str:
    """A value as it may be printed: never a key's."""
    return "'****'" if name.endswith("API_KEY") else repr(raw[:80])


def _invalid(data: Mapping[str, Any]) -> str:
    """The first validation message for ``data``, or ``""`` when it is valid."""
    try:
        Settings.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        return str(first["msg"])
    return ""
