"""Which ended spans are agent runs worth scoring.

By default: GenAI ``gen_ai.operation.name = invoke_agent``, OpenInference
``openinference.span.kind = AGENT``, Traceloop ``traceloop.span.kind = agent | workflow`` and
Mastra agent runs (``mastra.span.type = agent_run``). Options add LLM ``chat`` spans, span-name
patterns (shell-style globs), attribute predicates (all must hold; a list value means
membership) and a callable; any matching rule selects. ``agents`` then restricts selection to
the named agents. Bad options raise :class:`ConfigError` at construction.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from otel_scorers.capture import agent_name
from otel_scorers.capture.conventions import AGENT_NAME_KEYS
from otel_scorers.errors import ConfigError

__all__ = ["Selection", "Selector", "is_agent_run"]

_LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
_CONVENTION_KEYS = ("gen_ai.operation.name", "openinference.span.kind", "traceloop.span.kind",
                    "mastra.span.type", "llm.request.type")
_PRIMITIVES = (str, bool, int, float)


@dataclass(frozen=True)
class Selection:
    """Options for choosing the spans to score (see the module docstring)."""

    agent_conventions: bool = True
    include_llm_spans: bool = False
    span_names: Sequence[str] = ()
    attributes: Mapping[str, Any] = field(default_factory=dict)
    agents: Sequence[str] = ()
    predicate: Callable[[ReadableSpan], bool] | None = None


_OTHER_CONVENTION_KEYS = frozenset(_CONVENTION_KEYS[1:4])
_AGENT_OPERATIONS = ("invoke_agent", "agent.run")


def is_agent_run(attrs: Mapping[str, Any]) -> bool:
    """An agent-run span by one of the conventions (on the hot path: a GenAI span that is not
    an agent run returns after one lookup and one set test)."""
    operation = attrs.get("gen_ai.operation.name")
    if operation is not None:
        if operation in _AGENT_OPERATIONS:
            return True
        if _OTHER_CONVENTION_KEYS.isdisjoint(attrs):
            return False
    if attrs.get("openinference.span.kind") == "AGENT":
        return True
    if attrs.get("traceloop.span.kind") in ("agent", "workflow"):
        return True
    return attrs.get("mastra.span.type") == "agent_run"


def _anything(_attrs: Mapping[str, Any]) -> bool:
    return True


def is_llm_call(attrs: Mapping[str, Any]) -> bool:
    return (attrs.get("gen_ai.operation.name") in _LLM_OPERATIONS
            or attrs.get("openinference.span.kind") == "LLM"
            or attrs.get("llm.request.type") == "chat")


class Selector:
    """A compiled :class:`Selection`; ``matches`` runs on the hot path."""

    def __init__(self, selection: Selection | None = None) -> None:
        self.selection = selection = selection or Selection()
        if isinstance(selection.span_names, str) or isinstance(selection.agents, str):
            raise ConfigError("span_names and agents are lists of strings, not a string")
        try:
            patterns = [fnmatch.translate(p) for p in selection.span_names]
            self._names = re.compile("|".join(patterns)) if patterns else None
        except (TypeError, re.error) as exc:
            raise ConfigError(f"invalid span name pattern: {exc}") from exc
        self._attributes: list[tuple[str, frozenset[Any] | Any, bool]] = []
        for key, value in selection.attributes.items():
            if isinstance(value, list | tuple | set | frozenset):
                if not all(isinstance(v, _PRIMITIVES) for v in value):
                    raise ConfigError(f"attribute predicate {key!r}: values must be primitives")
                self._attributes.append((key, frozenset(value), True))
            elif isinstance(value, _PRIMITIVES):
                self._attributes.append((key, value, False))
            else:
                raise ConfigError(f"attribute predicate {key!r}: unsupported value {value!r}")
        if not all(isinstance(a, str) and a for a in selection.agents):
            raise ConfigError("agents must be non-empty strings")
        self._agents = frozenset(selection.agents)
        if selection.predicate is not None and not callable(selection.predicate):
            raise ConfigError("predicate must be callable")
        if not (selection.agent_conventions or selection.include_llm_spans or self._names
                or self._attributes or selection.predicate):
            raise ConfigError("selection matches nothing: enable a convention or give a rule")
        #: Attribute keys every rule looks at: a span with none of them can only be selected
        #: by a name pattern or a predicate.
        self.keys = frozenset({*_CONVENTION_KEYS, *selection.attributes,
                               *(AGENT_NAME_KEYS if self._agents else ())})
        #: A cheap necessary condition for :meth:`matches`, for the hot path: ``False`` means
        #: the span cannot be selected. With only the agent-run conventions (the default),
        #: ``is_agent_run`` decides alone; without name patterns or a predicate, a span needs
        #: one of :attr:`keys`; otherwise anything may match.
        self.could_match: Callable[[Mapping[str, Any]], bool]
        #: :attr:`keys` when :attr:`could_match` needs one of them, else ``None``
        self.could_match_keys: frozenset[str] | None = self.keys
        #: ``gen_ai.operation.name`` values that alone make a span a possible run, for the hot
        #: path's first test; :attr:`could_match_keys` then leaves that key out (default
        #: conventions only: an ``invoke_agent`` span is a possible run, a ``chat`` span needs
        #: another convention's key to be one)
        self.run_operations: tuple[str, ...] = ()
        keys = self.keys
        if self._names is not None or selection.predicate is not None:
            self.could_match = _anything
            self.could_match_keys = None
        elif (selection.agent_conventions and not selection.include_llm_spans
              and not self._attributes and not self._agents):
            self.could_match = is_agent_run
            self.run_operations = _AGENT_OPERATIONS
            self.could_match_keys = keys - {"gen_ai.operation.name"}
        else:
            self.could_match = lambda attrs: not keys.isdisjoint(attrs)

    def matches(self, span: ReadableSpan, attrs: Mapping[str, Any] | None = None) -> bool:
        """True when ``span`` is a run to score. A failing predicate is an error for the caller.

        ``attrs`` is ``span.attributes`` when the caller already has it (each access of the SDK
        property builds a new view).
        """
        if attrs is None:
            attrs = span.attributes or {}
        selection = self.selection
        chosen = (
            (selection.agent_conventions and is_agent_run(attrs))
            or (selection.include_llm_spans and is_llm_call(attrs))
            or (self._names is not None and self._names.match(span.name) is not None)
            or (bool(self._attributes) and self._attributes_hold(attrs))
            or (selection.predicate is not None and bool(selection.predicate(span)))
        )
        if not chosen:
            return False
        return not self._agents or agent_name(span, attributes=attrs) in self._agents

    def _attributes_hold(self, attrs: Mapping[str, Any]) -> bool:
        for key, expected, membership in self._attributes:
            value = attrs.get(key)
            if membership:
                if value not in expected:
                    return False
            elif value != expected:
                return False
        return True
