"""One interaction, one evaluation: which spans of a trace are the interactions users had.

Whatever marks a user interaction in a framework's telemetry, it is the *topmost* of the spans
that could be one: an agent run (``invoke_agent``, OpenInference ``AGENT``, ...), or a
workflow, graph or chain (OpenInference ``CHAIN``, Traceloop ``workflow``, ``invoke_workflow``)
that owns LLM calls. Everything under it (nested agents, a handoff chain's agents, the steps of
an agent loop, the graph's nodes) is part of it, not an interaction of its own:

- LangGraph + OpenInference: the graph root (``LangGraph``, a CHAIN) is the interaction; the
  ``agent`` node of ``create_react_agent`` is an AGENT span once per ReAct step, inside it;
- OpenAI Agents SDK: the workflow root (``Agent workflow``) holds the triage agent and the
  agent it hands off to: one interaction, judged on the user's question and the final answer;
- LlamaIndex: ``FunctionAgent.run`` (a CHAIN) holds every workflow step.

A topmost chain with no LLM call under it (a prompt template, a parser run on its own) is no
interaction. A topmost agent span always is (when it holds no content, that is its decision:
``no_content``, with the reason logged). :func:`resolve` is pure: the live processor calls it
when a trace's local root ends (or its trace goes idle), ``rescore`` when a trace is complete.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from otel_scorers.capture.conventions import AGENT_NAME_KEYS, agent_from_span_name
from otel_scorers.capture.kinds import AGENT, CHAIN

__all__ = ["Candidate", "Interaction", "is_local_root", "resolve"]


@dataclass(frozen=True)
class Candidate:
    """A span that may be an interaction: its attributes as they ended, and its kind
    (``agent``, ``chain``, or ``llm`` when LLM calls are selected on their own)."""

    span: ReadableSpan
    attributes: Mapping[str, Any]
    kind: str

    @property
    def span_id(self) -> int:
        return self.span.context.span_id if self.span.context is not None else 0

    @property
    def agent(self) -> str | None:
        # cached by hand: functools.cached_property takes a lock per read on Python 3.11,
        # and an overloaded application thread reads it for every run it drops
        try:
            return self.__dict__["_agent"]  # type: ignore[no-any-return]
        except KeyError:
            pass
        for key in AGENT_NAME_KEYS:
            value = self.attributes.get(key)
            if isinstance(value, str) and value.strip():
                name: str | None = value.strip()[:128]
                break
        else:
            name = agent_from_span_name(self.attributes, self.span.name)
        self.__dict__["_agent"] = name
        return name


@dataclass(frozen=True)
class Interaction:
    """An interaction: its topmost span and the candidates it holds (in time order)."""

    root: Candidate
    inner: tuple[Candidate, ...] = field(default_factory=tuple)

    @property
    def agent(self) -> str | None:
        """The agent the user talked to: the root's name, else the first agent inside."""
        if self.root.agent:
            return self.root.agent
        return next((c.agent for c in self.inner if c.kind == AGENT and c.agent), None)

    @property
    def agents(self) -> set[str]:
        return {name for c in (self.root, *self.inner) if (name := c.agent)}


def is_local_root(span: ReadableSpan) -> bool:
    """The span has no parent in this process (none at all, or a remote one)."""
    parent = span.parent
    return parent is None or parent.is_remote


def resolve(candidates: Sequence[Candidate], parents: Mapping[int, int | None],
            llm_spans: Collection[int]) -> tuple[list[Interaction], list[Candidate]]:
    """The interactions among ``candidates`` and the candidates that are none (a topmost chain
    without LLM calls). ``parents`` maps span ids to parent span ids (every span of the trace
    that was seen); ``llm_spans`` are the span ids of the LLM calls (and content) of the trace.
    """
    ids = {c.span_id for c in candidates}
    tops: dict[int, Candidate] = {}
    inner: dict[int, list[Candidate]] = {}
    for candidate in sorted(candidates, key=lambda c: c.span.start_time or 0):
        top = _topmost_ancestor(candidate.span_id, ids, parents)
        if top is None:
            tops[candidate.span_id] = candidate
        else:
            inner.setdefault(top, []).append(candidate)
    interactions: list[Interaction] = []
    dropped: list[Candidate] = []
    for span_id, candidate in tops.items():
        held = tuple(inner.get(span_id, ()))
        if candidate.kind == CHAIN and not _owns(span_id, llm_spans, parents):
            dropped.append(candidate)
            dropped.extend(held)
            continue
        interactions.append(Interaction(candidate, held))
    return interactions, dropped


def _topmost_ancestor(span_id: int, ids: Collection[int], parents: Mapping[int, int | None]
                      ) -> int | None:
    """The outermost candidate above ``span_id`` (``None``: it is topmost itself)."""
    top = None
    current = parents.get(span_id)
    for _ in range(256):
        if current is None:
            break
        if current in ids:
            top = current
        current = parents.get(current)
    return top


def _owns(root: int, llm_spans: Collection[int], parents: Mapping[int, int | None]) -> bool:
    """Whether an LLM call (or content) of the trace is ``root`` itself or under it."""
    for span_id in llm_spans:
        current: int | None = span_id
        for _ in range(256):
            if current is None:
                break
            if current == root:
                return True
            current = parents.get(current)
    return False
