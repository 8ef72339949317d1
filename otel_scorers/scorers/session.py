"""Conversations: the turns of a session, and a session as one run to judge.

A *turn* is one interaction of a conversation: what the user said and what the agent answered
(and, when a scorer reads them, what it did). A session run is an ordinary
:class:`~otel_scorers.scorers.run.ScorerRun` whose :attr:`~ScorerRun.turns` hold the whole
conversation, in order: its messages are the turns as chat (every earlier question and answer,
then the last question), its output the last answer. So any scorer can read a session run, and
the ones that know sessions (the multi-turn judge; the rubric and prompt-alignment scorers in
session mode) judge the whole conversation in one call.

Nothing here knows OpenTelemetry: the pipeline (:mod:`otel_scorers.pipeline.sessions`) collects
turns from interactions and builds session runs with :func:`session_run`.
"""

from __future__ import annotations

from collections.abc import Sequence

from otel_scorers.scorers.run import ScorerRun, session_run
from otel_scorers.scorers.turns import Turn

__all__ = ["render_transcript", "session_run", "turns_of"]

#: Characters of each side of a turn shown to the judge, and of the whole transcript.
SHOWN_TURN_CHARS = 1_500
SHOWN_TRANSCRIPT_CHARS = 24_000


def turns_of(run: ScorerRun) -> tuple[Turn, ...]:
    """The turns of a run: a session run's own, else its messages read as a conversation
    (each user message with the assistant messages after it; the output last)."""
    if run.turns:
        return tuple(run.turns)
    turns: list[Turn] = []
    user: str | None = None
    answers: list[str] = []
    for message in (*run.input_messages, *run.output):
        if message.role == "user":
            if user is not None or answers:
                turns.append(Turn.of(len(turns) + 1, user or "", "\n".join(answers)))
            user, answers = message.content, []
        elif message.role == "assistant" and message.content.strip():
            answers.append(message.content)
    if user is not None or answers:
        turns.append(Turn.of(len(turns) + 1, user or "", "\n".join(answers)))
    return tuple(turns)


def render_transcript(turns: Sequence[Turn], *, max_chars: int = SHOWN_TRANSCRIPT_CHARS,
                      turn_chars: int = SHOWN_TURN_CHARS) -> str:
    """The numbered transcript the judge reads (``Turn 3 - user: ...``). Each side is clipped;
    when the whole is too long, the first two turns (the goal) and as many of the last as fit
    are kept, and the turns left out are named."""
    rendered = [_turn(turn, turn_chars) for turn in turns]
    if sum(len(text) + 1 for text in rendered) <= max_chars or len(rendered) <= 3:
        return "\n".join(rendered)
    head = rendered[:2]
    budget = max_chars - sum(len(text) + 1 for text in head) - 80
    tail: list[str] = []
    for text in reversed(rendered[2:]):
        if tail and budget - len(text) - 1 < 0:
            break
        tail.insert(0, text)
        budget -= len(text) + 1
    left_out = len(rendered) - len(head) - len(tail)
    if not left_out:
        return "\n".join(rendered)
    first, last = turns[2].index, turns[1 + left_out].index
    gap = f"[turns {first}-{last} not shown: the transcript is too long]"
    return "\n".join([*head, gap, *tail])


def _turn(turn: Turn, limit: int) -> str:
    return (f"Turn {turn.index} - user: {_clipped(turn.user, limit)}\n"
            f"Turn {turn.index} - assistant: {_clipped(turn.assistant, limit) or '(no answer)'}")


def _clipped(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + " [...]"
