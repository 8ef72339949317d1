"""One turn of a conversation, as a plain immutable value (see :mod:`.session`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from otel_scorers.scorers.steps import Step, clip

__all__ = ["MAX_TURN_CHARS", "Turn", "coerce_turns"]

#: Characters kept of each side of a turn (the question, the answer).
MAX_TURN_CHARS = 8_000


class Turn(BaseModel):
    """One turn of a conversation: its number in the session (from 1), the user's message and
    the agent's answer, the agent that answered, and what it did (when kept)."""

    model_config = ConfigDict(frozen=True)

    index: int
    user: str
    assistant: str
    agent: str | None = None
    steps: tuple[Step, ...] = ()
    #: steps of the turn not kept (past a session's bound per turn): a check that needs them
    #: is not decided on the session
    steps_dropped: int = 0

    @classmethod
    def of(cls, index: int, user: str, assistant: str, *, agent: str | None = None,
           steps: Sequence[Step] = (), steps_dropped: int = 0) -> Turn:
        """A turn with both sides clipped to :data:`MAX_TURN_CHARS` (a visible marker)."""
        return cls(index=index, user=clip(user, MAX_TURN_CHARS) or "",
                   assistant=clip(assistant, MAX_TURN_CHARS) or "", agent=agent,
                   steps=tuple(steps), steps_dropped=steps_dropped)

    @property
    def size(self) -> int:
        """Characters held (its bound in memory)."""
        return len(self.user) + len(self.assistant) + sum(
            len(s.arguments or "") + len(s.result or "") + len(s.error or "") + 64
            for s in self.steps)


def coerce_turns(value: Any) -> tuple[Turn, ...]:
    """``turns`` given in a loose shape (a dataset line, a run file): a list of
    ``{"user": ..., "assistant": ...}`` (``input``/``output`` too), numbered in order."""
    if value is None:
        return ()
    if not isinstance(value, Sequence) or isinstance(value, str | bytes | bytearray):
        raise TypeError("'turns' must be a list of {user, assistant}")
    out: list[Turn] = []
    for position, item in enumerate(value, start=1):
        if isinstance(item, Turn):
            out.append(item)
            continue
        if not isinstance(item, Mapping):
            raise TypeError("'turns' must be a list of {user, assistant}")
        user = _text(item, "user", "input")
        answer = _text(item, "assistant", "output")
        out.append(Turn.of(position, user, answer,
                           agent=str(item["agent"]) if item.get("agent") else None))
    return tuple(out)


def _text(item: Mapping[str, Any], *keys: str) -> str:
    for key in keys:
        value = item.get(key)
        if isinstance(value, str):
            return value
        if value is not None:
            raise TypeError(f"a turn's {key!r} must be text")
    return ""
