"""A quick yes for the common JSON schemas: a checker compiled once per schema that says
whether a value is valid for the keywords tool parameters and response formats mostly use, so
that ``jsonschema`` (about 35 us for a small object, pure Python) is asked only for a value the
checker does not pass.

The checker only ever answers "valid" or "ask the library": ``False`` is never a verdict. A
schema with any keyword outside :data:`SUPPORTED` (or :data:`IGNORED`, annotations and
containers that do not apply) anywhere in it, or of a draft before 7, gets no checker at all;
a value of a type ``json.loads`` does not make (a tuple, a subclass of ``dict``) is left to the
library. So the library still decides every failure and its reasons, and every schema it alone
understands; ``tests/scorers/test_structure_checks.py`` checks the two agree on thousands of
values. The equality of ``enum`` and ``const`` is JSON Schema's (``1 == 1.0``, ``true != 1``,
key order ignored), through :func:`canonical`.

Each subschema compiles to one function that tests the value's exact type once and then only
the keywords for that type (an object's ``required`` and ``additionalProperties: false`` as set
operations), rather than one function per keyword: a tool call's arguments are checked in about
a microsecond.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

__all__ = ["IGNORED", "SUPPORTED", "canonical", "quick"]

Check = Callable[[Any], bool]
Search = Callable[[str, str], bool]

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


#: The Python types ``json.loads`` makes, by the JSON type each stands for (``bool`` apart from
#: ``int``: ``true`` is no number).
_NONE = type(None)
_TYPES: dict[str, frozenset[type]] = {
    "object": frozenset({dict}), "array": frozenset({list}), "string": frozenset({str}),
    "boolean": frozenset({bool}), "null": frozenset({_NONE}),
    "number": frozenset({int, float}), "integer": frozenset({int}),
}
_JSON_TYPES = frozenset({dict, list, str, bool, _NONE, int, float})


class _Unsupported(Exception):
    pass


def quick(schema: Any, search: Search) -> Check | None:
    """The checker of ``schema`` (``search(pattern, text)`` decides ``pattern`` under the
    caller's budget), or ``None`` when the schema holds a keyword it does not know."""
    try:
        return _compile(schema, search)
    except _Unsupported:
        return None


def _yes(value: Any) -> bool:
    return True


#: A type's keywords, compiled: ``make(exact)`` is their checker of a value of that type
#: (``exact``: one that tests the exact type first, so a schema of one ``type`` costs one call
#: per value; else ``None`` when no keyword applies).
Part = Callable[[bool], "Check | None"]


def _compile(schema: Any, search: Search) -> Check:
    if schema is True or schema == {}:
        return _yes
    if not isinstance(schema, dict) or set(schema) - SUPPORTED - IGNORED:
        raise _Unsupported
    allowed, integral = _types(schema)
    if not isinstance(schema.get("enum", []), list):
        raise _Unsupported
    members = tuple(frozenset(canonical(m) for m in values) for values in (
        schema.get("enum"), [schema["const"]] if "const" in schema else None)
        if values is not None)
    makers: dict[type, Part] = {dict: _object(schema, search), list: _array(schema, search),
                                str: _string(schema, search), int: _numbers(schema, integral),
                                bool: _exactly(bool), _NONE: _exactly(_NONE)}
    if allowed is not None and not members and len(allowed - {float}) == 1:
        # one type (``number`` and ``integer`` are int's, floats included): the common case
        made = makers[next(iter(allowed - {float}))](True)
        assert made is not None  # (an exact checker always tests the type)
        return made
    parts = {kind: make(False) for kind, make in makers.items()}
    parts[float] = parts[int]
    if allowed is None and not members and not any(parts.values()):
        return _yes

    def check(value: Any) -> bool:
        kind = type(value)
        if kind not in _JSON_TYPES:
            return False  # (not a JSON value as json.loads makes them: the library's)
        if allowed is not None and kind not in allowed and not (
                integral and kind is float and value.is_integer()):
            return False
        if members:
            text = canonical(value)
            for same in members:
                if text not in same:
                    return False
        part = parts[kind]
        return part is None or part(value)
    return check


def _exactly(kind: type) -> Part:
    return lambda exact: (lambda value: type(value) is kind) if exact else None


def _types(schema: dict[str, Any]) -> tuple[frozenset[type] | None, bool]:
    """The exact types ``type`` allows (``None``: any), and whether a float with no fraction
    counts as an integer (``integer`` without ``number``)."""
    if "type" not in schema:
        return None, False
    names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    if not names or any(not isinstance(n, str) or n not in _TYPES for n in names):
        raise _Unsupported
    allowed = frozenset().union(*(_TYPES[name] for name in names))
    return allowed, "integer" in names and "number" not in names


def _bound(schema: dict[str, Any], key: str) -> Any:
    """A numeric bound, ``None`` when absent (a boolean one, Draft 4's ``exclusiveMinimum``,
    is the library's)."""
    value = schema.get(key)
    if value is not None and (not isinstance(value, int | float) or isinstance(value, bool)):
        raise _Unsupported
    return value


def _sizes(schema: dict[str, Any], least: str, most: str) -> Callable[[int], bool] | None:
    """The test of a size between the bounds ``least`` and ``most`` (``None``: neither)."""
    low, high = _bound(schema, least), _bound(schema, most)
    if low is None and high is None:
        return None
    return lambda size: (low is None or size >= low) and (high is None or size <= high)


def _object(schema: dict[str, Any], search: Search) -> Part:
    props = schema.get("properties", {})
    required = schema.get("required", [])
    if not isinstance(props, dict) or not isinstance(required, list) or any(
            not isinstance(name, str) for name in required):
        raise _Unsupported
    subs = tuple((name, sub) for name, sub in
                 ((name, _compile(sub, search)) for name, sub in props.items()) if sub is not _yes)
    needed = frozenset(required)
    known = frozenset(props)
    extra = schema.get("additionalProperties", True)
    closed = extra is False
    others = None if closed or extra is True else _compile(extra, search)
    others = None if others is _yes else others
    sized = _sizes(schema, "minProperties", "maxProperties")
    if not (subs or needed or closed or others or sized):
        return _exactly(dict)

    def make(exact: bool) -> Check:
        def check(value: dict[str, Any]) -> bool:
            if exact and type(value) is not dict:
                return False
            if needed and not value.keys() >= needed:
                return False
            if closed and not known.issuperset(value):
                return False
            for name, sub in subs:
                if name in value and not sub(value[name]):
                    return False
            if others is not None:
                for name, item in value.items():
                    if name not in known and not others(item):
                        return False
            return sized is None or sized(len(value))
        return check
    return make


def _array(schema: dict[str, Any], search: Search) -> Part:
    items = schema.get("items", True)
    if not isinstance(items, dict | bool):
        raise _Unsupported  # (a list: Draft 7's tuple form)
    sub = _compile(items, search) if items is not False else None
    sized = _sizes(schema, "minItems", "maxItems")
    if sub is _yes and sized is None:
        return _exactly(list)

    def make(exact: bool) -> Check:
        def check(value: list[Any]) -> bool:
            if exact and type(value) is not list:
                return False
            if sub is None:
                if value:
                    return False
            elif sub is not _yes:
                for item in value:
                    if not sub(item):
                        return False
            return sized is None or sized(len(value))
        return check
    return make


def _string(schema: dict[str, Any], search: Search) -> Part:
    sized = _sizes(schema, "minLength", "maxLength")
    pattern = schema.get("pattern")
    if pattern is not None and not isinstance(pattern, str):
        raise _Unsupported
    if pattern is None and sized is None:
        return _exactly(str)
    matches = functools.partial(search, pattern) if pattern is not None else _yes

    def make(exact: bool) -> Check:
        def check(value: str) -> bool:
            return ((not exact or type(value) is str) and (sized is None or sized(len(value)))
                    and matches(value))
        return check
    return make


def _numbers(schema: dict[str, Any], integral: bool) -> Part:
    """``integral``: an exact checker takes an int, or a float with no fraction (``integer``);
    else an int or any float (``number``)."""
    low, high = _bound(schema, "minimum"), _bound(schema, "maximum")
    above, below = _bound(schema, "exclusiveMinimum"), _bound(schema, "exclusiveMaximum")
    bounded = not (low is None and high is None and above is None and below is None)

    def make(exact: bool) -> Check | None:
        if not exact and not bounded:
            return None

        def check(value: Any) -> bool:  # (compared as it is: an integer past a float's range
            # stays exact)
            if exact:
                kind = type(value)
                if kind is not int and (kind is not float or (integral and not value.is_integer())):
                    return False
            return ((low is None or value >= low) and (high is None or value <= high)
                    and (above is None or value > above) and (below is None or value < below))
        return check
    return make
