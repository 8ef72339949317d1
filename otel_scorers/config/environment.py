"""``OTEL_SCORERS_*`` environment variables: names, parsers and the settings they set."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from otel_scorers import registry
from otel_scorers.config.params import params, parser_for
from otel_scorers.config.settings import Settings

__all__ = ["ENV_VARS", "OTHER_VARS", "EnvVar", "env_layer", "judge_environment", "merge",
           "nested", "unknown_vars"]


@dataclass(frozen=True)
class EnvVar:
    path: tuple[str, ...]
    parse: Callable[[str], Any]
    help: str


def _env_vars() -> dict[str, EnvVar]:
    """The variables of the settings table (:mod:`otel_scorers.config.params`)."""
    out: dict[str, EnvVar] = {}
    for param in params():
        if param.env is None:
            continue
        # OTEL_SCORERS_RUBRIC sets the rubric of every agent
        path = ("rubrics", "*") if param.path == "rubrics" else param.keys
        out[param.env] = EnvVar(path, parser_for(param), param.doc)
    return out


class _Variables(Mapping[str, EnvVar]):
    """Every ``OTEL_SCORERS_*`` variable the settings read, made again when a registry row
    (a scorer type's or a backend's options) is added."""

    def __init__(self) -> None:
        self._made: tuple[int, dict[str, EnvVar]] | None = None

    def _table(self) -> dict[str, EnvVar]:
        version = registry.version()
        if self._made is None or self._made[0] != version:
            self._made = (version, _env_vars())
        return self._made[1]

    def __getitem__(self, name: str) -> EnvVar:
        return self._table()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())


ENV_VARS: Mapping[str, EnvVar] = _Variables()


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
                        "OTEL_SCORERS_GATEWAY_TOKEN", "OTEL_SCORERS_LOCAL_THREADS"})


def env_layer(env: Mapping[str, str], base: dict[str, Any]
              ) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    """The settings the environment sets, where each came from, and the problems found: one
    line per variable with a bad value or an unknown ``OTEL_SCORERS_*`` name (with the
    accepted values, or the name it probably meant)."""
    layer: dict[str, Any] = {}
    sources: dict[str, str] = {}
    problems = unknown_vars(env)
    scorer_types: list[str] | None = None
    per_scorer: dict[str, tuple[str, Any]] = {}  # field -> (variable, value)
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
            per_scorer[var.path[2]] = (name, value)
            continue
        candidate = merge(layer, nested(var.path, value))
        error = _invalid(merge(base, candidate))
        if error:
            problems.append(f"{name}={_shown(name, raw)}: {error} ({var.help})")
            continue
        layer = candidate
        sources["rubrics" if var.path[0] == "rubrics" else ".".join(var.path)] = f"env {name}"
    if scorer_types is not None or per_scorer:
        scorers, unused = _scorers(base, scorer_types, per_scorer)
        problems += unused
        candidate = merge(layer, {"scorers": scorers})
        error = _invalid(merge(base, candidate))
        names = "/".join(["OTEL_SCORERS_SCORERS"] * (scorer_types is not None)
                         + [var for var, _ in per_scorer.values()])
        if error:
            types = ", ".join(row.name for row in registry.scorer_types())
            listed = "(types: " in error  # a misspelt type's error lists them already
            problems.append(f"{names}: {error}" + ("" if listed else f" (scorers: {types})"))
        else:
            layer = candidate
            sources["scorers"] = f"env {names}"
    return layer, sources, problems


def _scorers(base: Mapping[str, Any], types: list[str] | None,
             per_scorer: Mapping[str, tuple[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """The scorers the environment describes: ``OTEL_SCORERS_SCORERS`` (else the scorers of
    the file, kept whole) with each per-scorer variable set on the types that take it; a
    variable that no configured scorer takes is a problem, not silently ignored."""
    scorers = ([{"type": t} for t in types] if types is not None
               else [dict(s) for s in base.get("scorers", [])])
    used: set[str] = set()
    for scorer in scorers:
        try:
            takes = registry.scorer_type(str(scorer.get("type"))).options.model_fields
        except KeyError:  # said when the scorers are validated
            continue
        for field, (_, value) in per_scorer.items():
            if field in takes:
                scorer[field] = value
                used.add(field)
    problems = [f"{var}: no configured scorer takes {field} (scorers: "
                f"{', '.join(str(s.get('type')) for s in scorers) or 'none'}; set "
                "OTEL_SCORERS_SCORERS)" for field, (var, _) in per_scorer.items()
                if field not in used]
    return scorers, problems


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
    """A value as it may be printed: never a key's, never a URL's credentials."""
    if name.endswith(("API_KEY", "SECRET", "TOKEN")):
        return "'****'"
    if "://" in raw:
        from otel_scorers.http import shown_url

        return repr(shown_url(raw)[:120])
    return repr(raw[:80])


def _invalid(data: Mapping[str, Any]) -> str:
    """The first validation message for ``data``, or ``""`` when it is valid."""
    try:
        Settings.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        return str(first["msg"]).replace("Value error, ", "")  # pydantic's prefix, nested
    return ""


def judge_environment(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The judge settings the ``OTEL_SCORERS_JUDGE_*`` variables (and ``OTEL_SCORERS_REDACT``)
    set, by field name, for a judge client built in code. Raises :class:`EnvConfigError`
    naming each variable with a bad value; other variables are not its business (the
    processor and the commands check every one)."""
    import os

    from otel_scorers.errors import EnvConfigError

    env = os.environ if env is None else env
    judge_vars = {name: var for name, var in ENV_VARS.items() if var.path[0] == "judge"}
    if not any(env.get(name) for name in judge_vars):
        return {}
    layer, _, problems = env_layer({k: v for k, v in env.items() if k in judge_vars},
                                   Settings().model_dump())
    if problems:
        raise EnvConfigError("invalid otel-scorers judge environment: " + "; ".join(problems),
                             problems)
    return dict(layer.get("judge", {}))
