"""Plug-ins as rows: each scorer type and each result backend says everything about itself in
one row, and the rest of the library reads the rows.

- A :class:`ScorerType` row names the type (the settings' ``type``, ``score --scorer``), its
  options model (the options it takes besides ``name``, ``scale`` and ``sampling``, each field
  documented, with its ``OTEL_SCORERS_*`` variable where it has one), how a scorer is built
  from those options and a judge, whether it judges, the levels it judges at (turns, whole
  sessions), its ``otel-scorers score`` flags, and how a labelled case of its kind is checked.
  The settings' type check and option checks, the environment reader, ``build``, the CLI and
  the configuration reference are all derived from the rows.
- A :class:`Backend` row names a result backend (its settings block, e.g. ``phoenix:``), says
  when the block turns it on, builds its writer, says what the start line tells of it, and
  reads reviewers' labels back from it for ``calibrate --cases NAME``.

A new scorer type or backend is one module and one row. The built-in rows are named here by
import path and loaded on first use; another package adds rows through the entry-point groups
``otel_scorers.scorer_types`` and ``otel_scorers.backends`` (each entry point names a row), and
code (an application, a test) adds one with :func:`register`. This module is a leaf: it knows
the shape of a row, never a row's module.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "Backend",
    "Flag",
    "Options",
    "ScorerType",
    "backend",
    "backends",
    "canonical",
    "load_group",
    "option",
    "register",
    "scorer_type",
    "scorer_types",
    "unregister",
    "version",
]

logger = logging.getLogger(__name__)

#: The built-in rows, by import path (``module:attribute``), in the order they are listed.
BUILTIN_SCORER_TYPES = (
    "otel_scorers.scorers.rubric:RUBRIC",
    "otel_scorers.scorers.alignment:PROMPT_ALIGNMENT",
    "otel_scorers.scorers.trajectory:TRAJECTORY",
    "otel_scorers.scorers.checks_scorer:CHECKS",
    "otel_scorers.scorers.tool_use:TOOL_USE",
    "otel_scorers.scorers.faithfulness:FAITHFULNESS",
    "otel_scorers.scorers.multi_turn:MULTI_TURN",
)
BUILTIN_BACKENDS = (
    "otel_scorers.backends.phoenix:PHOENIX",
    "otel_scorers.backends.mlflow:MLFLOW",
)
SCORER_GROUP = "otel_scorers.scorer_types"
BACKEND_GROUP = "otel_scorers.backends"


class Options(BaseModel):
    """Base of a scorer type's options model: strict (an option another type takes is an
    error, never ignored), frozen. Declare each field with :func:`option`."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def option(default: Any, doc: str, *, env: str | None = None, **constraints: Any) -> Any:
    """A documented option field: ``doc`` is its line in the configuration reference, ``env``
    the ``OTEL_SCORERS_*`` variable that sets it on every configured scorer that takes it;
    ``constraints`` are pydantic's (``gt``, ``ge``, ``default_factory``, ...)."""
    extra: dict[str, Any] | None = {"env": env} if env else None
    if "default_factory" in constraints:
        return Field(description=doc, json_schema_extra=extra, **constraints)
    return Field(default, description=doc, json_schema_extra=extra, **constraints)


@dataclass(frozen=True)
class Flag:
    """An ``otel-scorers score`` option of a scorer type: ``--name``; its value goes to the
    option ``option`` (default: the same name). ``multiple``: repeatable; ``text``: a value
    may be ``@file``; ``choices``: the values allowed; ``default``: when not given."""

    name: str
    help: str
    option: str | None = None
    multiple: bool = False
    text: bool = False
    choices: tuple[str, ...] | None = None
    default: Any = None
    metavar: str | None = None

    @property
    def target(self) -> str:
        return self.option or self.name


