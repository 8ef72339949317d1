"""What a span is in an agent's structure, by whichever convention marks it.

``agent`` (an agent's run: GenAI ``invoke_agent``, OpenInference ``AGENT``, Traceloop ``agent``,
Mastra ``agent_run``), ``chain`` (a workflow, graph or chain that may own a whole interaction:
GenAI ``invoke_workflow``, OpenInference ``CHAIN``, Traceloop ``workflow`` / ``task``, Mastra
``workflow_run``), ``llm`` (one model call), ``tool`` (a tool's execution), ``retrieval`` (a
retriever returning documents) and ``handoff`` (control passed to another agent); ``None`` for
anything else (HTTP, database, embedding spans).

:func:`span_kind` runs on the hot path for spans that carry one of :data:`KIND_KEYS`: a dict
lookup or two.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = ["AGENT", "CHAIN", "HANDOFF", "KIND_KEYS", "LLM", "RETRIEVAL", "TOOL", "span_kind"]

AGENT: Final = "agent"
CHAIN: Final = "chain"
LLM: Final = "llm"
TOOL: Final = "tool"
RETRIEVAL: Final = "retrieval"
HANDOFF: Final = "handoff"

#: ``gen_ai.operation.name`` values (``agent.run``: early Mastra and util-genai releases).
GENAI_KINDS: Final[Mapping[str, str]] = {
    "invoke_agent": AGENT, "agent.run": AGENT, "invoke_workflow": CHAIN, "chat": LLM,
    "text_completion": LLM, "generate_content": LLM, "execute_tool": TOOL, "handoff": HANDOFF,
    "agent_handoff": HANDOFF,
    "retrieval": RETRIEVAL, "retrieve": RETRIEVAL,
}
OPENINFERENCE_KINDS: Final[Mapping[str, str]] = {
    "AGENT": AGENT, "CHAIN": CHAIN, "LLM": LLM, "TOOL": TOOL, "RETRIEVER": RETRIEVAL,
    "RERANKER": RETRIEVAL,
}
TRACELOOP_KINDS: Final[Mapping[str, str]] = {
    "agent": AGENT, "workflow": CHAIN, "task": CHAIN, "tool": TOOL, "handoff": HANDOFF,
}
MASTRA_KINDS: Final[Mapping[str, str]] = {
    "agent_run": AGENT, "workflow_run": CHAIN, "llm_generation": LLM, "model_generation": LLM,
    "tool_call": TOOL, "mcp_tool_call": TOOL,
}

#: The attributes that mark a span's kind in some convention.
KIND_KEYS: Final = frozenset({"gen_ai.operation.name", "openinference.span.kind",
                              "traceloop.span.kind", "mastra.span.type", "llm.request.type"})


def span_kind(attrs: Mapping[str, Any]) -> str | None:
    """The span's kind (see the module docstring), or ``None``. Values that are not strings
    (a hostile or broken producer) mark nothing."""
    operation = attrs.get("gen_ai.operation.name")
    if type(operation) is str:
        kind = GENAI_KINDS.get(operation)
        if kind is not None:
            # Traceloop marks its workflow spans invoke_agent too: its own kind says more
            traceloop = attrs.get("traceloop.span.kind")
            if type(traceloop) is str:
                return TRACELOOP_KINDS.get(traceloop, kind)
            return kind
    for key, kinds in _BY_KEY:
        value = attrs.get(key)
        if type(value) is str:
            kind = kinds.get(value)
            if kind is not None:
                return kind
    return None


_BY_KEY: Final = (("openinference.span.kind", OPENINFERENCE_KINDS),
                  ("traceloop.span.kind", TRACELOOP_KINDS),
                  ("llm.request.type", {"chat": LLM, "completion": LLM}),
                  ("mastra.span.type", MASTRA_KINDS))
