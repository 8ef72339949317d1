"""The quick checks beyond :mod:`otel_scorers.scorers.checks` as rows: each check one
:class:`CheckRow` (its text name, how it is built from its argument, how it decides a run),
kept in the module of its family and named here by import path, loaded on first use.

``parse_check`` and :class:`~otel_scorers.scorers.checks.Check` look here for a name or a kind
their own table does not hold, so a new check is a row in a family module (structure, limits,
personal data), never a line in the module that holds the first checks. Another package (or a
test) adds one with :func:`register`.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["BUILTIN_CHECK_ROWS", "CheckRow", "builder", "names", "register", "test"]

#: The built-in families, by import path (``module:attribute``, a tuple of rows).
BUILTIN_CHECK_ROWS = (
    "otel_scorers.scorers.structure:ROWS",
    "otel_scorers.scorers.limits:ROWS",
    "otel_scorers.scorers.personal:ROWS",
)


@dataclass(frozen=True)
class CheckRow:
    """One check: ``name`` as written (``json_schema declared``: the name, then the argument),
    ``build(argument)`` the :class:`Check` (a :class:`~otel_scorers.errors.ConfigError` for a bad
    argument), ``test(run, *args)`` its verdict, ``aliases`` other spellings (no underscores)."""

    name: str
    build: Callable[[str], Any]  # (a Check: this module imports nothing of checks)
    test: Callable[..., Any]
    aliases: tuple[str, ...] = ()


_rows: dict[str, CheckRow] = {}
_spellings: dict[str, str] = {}
_lock = threading.Lock()
_loaded = False


def _load() -> None:
    global _loaded
    if _loaded:
        return
    with _lock:
        if _loaded:
            return
        for path in BUILTIN_CHECK_ROWS:
            module, _, attribute = path.partition(":")
            for row in getattr(importlib.import_module(module), attribute):
                _add(row)
        _loaded = True


def _add(row: CheckRow) -> None:
    _rows[row.name] = row
    for spelling in (row.name, row.name.replace("_", ""), *row.aliases):
        _spellings[spelling] = row.name


def register(row: CheckRow) -> None:
    """Add (or replace) a check row."""
    _load()
    with _lock:
        _add(row)


def builder(key: str) -> Callable[[str], Any] | None:
    """How the check written ``key`` (lower case) is built, or ``None`` for no such check."""
    _load()
    name = _spellings.get(key, _spellings.get(key.replace("_", "")))
    return _rows[name].build if name is not None else None


def test(kind: str) -> Callable[..., Any]:
    """How a check of ``kind`` (a row's name) decides a run."""
    _load()
    return _rows[kind].test


def names() -> tuple[str, ...]:
    """The rows' names, in the order they were added."""
    _load()
    return tuple(_rows)
