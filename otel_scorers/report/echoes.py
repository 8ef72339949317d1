"""Judge reasons that only repeat the judge's own instructions.

A judge that cannot do the task (a tiny local model, a broken prompt) often answers with
pieces of its prompt: "ignore previous instructions" (an example in the fence rules), "partly
met, ambiguous or unverifiable means false". Such a text is no reason for the failure: the
digest counts it and does not show it as one (``echoed`` in a group). A reason is an echo when
most of its word trigrams (:data:`ECHO_SHARE`) occur in the instructions of the built-in
scorers and the judge client's fixed system text; a reason that quotes a phrase of them among
its own words ("the response says 'ignore previous instructions'") is not."""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["ECHO_SHARE", "is_echo"]

#: The share of a reason's word trigrams found in the instructions that makes it an echo.
ECHO_SHARE = 0.6
_WORD = re.compile(r"[a-z0-9]+")


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _trigrams(words: list[str]) -> list[tuple[str, ...]]:
    return [tuple(words[i:i + 3]) for i in range(len(words) - 2)]


@lru_cache(maxsize=1)
def _instructions() -> frozenset[tuple[str, ...]]:
    from otel_scorers.judge.fence import FENCE_RULES
    from otel_scorers.scorers import faithfulness, prompts, tool_use

    texts = [FENCE_RULES, prompts.RUBRIC_INSTRUCTIONS, prompts.MULTI_TURN_INSTRUCTIONS,
             prompts.alignment_instructions("both", session=True),
             faithfulness.INSTRUCTIONS,
             tool_use.INSTRUCTIONS,
             "Answer with one JSON object and nothing else. It must match this JSON Schema "
             "exactly (every property, in this order). Answer with the JSON object the "
             "response format defines."]
    found: set[tuple[str, ...]] = set()
    for text in texts:
        found.update(_trigrams(_words(text)))
    return frozenset(found)


def is_echo(reason: str) -> bool:
    """Whether ``reason`` (three words or more) is mostly the judge's instructions."""
    grams = _trigrams(_words(reason))
    if not grams:
        return False
    known = _instructions()
    return sum(gram in known for gram in grams) / len(grams) >= ECHO_SHARE

