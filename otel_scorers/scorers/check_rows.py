"""The quick checks beyond :mod:`otel_scorers.scorers.checks` as rows: each check one
:class:`CheckRow` (its text name, how it is built from its argument, how it decides a run),
kept in the module of its family and named here by import path, loaded on first use.

``parse_check`` and :class:`~otel_scorers.scorers.checks.Check` look here for a name or a kind
their own table does not hold, so a new check is a row in a family module (structure, limits,
personal data), never a line in the module that holds the first checks. Another package (or a
test) adds one with :func:`register`.

The checks of one decision share what more than one of them derives from the run (the answer
read as JSON: ``json`` and ``json_schema``) through :func:`shared`, kept only while that
decision lasts (:func:`sharing`): a run held in a queue does not hold its parsed answer too.
"""

from __future__ import annotations

import contextvars
import importlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = ["BUILTIN_CHECK_ROWS", "CheckRow", "builder", "done_sharing", "names", "register",
           "shared", "sharing", "test"]

T = TypeVar("T")

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
    if not _loaded:
        _load()
    return _rows[kind].test


def names() -> tuple[str, ...]:
    """The rows' names, in the order they were added."""
    _load()
    return tuple(_rows)


#: What the checks deciding one run share: the run, and its derived values by key.
_SHARED: contextvars.ContextVar[tuple[object, dict[str, Any]] | None] = contextvars.ContextVar(
    "check_rows_shared", default=None)


def sharing(run: object) -> contextvars.Token[tuple[object, dict[str, Any]] | None]:
    """Start sharing derived values among the checks of ``run`` in this context, until
    :func:`done_sharing` is given the token."""
    return _SHARED.set((run, {}))


def done_sharing(token: contextvars.Token[tuple[object, dict[str, Any]] | None]) -> None:
    _SHARED.reset(token)


def shared(run: object, key: str, make: Callable[[], T]) -> T:
    """``make()``, made once for ``run`` while its checks share (see :func:`sharing`), else
    made at each call."""
    scope = _SHARED.get()
    if scope is None or scope[0] is not run:
        return make()
    memo = scope[1]
    if key not in memo:
        memo[key] = make()
    made: T = memo[key]
    return made
