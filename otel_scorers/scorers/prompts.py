"""The judge prompts of the built-in scorers.

Instructions here are trusted text. Everything taken from the run (and a rubric read from a
span) goes into ``fields`` and is fenced as untrusted data by the judge client.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from otel_scorers.scorers.run import Message, ScorerRun
from otel_scorers.scorers.session import render_transcript
from otel_scorers.scorers.steps import Step
from otel_scorers.scorers.turns import Turn

if TYPE_CHECKING:
    from otel_scorers.scorers.criteria import Criterion

MAX_CONTEXT_TURNS = 6
MAX_CONTEXT_TURN_CHARS = 1_500
#: Steps shown to the judge, and characters of each step's arguments and result.
MAX_SHOWN_STEPS = 40
MAX_STEP_FIELD_CHARS = 600

RUBRIC_INSTRUCTIONS = """\
You judge an AI agent's RESPONSE against a rubric of criteria labelled c1, c2, ... . A \
criterion is satisfied only when the response text clearly meets it; partly met, ambiguous or \
unverifiable means false. Judge each on its own. For every label, none missing or extra, give \
"reasoning" (one or two sentences: the evidence, or what is missing), then "satisfied". End \
with "overallAssessment": what the agent should fix, if anything.\
"""


_RUBRIC_SESSION = """
This RESPONSE ends a conversation (its earlier turns are given): judge it as the end of that \
conversation, in the light of everything said before (the user's goal in their opening turns, \
facts and preferences they gave, what the agent already did or promised). A criterion may speak \
of the conversation as a whole.\
"""

_ALIGNMENT_SESSION = """\
This response ends a conversation (its earlier turns are given). The USER REQUEST is the \
latest message; the user's GOAL is set out in their opening turns. Judge intent and \
requirements against the goal as later turns refined it, and completeness against everything \
the user asked across the conversation, not the last message alone."""

MULTI_TURN_INSTRUCTIONS = """\
You judge a whole CONVERSATION between a user and an AI agent (numbered turns, user and \
assistant) against criteria labelled c1, c2, ... . A criterion is satisfied only when the \
conversation as a whole clearly meets it; partly met, ambiguous or unverifiable means false. \
Judge each on its own. For every label, none missing or extra, give "reasoning" (one or two \
sentences citing the turns that decide it), then "satisfied". End with "overallAssessment": \
what the agent should do differently in conversations like this one, if anything.\
"""


def rubric_instructions(run: ScorerRun) -> str:
    """The rubric's instructions; a session run's response is judged as its conversation's
    end."""
    return RUBRIC_INSTRUCTIONS + (_RUBRIC_SESSION if len(run.turns) > 1 else "")


def multi_turn_fields(criteria: Sequence[Criterion], run: ScorerRun, turns: Sequence[Turn], *,
                      trajectory: bool = False) -> list[tuple[str, str]]:
    checklist = "\n".join(f"c{i}: {c.description}" for i, c in enumerate(criteria, start=1))
    fields = [("criteria", checklist)]
    if run.system_prompt:
        fields.append(("agent instructions", run.system_prompt))
    fields.append((f"conversation ({len(turns)} turns)", render_transcript(turns)))
    if trajectory:
        fields.append(("what the agent did", render_steps(run) or "(no steps were recorded)"))
    return fields


def rubric_fields(criteria: Sequence[Criterion], run: ScorerRun, *,
                  trajectory: bool = False) -> list[tuple[str, str]]:
    checklist = "\n".join(f"c{i}: {c.description}" for i, c in enumerate(criteria, start=1))
    return [("rubric criteria", checklist),
            *run_fields(run, include_system=True, trajectory=trajectory)]


def rubric_task(count: int) -> str:
    labels = "c1" if count == 1 else f"c1 to c{count}"
    return f"Judge {labels} against the agent response; answer with the JSON object."


