"""What a scorer judges: one agent run, as a typed, immutable value.

``ScorerRun.coerce`` accepts the loose shapes of the seed documents (Mastra's ``scorer.run``
argument) as Python values: ``{"input": [messages], "output": {"role": "assistant", "text": ...}}``,
``{"input": {"inputMessages": [...], "systemMessages": [...]}, "output": ...}``, plain strings,
lists of messages, ``{"role", "content"}`` dicts and content given as a list of text parts.
Mastra's agent-run input is honoured whole: ``rememberedMessages`` (the conversation memory
brings back: earlier turns, judged as context, so an answer "A" is read with the question it
answers), ``taggedSystemMessages`` (system messages grouped by tag: instructions too) and
``originalTask`` (in a task-completion loop, the task itself: the request the response is
judged against, whatever feedback turns followed it).
Non-text parts (images) are ignored: the scorers judge text. Tool calls a message asks for are
kept apart (:attr:`Message.tool_calls`), never turned into text: a turn that ends in a tool call
or a handoff has no answer of its own to judge. What the agent did is in :attr:`ScorerRun.steps`.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from otel_scorers.scorers.steps import (
    Step,
    StepCounts,
    ToolCall,
    ToolDefinition,
    bounded,
    schema_text,
    steps_from_input,
    tools_from_input,
)
from otel_scorers.scorers.turns import Turn, coerce_turns

__all__ = ["Message", "RunLike", "ScorerRun", "messages_from", "session_run", "text_of",
           "tool_calls_of"]

_TEXT_KEYS = ("text", "content", "value")


class Message(BaseModel):
    """One chat message reduced to its role, its text and the tool calls it asks for."""

    model_config = ConfigDict(frozen=True)

    role: str
    content: str
    tool_calls: tuple[ToolCall, ...] = ()


class ScorerRun(BaseModel):
    """One agent run to judge.

    ``input_messages`` are the conversation before the response (user and assistant turns),
    ``system_messages`` the agent's instructions, ``output`` the agent's reply messages.
    ``request_context`` and ``additional_context`` carry per-run settings such as a dynamic
    ``rubric``; ``input_data`` keeps non-message keys given inside ``input``. ``steps`` are
    what the agent did (tool calls, retrievals, LLM calls, handoffs, in time order) and
    ``tools`` the tools it could have called, when the telemetry says. A *session run* holds a
    whole conversation: ``turns`` (in order) and its ``session_id``; its messages are the
    turns as chat (:func:`otel_scorers.scorers.session.session_run`).
    """

    model_config = ConfigDict(frozen=True)

    run_id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    input_messages: tuple[Message, ...] = ()
    system_messages: tuple[Message, ...] = ()
    output: tuple[Message, ...] = ()
    request_context: Mapping[str, Any] = Field(default_factory=dict)
    additional_context: Mapping[str, Any] = Field(default_factory=dict)
    input_data: Mapping[str, Any] = Field(default_factory=dict)
    original_task: str | None = None
    steps: tuple[Step, ...] = ()
    steps_dropped: int = 0
    #: what every step said when some were left out (``None``: ``steps`` are all of them)
    step_counts: StepCounts | None = None
    tools: tuple[ToolDefinition, ...] = ()
    turns: tuple[Turn, ...] = ()
    session_id: str | None = None
    #: the JSON schema the run asked its answer to fit (a response format), as JSON text
    output_schema: str | None = None
    #: how long the interaction took (its span's duration), when known
    duration_ns: int | None = None

    # -- derived views -------------------------------------------------------------------
    @property
    def user_prompt(self) -> str | None:
        """What the agent was asked: the original task when one is given, else the last user
        message."""
        if self.original_task and self.original_task.strip():
            return self.original_task
        for message in reversed(self.input_messages):
            if message.role == "user" and message.content.strip():
                return message.content
        return None

    @property
    def conversation(self) -> tuple[Message, ...]:
        """Turns before the last user message (context for the judge); with an original task,
        every turn (the loop's feedback and earlier attempts)."""
        if self.original_task and self.original_task.strip():
            return self.input_messages
        for index in range(len(self.input_messages) - 1, -1, -1):
            message = self.input_messages[index]
            if message.role == "user" and message.content.strip():
                return self.input_messages[:index]
        return self.input_messages

    @property
    def system_prompt(self) -> str | None:
        """All system instructions joined, or ``None`` when there are none."""
        text = "\n\n".join(m.content for m in self.system_messages if m.content.strip())
        return text or None

    @functools.cached_property
    def tool_steps(self) -> tuple[Step, ...]:
        """The tool executions, in order."""
        return tuple(step for step in self.steps if step.kind == "tool")

    @functools.cached_property
    def tool_names(self) -> tuple[str, ...]:
        """The names of the tools executed, in order (a tool called twice appears twice)."""
        return tuple(step.name for step in self.tool_steps)

    def tool_count(self, name: str) -> int | None:
        """How many times tool ``name`` was called, the steps left out included (``None``:
        not known, past the bound on the tool names counted, or the counts are missing)."""
        counts = self.step_counts
        if not self.steps_dropped:
            return self.tool_names.count(name)
        if counts is None:
            return None
        if name in counts.tools:
            return counts.tools[name]
        return 0 if counts.names_complete else None

    @property
    def tool_call_count(self) -> int | None:
        """Tool calls in all, the steps left out included (``None``: not known)."""
        if not self.steps_dropped:
            return len(self.tool_steps)
        return self.step_counts.tool_calls if self.step_counts is not None else None

    @property
    def tool_error_count(self) -> int | None:
        """Failed tool calls in all, the steps left out included (``None``: not known)."""
        if not self.steps_dropped:
            return sum(1 for step in self.tool_steps if step.failed)
        return self.step_counts.tool_errors if self.step_counts is not None else None

    @functools.cached_property
    def llm_steps(self) -> tuple[Step, ...]:
        """The LLM calls, in order."""
        return tuple(step for step in self.steps if step.kind == "llm")

    # (pydantic copies __dict__: a copy with other steps would keep the cached views of these)
    def __copy__(self) -> ScorerRun:
        return _without_views(super().__copy__())

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> ScorerRun:
        return _without_views(super().__deepcopy__(memo))

    @functools.cached_property
    def acts(self) -> tuple[Step, ...]:
        """The steps that acted in the world (tool calls, retrievals, handoffs), in order:
        what a trajectory is made of (LLM calls are not steps of it)."""
        return tuple(step for step in self.steps if step.kind != "llm")

    @functools.cached_property
    def response(self) -> str:
        """The agent's final answer: the last assistant output message (else the last one)."""
        for message in reversed(self.output):
            if message.role == "assistant" and message.content.strip():
                return message.content
        for message in reversed(self.output):
            if message.content.strip():
                return message.content
        return ""

    # -- construction from loose shapes --------------------------------------------------
    @classmethod
    def coerce(cls, run: RunLike) -> ScorerRun:
        """Build a run from a ``ScorerRun`` or any of the loose shapes described above."""
        if isinstance(run, ScorerRun):
            return run
        if isinstance(run, Mapping):
            return cls._from_mapping(run)
        raise TypeError(
            f"cannot score a {type(run).__name__}: pass a ScorerRun or a mapping with "
            "'input' and 'output'"
        )

    @classmethod
    def _from_mapping(cls, data: Mapping[str, Any]) -> ScorerRun:
        inputs: list[Message] = []
        systems: list[Message] = []
        input_data: dict[str, Any] = {}
        raw_input = data.get("input")
        original_task: str | None = None
        if isinstance(raw_input, Mapping) and not _looks_like_message(raw_input):
            inputs.extend(messages_from(
                _first(raw_input, "rememberedMessages", "remembered_messages"), "user"))
            inputs.extend(
                messages_from(_first(raw_input, "inputMessages", "input_messages"), "user"))
            systems.extend(
                messages_from(_first(raw_input, "systemMessages", "system_messages"), "system"))
            systems.extend(_tagged(_first(raw_input, "taggedSystemMessages",
                                          "tagged_system_messages")))
            task = _first(raw_input, "originalTask", "original_task")
            original_task = text_of(task) if task is not None else None
            input_data = {k: v for k, v in raw_input.items() if k not in _RUN_INPUT_KEYS}
        elif raw_input is not None:
            inputs.extend(messages_from(raw_input, "user"))
        systems.extend(messages_from(_first(data, "systemMessages", "system_messages", "system"),
                                 "system"))
        # System messages given inside the input list are instructions, not turns.
        systems.extend(m for m in inputs if m.role == "system")
        inputs = [m for m in inputs if m.role != "system"]
        fields: dict[str, Any] = {
            "input_messages": tuple(inputs),
            "system_messages": tuple(systems),
            "output": tuple(messages_from(data.get("output"), "assistant")),
            "request_context": dict(_first(data, "requestContext", "request_context") or {}),
            "additional_context": dict(
                _first(data, "additionalContext", "additional_context") or {}),
            "input_data": input_data,
        }
        every, tools = steps_from_input(data.get("steps")), tools_from_input(data.get("tools"))
        steps, dropped, counts = bounded(every)
        if steps:
            fields.update(steps=steps, steps_dropped=dropped, step_counts=counts)
        if tools:
            fields["tools"] = tools
        fields["output_schema"] = schema_text(_first(data, "outputSchema", "output_schema"))
        if isinstance(duration := _first(data, "durationNs", "duration_ns"), int):
            fields["duration_ns"] = duration
        turns = coerce_turns(data.get("turns"))
        if turns:  # a conversation: its turns are the messages (session.session_run)
            session = _first(data, "sessionId", "session_id")
            made = session_run(turns, session_id=str(session) if session is not None else None,
                               system="\n\n".join(m.content for m in systems) or None,
                               context=fields["request_context"])
            fields.update(input_messages=made.input_messages, output=made.output,
                          turns=made.turns, session_id=made.session_id)
            if not steps:
                fields.update(steps=made.steps, steps_dropped=made.steps_dropped,
                              step_counts=made.step_counts)
        run_id = _first(data, "runId", "run_id")
        if run_id is not None:
            fields["run_id"] = str(run_id)
        if original_task:
            fields["original_task"] = original_task
        return cls(**fields)


RunLike = ScorerRun | Mapping[str, Any]

#: The views a run caches in its ``__dict__`` (dropped from a copy).
_CACHED_VIEWS = tuple(name for name, value in vars(ScorerRun).items()
                      if isinstance(value, functools.cached_property))


def _without_views(run: ScorerRun) -> ScorerRun:
    for name in _CACHED_VIEWS:
        run.__dict__.pop(name, None)
    return run


_RUN_INPUT_KEYS = frozenset({
    "inputMessages", "input_messages", "rememberedMessages", "remembered_messages",
    "systemMessages", "system_messages", "taggedSystemMessages", "tagged_system_messages",
    "originalTask", "original_task"})


def _tagged(value: Any) -> list[Message]:
    """``taggedSystemMessages``: system messages grouped by tag (a mapping of lists)."""
    if value is None:
        return []
    if isinstance(value, Mapping):
        return [m for group in value.values() for m in messages_from(group, "system")]
    return messages_from(value, "system")


def _first(data: Mapping[str, Any], *keys: str) -> Any:
    for key in keys:
        if key in data and data[key] is not None:
            return data[key]
    return None


def _looks_like_message(value: Mapping[str, Any]) -> bool:
    return "role" in value or any(key in value for key in _TEXT_KEYS) or "parts" in value


def messages_from(value: Any, default_role: str) -> list[Message]:
    """Normalise a string, a message, or a list of either into messages.

    Raises ``TypeError`` for values that hold no messages at all (numbers, bytes).
    """
    if value is None:
        return []
    if isinstance(value, str):
        return [Message(role=default_role, content=value)]
    if isinstance(value, (dict, Mapping)):  # (dict first: no ABC check for a dict)
        return [Message(role=str(value.get("role") or default_role), content=text_of(value),
                        tool_calls=tool_calls_of(value))]
    if isinstance(value, list) or (isinstance(value, Sequence)
                                   and not isinstance(value, bytes | bytearray)):
        out: list[Message] = []
        for item in value:
            out.extend(messages_from(item, default_role))
        return out
    raise TypeError(f"cannot read messages from a {type(value).__name__}")


def tool_calls_of(message: Mapping[str, Any]) -> tuple[ToolCall, ...]:
    """The tool calls a message asks for: OpenAI's ``tool_calls`` list, GenAI ``tool_call``
    parts, or Responses API ``function_call`` items (empty when it has none)."""
    calls: list[ToolCall] = []
    for call in message.get("tool_calls") or ():
        if isinstance(call, Mapping):
            function = call.get("function")
            source: Mapping[str, Any] = function if isinstance(function, Mapping) else call
            calls.append(_tool_call(source.get("name"), source.get("arguments"), call.get("id")))
    parts = message.get("parts")
    if isinstance(parts, Sequence) and not isinstance(parts, str | bytes):
        calls += [_tool_call(p.get("name"), p.get("arguments"), p.get("id")) for p in parts
                  if isinstance(p, Mapping) and p.get("type") == "tool_call"]
    if message.get("type") == "function_call":
        calls.append(_tool_call(message.get("name"), message.get("arguments"),
                                message.get("call_id")))
    return tuple(call for call in calls if call.name)


def _tool_call(name: Any, arguments: Any, call_id: Any) -> ToolCall:
    return ToolCall(name=str(name or ""), arguments=_arguments(arguments),
                    id=str(call_id) if call_id else None)


def _arguments(value: Any) -> str | None:
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= 4_000 else text[:4_000] + "..."


def text_of(value: Any) -> str:
    """The text of a message, a content value or a list of parts; non-text parts are dropped."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (dict, Mapping)):  # (dict first: no ABC check for a dict)
        part_type = value.get("type")
        if part_type is not None and part_type not in ("text", "output_text", "input_text"):
            return ""
        for key in _TEXT_KEYS:
            if key in value and value[key] is not None:
                return text_of(value[key])
        if "parts" in value:
            return text_of(value["parts"])
        return ""
    if isinstance(value, list) or (isinstance(value, Sequence)
                                   and not isinstance(value, bytes | bytearray)):
        return "\n".join(t for t in (text_of(item) for item in value) if t)
    return str(value)


def session_run(turns: Sequence[Turn], *, session_id: str | None = None,
                system: str | None = None, run_id: str | None = None,
                context: Mapping[str, Any] | None = None, max_steps: int = 200) -> ScorerRun:
    """The conversation of ``turns`` as one run: every earlier question and answer as chat
    messages, then the last question; the last answer as the output; the turns themselves in
    ``turns``; the steps of every turn, in order, at most ``max_steps``."""
    if not turns:
        raise ValueError("a session run needs at least one turn")
    messages: list[Message] = []
    for turn in turns[:-1]:
        messages.append(Message(role="user", content=turn.user))
        messages.append(Message(role="assistant", content=turn.assistant))
    messages.append(Message(role="user", content=turns[-1].user))
    steps, dropped, counts = bounded([step for turn in turns for step in turn.steps], max_steps)
    cut = sum(turn.steps_dropped for turn in turns)  # steps a turn itself left out: uncounted
    fields: dict[str, Any] = {
        "input_messages": tuple(messages),
        "system_messages": (Message(role="system", content=system),) if system else (),
        "output": (Message(role="assistant", content=turns[-1].assistant),),
        "turns": tuple(turns), "session_id": session_id,
        "steps": steps, "steps_dropped": dropped + cut,
        "step_counts": counts if not cut else None,
        "request_context": dict(context or {}),
    }
    if run_id is not None:
        fields["run_id"] = run_id
    return ScorerRun(**fields)
