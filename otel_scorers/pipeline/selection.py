"""Which ended spans may be interactions worth scoring.

By default the agent-run conventions (GenAI ``invoke_agent``, OpenInference ``AGENT``,
Traceloop ``agent``, Mastra ``agent_run``) and the workflow / chain conventions (GenAI
``invoke_workflow``, OpenInference ``CHAIN``, Traceloop ``workflow`` / ``task``, Mastra
``workflow_run``) mark *candidates*; the topmost candidate of each part of a trace is the
interaction (:mod:`otel_scorers.capture.interactions`). Options add LLM ``chat`` spans,
span-name patterns (shell-style globs), attribute predicates (all must hold; a list value
means membership) and a callable; spans they select are candidates like agent runs.
``agents`` then keeps the interactions of the named agents. ``per_agent`` restores per-agent
evaluation: every agent-run span is judged on its own, on the LLM calls it owns. Bad options
raise :class:`ConfigError` at construction.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from otel_scorers import names as n
from otel_scorers.capture import agent_name
from otel_scorers.capture.conventions import AGENT_NAME_KEYS
from otel_scorers.capture.kinds import AGENT, CHAIN, KIND_KEYS, LLM, span_kind
from otel_scorers.capture.trace import CONTENT_KEY_SET
from otel_scorers.errors import ConfigError

__all__ = ["ANY_KEY", "AnyKey", "Selection", "Selector", "is_llm_call", "is_own"]

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
    per_agent: bool = False


def _anything(_attrs: Mapping[str, Any], _kind: str | None) -> bool:
    return True


class AnyKey:
    """:attr:`Selector.watched` where any span may be a run (a name pattern, a predicate):
    shares a key with every span, so ``on_end`` asks the same one question either way."""

    def isdisjoint(self, _keys: Iterable[str]) -> bool:
        return False

    def __repr__(self) -> str:
        return "ANY_KEY"


ANY_KEY = AnyKey()


def is_own(span: ReadableSpan) -> bool:
    """Spans this library emitted (evaluation spans): never selected, never buffered."""
    scope = span.instrumentation_scope
    return scope is not None and scope.name == n.SCOPE_NAME


def is_llm_call(attrs: Mapping[str, Any]) -> bool:
    return (attrs.get("gen_ai.operation.name") in _LLM_OPERATIONS
            or attrs.get("openinference.span.kind") == "LLM"
            or attrs.get("llm.request.type") == "chat")


#: Agent names the ``agents`` filter remembers having turned away (for its one warning).
MAX_TURNED_AWAY = 10


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
        #: the ``agents`` filter: whether it kept anything yet, and the agents it turned away
        #: (bounded; an interaction without a name by its span's name)
        self.filter_matched = False
        self.turned_away: dict[str, None] = {}
        if selection.predicate is not None and not callable(selection.predicate):
            raise ConfigError("predicate must be callable")
        if not (selection.agent_conventions or selection.include_llm_spans or self._names
                or self._attributes or selection.predicate):
            raise ConfigError("selection matches nothing: enable a convention or give a rule")
        #: Attribute keys every rule looks at: a span with none of them can only be selected
        #: by a name pattern or a predicate.
        self.keys = frozenset({*_CONVENTION_KEYS, *KIND_KEYS, *selection.attributes,
                               *(AGENT_NAME_KEYS if self._agents else ())})
        #: The convention kinds that make a span a candidate.
        self.candidate_kinds = frozenset(
            ({AGENT} if selection.per_agent else {AGENT, CHAIN})
            if selection.agent_conventions else ())
        #: A cheap necessary condition for :meth:`kind_of`, for the hot path: given the
        #: attributes and their :func:`span_kind`, ``False`` means the span cannot be a
        #: candidate. With only the conventions (the default) the kind decides alone; without
        #: name patterns or a predicate a span needs one of :attr:`keys`; otherwise anything
        #: may match.
        self.could_match: Callable[[Mapping[str, Any], str | None], bool]
        #: :attr:`keys` when :attr:`could_match` needs one of them, else ``None``
        self.could_match_keys: frozenset[str] | None = self.keys
        keys, kinds = self.keys, self.candidate_kinds
        if self._names is not None or selection.predicate is not None:
            self.could_match = _anything
            self.could_match_keys = None
        elif not selection.include_llm_spans and not self._attributes and not self._agents:
            self.could_match = lambda _attrs, kind: kind in kinds
        else:
            self.could_match = lambda attrs, _kind: not keys.isdisjoint(attrs)
        #: ``on_end``'s first test: a span with none of these keys is neither a possible run
        #: nor a piece of one (:data:`ANY_KEY`: any span may be a run, by name pattern or
        #: predicate); tests/pipeline/test_shortcuts.py proves it a necessary condition
        self.watched: frozenset[str] | AnyKey = (
            ANY_KEY if self.could_match_keys is None
            else self.could_match_keys | CONTENT_KEY_SET | KIND_KEYS)

    def kind_of(self, span: ReadableSpan, attrs: Mapping[str, Any] | None = None) -> str | None:
        """What ``span`` is a candidate as (``agent``, ``chain`` or ``llm``), or ``None``. A
        failing predicate is an error for the caller. Per-agent, the ``agents`` filter applies
        here; otherwise to whole interactions (:meth:`keeps`)."""
        if attrs is None:
            attrs = span.attributes or {}
        selection = self.selection
        kind = span_kind(attrs)
        chosen: str | None = kind if kind in self.candidate_kinds else None
        if chosen is None and selection.include_llm_spans and is_llm_call(attrs):
            chosen = LLM
        if chosen is None and (
                (self._names is not None and self._names.match(span.name) is not None)
                or (bool(self._attributes) and self._attributes_hold(attrs))
                or (selection.predicate is not None and bool(selection.predicate(span)))):
            chosen = AGENT
        if chosen is not None and selection.per_agent and self._agents:
            name = agent_name(span, attributes=attrs)
            if name in self._agents:
                self.filter_matched = True
                return chosen
            self._turn_away({name} if name else set(), span.name)
            return None
        return chosen

    @property
    def filters_agents(self) -> bool:
        """Whether an ``agents`` filter is set (else :meth:`keeps` keeps every interaction,
        and its agents need not be named)."""
        return bool(self._agents)

    def keeps(self, agents: set[str], span_name: str = "") -> bool:
        """Whether an interaction whose agents are ``agents`` (its root span named
        ``span_name``) passes the ``agents`` filter; what it turns away is noted for
        :meth:`filter_warning`."""
        if not self._agents:
            return True
        if not self._agents.isdisjoint(agents):
            self.filter_matched = True
            return True
        self._turn_away(agents, span_name)
        return False

    def _turn_away(self, agents: set[str] | frozenset[str], span_name: str) -> None:
        if len(self.turned_away) < MAX_TURNED_AWAY:
            # names come from the telemetry: quoted and cut, so a hostile one is one token
            for name in ([repr(agent[:80]) for agent in sorted(agents)]
                         or [f"(no agent name: span {span_name[:80]!r})"]):
                self.turned_away.setdefault(name, None)

    def filter_warning(self) -> str | None:
        """While the ``agents`` filter has kept nothing, the line that says so, with the
        agents it saw (``None``: nothing to say)."""
        if not self._agents or self.filter_matched or not self.turned_away:
            return None
        return (f"otel-scorers: the agents filter ({', '.join(sorted(self._agents))}) has kept "
                "no interaction: the agents seen are "
                f"{', '.join(list(self.turned_away)[:MAX_TURNED_AWAY])}. To fix: name the "
                "agents as the telemetry does (OTEL_SCORERS_AGENTS), or give your agents the "
                "name in the framework; until then nothing is scored")

    def matches(self, span: ReadableSpan, attrs: Mapping[str, Any] | None = None) -> bool:
        """True when ``span`` is a candidate (see :meth:`kind_of`); with per-agent
        evaluation, a run to score."""
        return self.kind_of(span, attrs) is not None

    def _attributes_hold(self, attrs: Mapping[str, Any]) -> bool:
        for key, expected, membership in self._attributes:
            value = attrs.get(key)
            if membership:
                if value not in expected:
                    return False
            elif value != expected:
                return False
        return True