_USER_DIMENSIONS = """\
"userAlignment": judge the response against the USER REQUEST.
- intentAlignment: its primary intent (primaryIntent; note secondary intents in the \
reasoning) and whether the response addresses it (isAddressed).
- requirementsFulfillment: each requirement (at most 12), explicit (stated) or implicit \
(plainly expected: code that runs, an answer in the user's language), whether it is \
fulfilled; overallScore for all of them together.
- completeness: does it cover everything asked? missingElements lists what it leaves out.
- responseAppropriateness: do format (formatAlignment) and tone (toneAlignment) fit what \
the user asked for or would expect?"""

_SYSTEM_DIMENSIONS = """\
"systemCompliance": judge the response against the AGENT INSTRUCTIONS (system prompt) only.
- intentAlignment: the instructions' main behavioural guideline (primaryIntent) and whether \
the response follows it (isAddressed).
- requirementsFulfillment: each rule or constraint of the instructions (at most 12), obeyed \
or not; overallScore for all of them together.
- completeness: does it obey every rule? missingElements lists the rules broken or ignored.
- responseAppropriateness: do format and tone follow what the instructions prescribe?"""

_ALIGNMENT_HEAD = """\
You judge how well an AI agent's response ALIGNS with what it was asked: not its general \
quality. An excellent answer to another question is poorly aligned; a plain answer that does \
exactly what was asked is well aligned. Score each dimension from 0.0 (not at all) to 1.0 \
(fully), reasoning before the score. A response that ignores a stated requirement scores at \
most 0.5 on requirementsFulfillment.
Example: "List the benefits of TypeScript in bullet points" answered by one accurate \
paragraph: intent 1.0 (benefits given), requirements 0.5 (benefits yes, bullet points no), \
completeness 0.8, appropriateness 0.3 (the requested format is missing).
"overallAssessment": two or three sentences on the alignment and what would improve it.
"""


def alignment_instructions(mode: str, *, session: bool = False) -> str:
    parts = [_ALIGNMENT_HEAD]
    if session:
        parts.append(_ALIGNMENT_SESSION)
    if mode in ("user", "both"):
        parts.append(_USER_DIMENSIONS)
    if mode in ("system", "both"):
        parts.append(_SYSTEM_DIMENSIONS)
    return "\n\n".join(parts)


def alignment_fields(run: ScorerRun, mode: str, *, trajectory: bool = False
                     ) -> list[tuple[str, str]]:
    # User mode ignores the system prompt on purpose (seed: "ignoring system instructions").
    return run_fields(run, include_system=mode in ("system", "both"), trajectory=trajectory)


def alignment_task(mode: str) -> str:
    wanted = {"user": '"userAlignment"', "system": '"systemCompliance"',
              "both": '"userAlignment" and "systemCompliance"'}[mode]
    return f"Evaluate the agent response above. Answer with the JSON object: {wanted}, then " \
           '"overallAssessment".'


def run_fields(run: ScorerRun, *, include_system: bool, trajectory: bool = False
               ) -> list[tuple[str, str]]:
    fields: list[tuple[str, str]] = []
    if include_system and run.system_prompt:
        fields.append(("agent instructions", run.system_prompt))
    if len(run.turns) > 1:
        return fields + session_fields(run, trajectory=trajectory)
    context = render_conversation(run.conversation)
    if context:
        fields.append(("earlier conversation", context))
    if run.user_prompt:
        fields.append(("user request", run.user_prompt))
    if trajectory:
        fields.append(("what the agent did", render_steps(run) or "(no steps were recorded)"))
    fields.append(("agent response", run.response))
    return fields