@dataclass(frozen=True)
class ScorerType:
    """One scorer type (see the module docstring).

    ``build(name, scale, options, judge)`` makes the scorer (``judge`` is ``None`` for a type
    that does not judge); ``from_flags(values)`` turns the given ``score`` flags into options
    (default: each flag's value to its option); ``shape_case(case)`` raises ``ValueError`` for
    a labelled case of this kind that is not one, ``check_case(case)`` lists where its labels
    contradict the scorer's own rules.
    """

    name: str
    summary: str
    options: type[Options]
    build: Callable[[str, float, Any, Any], Any]
    judges: bool = True
    levels: tuple[Literal["turn", "session"], ...] = ("turn",)
    flags: tuple[Flag, ...] = ()
    from_flags: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None
    shape_case: Callable[[Any], None] | None = None
    check_case: Callable[[Any], list[str]] | None = None

    def options_from_flags(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """The options the given flag values set (flags not given are left out)."""
        if self.from_flags is not None:
            return self.from_flags(values)
        return {flag.target: values[flag.name] for flag in self.flags if flag.name in values}


@dataclass(frozen=True)
class Backend:
    """One result backend (see the module docstring).

    ``settings`` is its block's model (its fields documented with :func:`option`, their
    variables included); ``enabled(block)`` says whether the block turns it on;
    ``writer(block, policy)`` builds the sink that writes results (a
    :class:`~otel_scorers.backends.base.ResultSink`); ``describe(block)`` is what the start
    line says of it (never a secret); ``labels(block, limit)`` reads reviewers' labels back as
    ``(cases, notes)`` for ``calibrate --cases NAME`` (``None``: it cannot).
    """

    name: str
    title: str
    settings: type[BaseModel]
    enabled: Callable[[Any], bool]
    writer: Callable[[Any, Any], Any]
    describe: Callable[[Any], str]
    labels: Callable[[Any, int], tuple[list[Any], list[str]]] | None = None


_lock = threading.RLock()
_scorers: dict[str, ScorerType] = {}
_backends: dict[str, Backend] = {}
_loaded = False
_version = 0


def canonical(name: str) -> str:
    """A type's name as the rows spell it: ``prompt-alignment`` is ``prompt_alignment``."""
    return name.strip().lower().replace("-", "_")


def _load() -> None:
    global _loaded
    if _loaded:
        return
    with _lock:
        if _loaded:
            return
        _loaded = True  # first, so that a row's module reading the registry finds it loading
        for path in BUILTIN_SCORER_TYPES + BUILTIN_BACKENDS:
            _add(_resolve(path), replace=False)
        for group in (SCORER_GROUP, BACKEND_GROUP):
            load_group(group)


def load_group(group: str) -> int:
    """Add the rows another package's entry points in ``group`` name; a plug-in that cannot be
    loaded (or clashes with a row there is) is left out with one warning, never raised: a
    broken plug-in must not take the library down. Returns the rows added."""
    added = 0
    for entry in _entry_points(group):
        try:
            _add(entry.load(), replace=False)
            added += 1
        except Exception:
            logger.warning("otel-scorers: the plug-in %s (entry point %s in %s) could not be "
                           "loaded; it is left out", entry.value, entry.name, group,
                           exc_info=True)
    return added


def _entry_points(group: str) -> list[Any]:
    from importlib.metadata import entry_points

    return list(entry_points(group=group))


def _resolve(path: str) -> Any:
    module, _, attribute = path.partition(":")
    return getattr(importlib.import_module(module), attribute)


def _add(row: Any, *, replace: bool) -> None:
    global _version
    if isinstance(row, ScorerType):
        table: dict[str, Any] = _scorers
        key = canonical(row.name)
    elif isinstance(row, Backend):
        table, key = _backends, row.name
    else:
        raise TypeError(f"a registry row is a ScorerType or a Backend, not {type(row).__name__}")
    if not key.isidentifier() or not key.islower():
        raise ValueError(f"a row's name must be a lower-case identifier, got {row.name!r}")
    with _lock:
        if key in table and table[key] is not row and not replace:
            raise ValueError(f"a row named {key!r} is registered already")
        table[key] = row
        _version += 1


def register(row: ScorerType | Backend, *, replace: bool = False) -> None:
    """Add a row (a name taken is an error unless ``replace``)."""
    _load()
    _add(row, replace=replace)


def unregister(name: str) -> None:
    """Take the rows named ``name`` out (a test's own rows, after it)."""
    global _version
    _load()
    with _lock:
        _scorers.pop(canonical(name), None)
        _backends.pop(name, None)
        _version += 1


def version() -> int:
    """Changes whenever a row is added or taken out (what is derived from the rows is
    cached against it)."""
    _load()
    return _version


def scorer_types() -> tuple[ScorerType, ...]:
    """Every scorer type, the built-in ones first."""
    _load()
    with _lock:
        return tuple(_scorers.values())


def scorer_type(name: str) -> ScorerType:
    """The row of ``name`` (either spelling); ``KeyError`` naming the types there are."""
    _load()
    row = _scorers.get(canonical(name))
    if row is None:
        raise KeyError(unknown_type(name, list(_scorers)))
    return row


def unknown_type(name: str, known: list[str]) -> str:
    """What a misspelt scorer type is told: the closest type, where one is close, and the
    types there are, once."""
    import difflib

    close = difflib.get_close_matches(canonical(name), known, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"unknown scorer type {name!r}{hint} (types: {', '.join(known)})"


def backends() -> tuple[Backend, ...]:
    """Every result backend, the built-in ones first."""
    _load()
    with _lock:
        return tuple(_backends.values())


def backend(name: str) -> Backend:
    """The row of ``name``; ``KeyError`` naming the backends there are."""
    _load()
    row = _backends.get(name)
    if row is None:
        raise KeyError(f"unknown backend {name!r} (backends: {', '.join(_backends)})")
    return row
