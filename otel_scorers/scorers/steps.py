"""What an agent did during one interaction: its ordered steps, as plain immutable values.

Capture builds these from the span tree of an interaction (tool spans, retriever spans, LLM
calls, handoffs); scorers that judge behaviour (trajectory, tool use, groundedness) read them
from :attr:`ScorerRun.steps <otel_scorers.scorers.run.ScorerRun.steps>`. Nothing here knows
OpenTelemetry. Every text field is bounded when a step is made (:func:`clip`), and a run holds
at most :data:`MAX_STEPS` of them (the rest counted in ``steps_dropped``), so a run's size never
depends on how long the agent looped.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

__all__ = ["MAX_FIELD_CHARS", "MAX_STEPS", "MAX_TOOLS", "Step", "StepKind", "ToolCall",
           "ToolDefinition", "clip"]

#: Characters kept of a step's arguments, result, error or document.
MAX_FIELD_CHARS = 4_000
#: Steps kept per run.
MAX_STEPS = 200
#: Documents kept per retrieval step.
MAX_DOCUMENTS = 20
#: Tool definitions kept per run, and characters of each description.
MAX_TOOLS = 64
MAX_TOOL_DESCRIPTION_CHARS = 500

StepKind = Literal["llm", "tool", "retrieval", "handoff"]


def clip(text: str | None, limit: int = MAX_FIELD_CHARS) -> str | None:
    """``text`` cut to ``limit`` characters with a visible marker (``None`` stays ``None``)."""
    if text is None or len(text) <= limit:
        return text
    return text[:limit] + f" [... {len(text) - limit} characters cut]"


class ToolCall(BaseModel):
    """A tool call an LLM asked for in a message (name and arguments as JSON text)."""

    model_config = ConfigDict(frozen=True)

    name: str
    arguments: str | None = None
    id: str | None = None


class ToolDefinition(BaseModel):
    """A tool the agent could call (``gen_ai.tool.definitions``, OpenInference ``llm.tools``,
    Traceloop ``llm.request.functions``): its name and what it is for."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str = ""


class Step(BaseModel):
    """One thing the agent did, in time order.

    ``kind``: ``llm`` (a model call: ``name`` is the model, tokens when reported), ``tool`` (a
    tool execution: ``name``, ``arguments``, ``result``, ``error``), ``retrieval``
    (``documents`` returned for ``query``), ``handoff`` (control passed to agent ``name``).
    ``agent`` is the agent that took the step, when known; times are Unix nanoseconds.
    """

    model_config = ConfigDict(frozen=True)

    kind: StepKind
    name: str
    agent: str | None = None
    start_ns: int = 0
    end_ns: int = 0
    arguments: str | None = None
    result: str | None = None
    error: str | None = None
    query: str | None = None
    documents: tuple[str, ...] = ()
    input_tokens: int | None = None
    output_tokens: int | None = None
    #: tool calls an ``llm`` step asked for (their executions are ``tool`` steps of their own)
    tool_calls: tuple[ToolCall, ...] = ()

    @property
    def duration_s(self) -> float:
        return max(0, self.end_ns - self.start_ns) / 1e9

    @property
    def failed(self) -> bool:
        return self.error is not None

    @property
    def tokens(self) -> int:
        return (self.input_tokens or 0) + (self.output_tokens or 0)

    @property
    def acts(self) -> bool:
        """A step the agent took in the world (a tool call, a retrieval, a handoff), as opposed
        to a model call: what a trajectory is made of."""
        return self.kind != "llm"