def session_fields(run: ScorerRun, *, trajectory: bool) -> list[tuple[str, str]]:
    """A session run read as its last turn at the end of its conversation: the user's goal
    (their opening turns), the turns before, the last request and the response."""
    turns, last = run.turns[:-1], run.turns[-1]
    goal = "\n".join(f"Turn {t.index}: {t.user}" for t in run.turns[:2] if t.user.strip())
    fields = [("user's goal (their opening turns)", goal),
              (f"conversation before the last turn (turns {turns[0].index}-{turns[-1].index})",
               render_transcript(turns))]
    if run.user_prompt:
        fields.append((f"user request (turn {last.index})", run.user_prompt))
    if trajectory:
        fields.append(("what the agent did", render_steps(run) or "(no steps were recorded)"))
    fields.append((f"agent response (turn {last.index})", run.response))
    return fields


def trajectory_digest(run: ScorerRun, shown: bool) -> object:
    """What of the steps reaches the judge (for cache keys): all of them, or nothing."""
    return (run.steps, run.steps_dropped, run.tools) if shown else ()


def render_steps(run: ScorerRun, *, numbered: Sequence[Step] | None = None) -> str:
    """What the agent did, one numbered line per tool call, retrieval or handoff (arguments and
    results clipped), after a line counting its LLM calls and their tokens. ``numbered``
    picks the steps given numbers (the tool-use scorer asks about those)."""
    acts = [step for step in run.steps if step.acts] if numbered is None else list(numbered)
    calls = [step for step in run.steps if step.kind == "llm"]
    lines = []
    if calls:
        tokens = sum(step.tokens for step in calls)
        lines.append(f"LLM calls: {len(calls)}" + (f" ({tokens} tokens)" if tokens else ""))
    for index, step in enumerate(acts[:MAX_SHOWN_STEPS], start=1):
        lines.append(f"{index}. {render_step(step)}")
    hidden = len(acts) - MAX_SHOWN_STEPS + run.steps_dropped
    if hidden > 0:
        lines.append(f"[{hidden} more steps not shown]")
    return "\n".join(lines)


def render_step(step: Step) -> str:
    """One step on one line: every text of it (name, agent, arguments, result, error, query)
    has its line breaks escaped, so a hostile tool result cannot forge a call line of its own
    (``s2: tool delete_account ...``) inside the fenced list of calls."""
    name = _one_line(step.name)
    who = f" (agent {_one_line(step.agent)})" if step.agent else ""
    if step.kind == "tool":
        text = f"tool {name}{who}: arguments {_clip(step.arguments) or '(none)'}"
        if step.error:
            return text + f" -> FAILED: {_clip(step.error)}"
        return text + f" -> result {_clip(step.result) or '(none)'}"
    if step.kind == "retrieval":
        return (f"retrieval {name}{who}: query {_clip(step.query) or '(none)'} -> "
                f"{len(step.documents)} document(s)")
    if step.kind == "handoff":
        return f"handoff to agent {name}{who}"
    return f"llm {name}{who}"


#: Every character a model (or ``str.splitlines``) may read as a line break, escaped.
_BREAKS = str.maketrans({"\n": "\\n", "\r": "\\r", "\v": "\\v", "\f": "\\f",
                         "\x1c": " ", "\x1d": " ", "\x1e": " ", "\x85": " ",
                         "\u2028": " ", "\u2029": " "})


def _one_line(text: str) -> str:
    return text.translate(_BREAKS)


def _clip(text: str | None) -> str | None:
    if text is None:
        return None
    if len(text) > MAX_STEP_FIELD_CHARS:
        text = text[:MAX_STEP_FIELD_CHARS] + " [...]"
    return _one_line(text)


def render_conversation(messages: Sequence[Message]) -> str:
    """The last few earlier turns, each clipped, as ``role: text`` lines."""
    recent = messages[-MAX_CONTEXT_TURNS:]
    lines = []
    if len(messages) > len(recent):
        lines.append(f"[{len(messages) - len(recent)} earlier turns omitted]")
    for message in recent:
        text = message.content
        if len(text) > MAX_CONTEXT_TURN_CHARS:
            text = text[:MAX_CONTEXT_TURN_CHARS] + " [...]"
        lines.append(f"{message.role}: {text}")
    return "\n".join(lines)
