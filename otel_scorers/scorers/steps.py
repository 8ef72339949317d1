"""What an agent did during one interaction: its ordered steps, as plain immutable values.

Capture builds these from the span tree of an interaction (tool spans, retriever spans, LLM
calls, handoffs); scorers that judge behaviour (trajectory, tool use, groundedness) read them
from :attr:`ScorerRun.steps <otel_scorers.scorers.run.ScorerRun.steps>`. Nothing here knows
OpenTelemetry. Every text field is bounded when a step is made (:func:`clip`), and a run holds
at most :data:`MAX_STEPS` of them (:func:`bounded`: the first and the last ones; the rest
counted in ``steps_dropped``), so a run's size never depends on how long the agent looped. What
was left out still counts: the run keeps every tool name called with its count, the tool errors
and the steps in all (:class:`StepCounts`), and a check that needs the steps themselves is not
decided (``steps_truncated``), never passed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

__all__ = ["MAX_FIELD_CHARS", "MAX_INPUT_STEPS", "MAX_STEPS", "MAX_TOOLS", "MAX_TOOL_SCHEMA_CHARS",
           "SCHEMA_OVER_LIMIT", "Step", "StepCounts", "StepKind", "ToolCall", "ToolDefinition",
           "bounded", "clip", "schema_text", "steps_from_input", "tools_from_input"]

#: Characters kept of a step's arguments, result, error or document.
MAX_FIELD_CHARS = 4_000
#: Steps kept per run.
MAX_STEPS = 200
#: Documents kept per retrieval step.
MAX_DOCUMENTS = 20
#: Tool definitions kept per run, and characters of each description.
MAX_TOOLS = 64
MAX_TOOL_DESCRIPTION_CHARS = 500
#: Characters of a tool's parameters schema kept (a longer one is not kept: not checked).
MAX_TOOL_SCHEMA_CHARS = 64_000

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
    Traceloop ``llm.request.functions``): its name, what it is for, and the JSON schema of its
    parameters as the run declared it (JSON text, :func:`schema_text`; ``None``: none
    declared)."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str = ""
    parameters: str | None = None


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


#: Distinct tool names counted per run when its steps are cut (more: the counts say so).
MAX_TOOL_NAMES = 1_000


class StepCounts(BaseModel):
    """What every step of a run said, kept whole when the steps themselves are cut (past
    :data:`MAX_STEPS`): each tool called, by name, with its count (at most
    :data:`MAX_TOOL_NAMES` names: ``names_complete`` says whether every one is there), the
    tool calls, tool errors and steps in all."""

    model_config = ConfigDict(frozen=True)

    tools: dict[str, int] = {}
    tool_calls: int = 0
    tool_errors: int = 0
    steps: int = 0
    names_complete: bool = True

    @classmethod
    def of(cls, steps: Sequence[Step]) -> StepCounts:
        tools: dict[str, int] = {}
        calls = errors = 0
        complete = True
        for step in steps:
            if step.kind != "tool":
                continue
            calls += 1
            errors += step.error is not None
            if step.name in tools:
                tools[step.name] += 1
            elif len(tools) < MAX_TOOL_NAMES:
                tools[step.name] = 1
            else:
                complete = False
        return cls(tools=tools, tool_calls=calls, tool_errors=errors, steps=len(steps),
                   names_complete=complete)


    def plus(self, other: StepCounts) -> StepCounts:
        """These counts and ``other``'s (steps cut elsewhere), added."""
        tools = dict(self.tools)
        complete = self.names_complete and other.names_complete
        for name, count in other.tools.items():
            if name in tools:
                tools[name] += count
            elif len(tools) < MAX_TOOL_NAMES:
                tools[name] = count
            else:
                complete = False
        return StepCounts(tools=tools, tool_calls=self.tool_calls + other.tool_calls,
                          tool_errors=self.tool_errors + other.tool_errors,
                          steps=self.steps + other.steps, names_complete=complete)


