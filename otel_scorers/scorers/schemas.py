"""JSON Schema validation that a hostile schema or answer cannot turn against the worker.

Validated with the ``jsonschema`` library (the draft a schema's ``$schema`` names, Draft 7 and
2020-12 among them; 2020-12 when it names none), within these bounds:

- a schema of at most :data:`MAX_SCHEMA_CHARS` characters nested at most
  :data:`MAX_SCHEMA_DEPTH` deep, an instance (an answer, a tool call's arguments) of at most
  :data:`MAX_INSTANCE_CHARS`: past one, :class:`SchemaBoundError` naming the limit (the checks
  report it as an ``invalid_input`` error result, never a pass);
- no ``$ref`` is ever fetched: the registry refuses every retrieval (a remote reference is an
  error naming it); references inside the schema (``#/$defs/...``) and the drafts'
  meta-schemas resolve as usual;
- one validation takes at most :data:`VALIDATION_BUDGET_S` (the budget ``matches`` already
  has): every keyword that descends, follows a reference or compares against many values
  checks the deadline, ``pattern`` and ``patternProperties`` search with the ``regex`` module
  under the time left (a pattern with nested repeats gives up instead of backtracking for
  minutes; an anchored plain one on a short text, whose search is bounded, without the
  timeout's cost: :mod:`~otel_scorers.scorers.pattern_cost`), ``uniqueItems`` is linear (the
  library's fallback is quadratic), ``enum`` one set lookup per value (the library compares
  with every member); a ``$ref`` cycle that recurses
  without end is an error too. A validation gives up only once it has made
  :data:`MIN_CHECKS` deadline checks (or a search used :data:`MIN_SEARCH_S` at least): one
  held up by a garbage collection or a busy machine is not a slow one, and is not turned into
  an error (each check is cheap: ``enum`` a set lookup, a search bounded by its timeout).

What a failure says names its path, the keyword and the schema's value (clipped), never the
answer's value at that path: the reason lands on spans and in backends.
"""

from __future__ import annotations

import contextvars
import functools
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import regex
from jsonschema import (  # type: ignore[import-untyped]
    ValidationError,
    exceptions,
    validators,
)
from referencing import Registry
from referencing.exceptions import NoSuchResource, Unresolvable

from otel_scorers import safe_json
from otel_scorers.errors import ScorerInputError
from otel_scorers.scorers.checks import MATCH_TIMEOUT_S
from otel_scorers.scorers.pattern_cost import MAX_PLAIN_TEXT_CHARS, bounded
from otel_scorers.scorers.schema_fast import canonical, quick
from otel_scorers.scorers.steps import MAX_TOOL_SCHEMA_CHARS, SCHEMA_OVER_LIMIT

__all__ = ["MAX_INSTANCE_CHARS", "MAX_SCHEMA_CHARS", "MAX_SCHEMA_DEPTH", "VALIDATION_BUDGET_S",
           "Compiled", "SchemaBoundError", "compiled", "failures"]

#: The longest schema read (characters of its JSON), the same bound capture keeps.
MAX_SCHEMA_CHARS = MAX_TOOL_SCHEMA_CHARS
#: The deepest a schema may nest (objects and lists).
MAX_SCHEMA_DEPTH = 32
#: The longest instance validated (an answer, a tool call's arguments).
MAX_INSTANCE_CHARS = 256_000
#: The longest one validation may take (seconds): the regular-expression budget.
VALIDATION_BUDGET_S = MATCH_TIMEOUT_S
#: Failures named in a reason (the rest counted).
MAX_FAILURES_SHOWN = 3


class SchemaBoundError(ScorerInputError):
    """A schema or an instance past a bound, a schema that is not one, a reference that is not
    resolved, or a validation over its budget: not decided (``invalid_input``)."""


def _refuse(uri: str) -> Any:
    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]


#: Every retrieval refused: nothing outside the schema is ever fetched.
_REGISTRY: Registry[Any] = Registry(retrieve=_refuse)  # type: ignore[call-arg]
#: This thread's validation: its deadline and the deadline checks it made so far.
_STATE: contextvars.ContextVar[list[float]] = contextvars.ContextVar("schema_budget")
#: Deadline checks a validation makes before it may give up: a validation past its deadline
#: after fewer was held up (a garbage collection, a busy machine), not slow itself.
MIN_CHECKS = 64
#: The least time a ``pattern`` search is given (seconds), however little budget is left.
MIN_SEARCH_S = 0.02


class _OverBudget(Exception):
    pass


