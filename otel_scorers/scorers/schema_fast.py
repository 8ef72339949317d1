"""A quick yes for the common JSON schemas: a checker compiled once per schema that says
whether a value is valid for the keywords tool parameters and response formats mostly use, so
that ``jsonschema`` (about 35 us for a small object, pure Python) is asked only for a value the
checker does not pass.

The checker only ever answers "valid" or "ask the library": ``False`` is never a verdict. A
schema with any keyword outside :data:`SUPPORTED` (or :data:`IGNORED`, annotations and
containers that do not apply) anywhere in it, or of a draft before 7, gets no checker at all.
So the library still decides every failure and its reasons, and every schema it alone
understands; ``tests/scorers/test_structure_checks.py`` checks the two agree on thousands of
values. The equality of ``enum`` and ``const`` is JSON Schema's (``1 == 1.0``, ``true != 1``,
key order ignored), through :func:`canonical`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

__all__ = ["IGNORED", "SUPPORTED", "canonical", "quick"]

Check = Callable[[Any], bool]

SUPPORTED = frozenset({
    "type", "properties", "required", "additionalProperties", "items", "enum", "const",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength",
    "minItems", "maxItems", "minProperties", "maxProperties", "pattern"})
IGNORED = frozenset({"title", "description", "default", "examples", "$comment", "deprecated",
                     "readOnly", "writeOnly", "$schema", "$id", "format", "$defs",
                     "definitions"})


def canonical(value: Any) -> str:
    """A JSON value's text with key order ignored and 1.0 written as 1 (JSON Schema equality;
    ``true`` stays apart from ``1``)."""
    def norm(item: Any) -> Any:
        if isinstance(item, float) and item.is_integer():
            return int(item)
        if isinstance(item, dict):
            return {key: norm(inner) for key, inner in item.items()}
        if isinstance(item, list):
            return [norm(inner) for inner in item]
        return item
    return json.dumps(norm(value), sort_keys=True)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


_TYPES: dict[str, Check] = {
    "object": lambda v: isinstance(v, dict), "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str), "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None, "number": _number,
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool))
    or (isinstance(v, float) and v.is_integer()),
}


class _Unsupported(Exception):
    pass


def quick(schema: Any, search: Callable[[str, str], bool]) -> Check | None:
    """The checker of ``schema`` (``search(pattern, text)`` decides ``pattern`` under the
    caller's budget), or ``None`` when the schema holds a keyword it does not know."""
    try:
        return _compile(schema, search)
    except _Unsupported:
        return None


def _compile(schema: Any, search: Callable[[str, str], bool]) -> Check:
    if schema is True or schema == {}:
        return lambda value: True
    if not isinstance(schema, dict) or set(schema) - SUPPORTED - IGNORED:
        raise _Unsupported
    tests = tuple(_keyword(key, value, schema, search) for key, value in schema.items()
                  if key in SUPPORTED)
    if len(tests) == 1:
        return tests[0]

    def every(value: Any) -> bool:  # (a loop: all() over a generator costs twice as much)
        for test in tests:  # noqa: SIM110
            if not test(value):
                return False
        return True
    return every


def _keyword(key: str, value: Any, schema: dict[str, Any],
             search: Callable[[str, str], bool]) -> Check:
    if key == "type":
        names = value if isinstance(value, list) else [value]
        if not names or any(not isinstance(n, str) or n not in _TYPES for n in names):
            raise _Unsupported
        kinds = [_TYPES[name] for name in names]
        if len(kinds) == 1:
            return kinds[0]
        return lambda v: any(kind(v) for kind in kinds)
    if key == "properties":
        if not isinstance(value, dict):
            raise _Unsupported
        subs = tuple((name, _compile(sub, search)) for name, sub in value.items())

        def properties(v: Any) -> bool:
            if isinstance(v, dict):
                for name, sub in subs:
                    if name in v and not sub(v[name]):
                        return False
            return True
        return properties
    if key == "required":
        if not isinstance(value, list):
            raise _Unsupported
        return lambda v: not isinstance(v, dict) or all(name in v for name in value)
    if key == "additionalProperties":
        known = set(schema.get("properties") or {})
        extra = _compile(value, search) if value is not False else None
        return lambda v: not isinstance(v, dict) or all(
            extra is not None and extra(item) for name, item in v.items() if name not in known)
    if key == "items":
        if not isinstance(value, dict | bool):
            raise _Unsupported  # (a list: Draft 7's tuple form)
        sub = _compile(value, search) if value is not False else None

        def items(v: Any) -> bool:
            if not isinstance(v, list):
                return True
            if sub is None:
                return not v
            for item in v:  # noqa: SIM110
                if not sub(item):
                    return False
            return True
        return items
    if key in ("enum", "const"):
        members = frozenset(canonical(m) for m in (value if key == "enum" else [value]))
        return lambda v: canonical(v) in members
    if key == "pattern":
        return lambda v: not isinstance(v, str) or search(value, v)
    return _bound(key, value)


def _same(value: Any) -> Any:
    return value  # (a number compared as it is: an integer past a float's range stays exact)


_BOUNDS: dict[str, tuple[Check, Callable[[Any], Any], Callable[[Any, Any], bool]]] = {
    "minimum": (_number, _same, lambda got, b: got >= b),
    "maximum": (_number, _same, lambda got, b: got <= b),
    "exclusiveMinimum": (_number, _same, lambda got, b: got > b),
    "exclusiveMaximum": (_number, _same, lambda got, b: got < b),
    "minLength": (lambda v: isinstance(v, str), len, lambda got, b: got >= b),
    "maxLength": (lambda v: isinstance(v, str), len, lambda got, b: got <= b),
    "minItems": (lambda v: isinstance(v, list), len, lambda got, b: got >= b),
    "maxItems": (lambda v: isinstance(v, list), len, lambda got, b: got <= b),
    "minProperties": (lambda v: isinstance(v, dict), len, lambda got, b: got >= b),
    "maxProperties": (lambda v: isinstance(v, dict), len, lambda got, b: got <= b),
}


def _bound(key: str, bound: Any) -> Check:
    if not _number(bound):
        raise _Unsupported  # (Draft 4's boolean exclusiveMinimum: the library's)
    applies, measure, holds = _BOUNDS[key]
    return lambda v: not applies(v) or holds(measure(v), bound)