def bounded(steps: Sequence[Step], limit: int = MAX_STEPS, *, cut: StepCounts | None = None
            ) -> tuple[tuple[Step, ...], int, StepCounts | None]:
    """At most ``limit`` steps: the first and the last half kept (a call at the end, a
    forbidden one after a long loop, is still seen), the middle left out and counted; with the
    counts of every step when some were left out (``None``: the steps say it all). ``cut``:
    steps already left out before these (a trace buffer's bound), counted in."""
    if len(steps) <= limit and cut is None:
        return tuple(steps), 0, None
    head = limit - limit // 2
    tail = limit // 2
    kept = tuple(steps) if len(steps) <= limit else (
        (*steps[:head], *steps[len(steps) - tail:]) if tail else tuple(steps[:head]))
    counts = StepCounts.of(steps)
    if cut is not None:
        counts = counts.plus(cut)
    dropped = counts.steps - len(kept)
    return kept, dropped, counts if dropped else None


#: Steps a run given as data may hold (a run file, a dataset record): more is not a run.
MAX_INPUT_STEPS = 100_000


def steps_from_input(value: Any) -> tuple[Step, ...]:
    """``steps``: a list of step mappings (``{"kind": "tool", "name": ..., "arguments": ...}``,
    the shape ``rescore --include-run`` writes), at most ``MAX_INPUT_STEPS`` (the run keeps
    :data:`MAX_STEPS` of them, and the counts of all)."""
    if value is None:
        return ()
    if not isinstance(value, Sequence) or isinstance(value, str | bytes | bytearray):
        raise TypeError("'steps' must be a list of steps")
    if len(value) > MAX_INPUT_STEPS:
        raise TypeError(f"'steps' holds {len(value)} steps: at most {MAX_INPUT_STEPS} are read")
    try:
        return tuple(step if isinstance(step, Step) else Step.model_validate(step)
                     for step in value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise TypeError(f"invalid step ({where}: {first['msg']})") from None


#: What stands for a declared schema past :data:`MAX_TOOL_SCHEMA_CHARS` (then its length): a
#: check reading it says the schema is over the limit (never that none was declared).
SCHEMA_OVER_LIMIT = "\x00over the limit:"


def schema_text(schema: Any) -> str | None:
    """A declared JSON schema (a mapping or JSON text) as JSON text; past
    :data:`MAX_TOOL_SCHEMA_CHARS` characters, :data:`SCHEMA_OVER_LIMIT` and its length (not
    kept); ``None`` for anything that is not a JSON object."""
    if isinstance(schema, Mapping):
        try:
            schema = json.dumps(schema, separators=(",", ":"))
        except (TypeError, ValueError, RecursionError):
            return None
    if not isinstance(schema, str) or not schema.lstrip().startswith("{"):
        return None
    if len(schema) > MAX_TOOL_SCHEMA_CHARS:
        return f"{SCHEMA_OVER_LIMIT}{len(schema)}"
    return schema


def tools_from_input(value: Any) -> tuple[ToolDefinition, ...]:
    """``tools``: names, or ``{"name", "description", "parameters"}`` mappings, of the tools
    the agent had (``parameters``: their JSON schema, as a mapping or JSON text)."""
    if value is None:
        return ()
    if not isinstance(value, Sequence) or isinstance(value, str | bytes | bytearray):
        raise TypeError("'tools' must be a list of tool names or {name, description}")
    out = []
    for item in value[:MAX_TOOLS]:
        if isinstance(item, str):
            out.append(ToolDefinition(name=item))
        elif isinstance(item, Mapping) and isinstance(item.get("name"), str):
            schema = item.get("parameters")
            out.append(ToolDefinition(name=item["name"],
                                      description=str(item.get("description") or ""),
                                      parameters=schema_text(schema)))
        else:
            raise TypeError("'tools' must be a list of tool names or {name, description}")
    return tuple(out)