def _over(state: list[float]) -> bool:
    """Past the deadline, after :data:`MIN_CHECKS` checks."""
    state[1] += 1
    return state[1] >= MIN_CHECKS and time.monotonic() > state[0]


#: The keywords whose cost is not bounded by their own value: they descend into subschemas,
#: follow references or compare against every item. Only these check the deadline (the rest
#: cost a bounded step each, and a check per keyword would double the cost of validating).
_COMPOUND = frozenset({
    "$ref", "$dynamicRef", "$recursiveRef", "allOf", "anyOf", "oneOf", "not", "if",
    "dependentSchemas", "dependencies", "items", "prefixItems", "additionalItems", "contains",
    "properties", "additionalProperties", "propertyNames", "unevaluatedItems",
    "unevaluatedProperties", "enum"})


def _timed(keyword: Callable[..., Any]) -> Callable[..., Iterator[Any]]:
    def timed(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if _over(_STATE.get()):
            raise _OverBudget
        found: Iterator[Any] | None = keyword(validator, value, instance, schema)
        return found if found is not None else iter(())
    return timed


def _search(pattern: str, text: str) -> bool:
    state = _STATE.get()
    state[1] += 1  # (_over, inline: this runs once for every string a pattern checks)
    if state[1] >= MIN_CHECKS and time.monotonic() > state[0]:
        raise _OverBudget
    compiled, plain = _regex(pattern)
    if plain and len(text) <= MAX_PLAIN_TEXT_CHARS:  # bounded without a timeout (its cost)
        return compiled.search(text) is not None
    left = max(state[0] - time.monotonic(), MIN_SEARCH_S)
    try:
        found = compiled.search(text, concurrent=True, timeout=left)
    except TimeoutError:  # searched for a real share of the budget: the pattern is slow
        raise _OverBudget from None
    return found is not None


@functools.lru_cache(maxsize=256)
def _regex(pattern: str) -> tuple[Any, bool]:
    """The compiled pattern, and whether a short text's search is bounded without a timeout
    (:func:`~otel_scorers.scorers.pattern_cost.bounded`)."""
    return regex.compile(pattern, flags=regex.VERSION0), bounded(pattern)


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    if validator.is_type(instance, "string") and not _search(pattern, instance):
        yield ValidationError(f"does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Any
                        ) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not unique or not validator.is_type(instance, "array"):
        return
    seen: set[str] = set()
    state = _STATE.get()
    for index, item in enumerate(instance):
        if index % 256 == 0 and _over(state):
            raise _OverBudget
        key = canonical(item)
        if key in seen:
            yield ValidationError("has non-unique elements")
            return
        seen.add(key)


def _enum_keyword() -> Callable[..., Iterator[Any]]:
    """``enum`` in one set lookup per value (the library compares with every member: a huge
    ``enum`` over many values is their product), and a message that does not list them."""
    members: dict[int, tuple[Any, frozenset[str]]] = {}  # by the enum list's id (the schema
    # holding it lives as long as this validator)

    def enum(validator: Any, enums: Any, instance: Any, schema: Any) -> Iterator[Any]:
        known = members.get(id(enums))
        if known is None or known[0] is not enums:
            known = (enums, frozenset(canonical(member) for member in enums))
            members[id(enums)] = known
        if canonical(instance) not in known[1]:
            yield ValidationError("is not one of the enum's values")
    return enum


def _depth(value: Any, limit: int) -> bool:
    """Whether ``value`` nests at most ``limit`` deep (iterative: no recursion to exhaust)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return False
            stack.extend((inner, depth + 1)
                         for inner in (item.values() if isinstance(item, dict) else item))
    return True


#: The drafts whose keywords the quick checker reads as they mean (not Draft 4's or 6's).
_QUICK_DRAFTS = frozenset({"Draft7Validator", "Draft201909Validator", "Draft202012Validator"})


@dataclass(frozen=True)
class Compiled:
    """A schema's validator (the library's, bounded) and its quick checker, when it has one
    (:mod:`~otel_scorers.scorers.schema_fast`: a quick yes, the library asked otherwise)."""

    validator: Any
    quick: Callable[[Any], bool] | None
    #: whether the quick checker may search a pattern (only then is the budget set for it)
    searches: bool = True


@functools.lru_cache(maxsize=64)
def compiled(schema_text: str) -> Compiled:
    """A validator for the schema ``schema_text`` (JSON text), within the bounds above;
    :class:`SchemaBoundError` for one past them or one that is not a schema."""
    size = (int(schema_text[len(SCHEMA_OVER_LIMIT):]) if schema_text.startswith(SCHEMA_OVER_LIMIT)
            else len(schema_text))
    if size > MAX_SCHEMA_CHARS:
        raise SchemaBoundError(f"the schema has {size} characters, over the limit of "
                               f"{MAX_SCHEMA_CHARS} (MAX_SCHEMA_CHARS)")
    try:
        schema = safe_json.loads(schema_text)
    except ValueError as exc:
        raise SchemaBoundError(f"the schema is not JSON: {exc}") from None
    if not isinstance(schema, dict | bool):
        raise SchemaBoundError("the schema is not a JSON object")
    if not _depth(schema, MAX_SCHEMA_DEPTH):
        raise SchemaBoundError(f"the schema nests deeper than the limit of {MAX_SCHEMA_DEPTH} "
                               "(MAX_SCHEMA_DEPTH)")
    base = validators.validator_for(schema, default=validators.Draft202012Validator)
    try:
        base.check_schema(schema)
    except exceptions.SchemaError as exc:
        where = "/".join(str(part) for part in exc.path) or "the root"
        raise SchemaBoundError(f"not a valid {base.__name__.removesuffix('Validator')} schema "
                               f"(at {where[:80]}: {exc.validator} {_clip(exc.validator_value)})"
                               ) from None
    keywords = {name: _timed(keyword) for name, keyword in base.VALIDATORS.items()
                if name in _COMPOUND}
    keywords.update(pattern=_timed(_pattern), patternProperties=_timed(_pattern_properties),
                    uniqueItems=_timed(_unique_items), enum=_timed(_enum_keyword()))
    fast = quick(schema, _search) if base.__name__ in _QUICK_DRAFTS else None
    return Compiled(validators.extend(base, keywords)(schema, registry=_REGISTRY), fast,
                    _holds_pattern(schema))


def _holds_pattern(schema: Any) -> bool:
    """Whether ``pattern`` is a key anywhere in ``schema`` (a property so named too)."""
    stack = [schema]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if "pattern" in item:
                return True
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def failures(schema: Compiled, instance: Any) -> list[str]:
    """Where ``instance`` fails the schema (each failing path, at most
    :data:`MAX_FAILURES_SHOWN`, then how many more), empty when it validates;
    :class:`SchemaBoundError` when it cannot be decided within the bounds."""
    fast = schema.quick
    if fast is not None and not schema.searches:  # (no search: the value's size bounds it)
        if fast(instance):
            return []
        fast = None
    token = _STATE.set([time.monotonic() + VALIDATION_BUDGET_S, 0.0])
    try:
        if fast is not None and fast(instance):
            return []
        found = []
        for error in schema.validator.iter_errors(instance):
            found.append(error)
            if len(found) > 50:
                break
    except _OverBudget:
        raise SchemaBoundError(f"validation gave up after {VALIDATION_BUDGET_S:g} s (the "
                               "budget, VALIDATION_BUDGET_S): the schema's patterns or size "
                               "make it too slow for this value") from None
    except Unresolvable as exc:
        ref = str(getattr(exc, "ref", "") or exc)[:120]
        raise SchemaBoundError(f"the schema's $ref {ref!r} is not resolved (references are "
                               "never fetched: inline it under $defs)") from None
    except RecursionError:
        raise SchemaBoundError("the schema refers to itself without end ($ref cycle)") from None
    finally:
        _STATE.reset(token)
    shown = [_described(error) for error in sorted(found, key=_at)[:MAX_FAILURES_SHOWN]]
    more = len(found) - len(shown)
    return shown + ([f"and {more}{'+' if len(found) > 50 else ''} more"] if more > 0 else [])


def _at(error: ValidationError) -> tuple[str, ...]:
    return tuple(str(part) for part in error.absolute_path)


def _described(error: ValidationError) -> str:
    """``$.items[2].city: type 'string'``: the path, the keyword and the schema's value."""
    path = "$" + "".join(f"[{part}]" if isinstance(part, int) else f".{part}"
                         for part in error.absolute_path)
    keyword = str(error.validator)
    if keyword == "required":  # say which property is missing (a name from the schema)
        missing = error.message.split(" is a required property")[0]
        return f"{path[:80]}: required {missing[:60]}"
    if keyword in ("additionalProperties", "unevaluatedProperties", "const", "enum"):
        return f"{path[:80]}: {keyword}"
    return f"{path[:80]}: {keyword} {_clip(error.validator_value)}"


def _clip(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= limit else text[:limit] + "..."
