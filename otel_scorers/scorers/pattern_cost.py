"""Which regular expressions are cheap to search without a timeout: the common anchored
patterns of JSON schemas (``^SKU-[0-9]{4}$``, ``^[a-z_]+$``), whose search cost a short text
bounds.

A search under a timeout costs about a microsecond more than one without (the ``regex``
module's clock), which is most of what checking a short string against ``pattern`` costs.
:func:`bounded` says when the timeout can be left out: the pattern is read with a scanner that
knows only a small, plain syntax and refuses everything else (groups, alternation,
back-references, look-arounds, every escape but ``\\d \\D \\w \\W \\s \\S`` and escaped
punctuation, nested or POSIX classes, fuzzy matching), so a pattern it accepts is

- anchored at the start (``^`` first: one match attempt, not one per position),
- a sequence of items that each match one character (a literal, ``.``, an escape, a class),
- each repeated a fixed number of times (``{4}``), at most :data:`MAX_FIXED_WIDTH` characters
  in all, save at most one item repeated a variable number of times (``*``, ``+``, ``?``,
  ``{2,5}``, lazy or possessive).

Its one match attempt then tries at most ``len(text) + 1`` counts of the variable item, each
checked against at most :data:`MAX_FIXED_WIDTH` characters: under 0.1 ms for a text of
:data:`MAX_PLAIN_TEXT_CHARS` (``tests/scorers/test_fast_paths.py`` times the worst shapes).
Anything else keeps the timeout. What a search finds never changes: the same compiled
pattern is searched either way.
"""

from __future__ import annotations

import re
import string

__all__ = ["MAX_FIXED_WIDTH", "MAX_PLAIN_TEXT_CHARS", "bounded"]

#: The most characters the fixed-count items of a bounded pattern may match in all.
MAX_FIXED_WIDTH = 64
#: The longest text a bounded pattern is searched without a timeout.
MAX_PLAIN_TEXT_CHARS = 256
#: The longest pattern read (a longer one keeps the timeout).
MAX_PATTERN_CHARS = 200

_ESCAPES = frozenset("dDwWsS") | frozenset(string.punctuation)
_SPECIAL = frozenset("()|*+?{}[]^$\\")
_COUNT = re.compile(r"\{([0-9]{1,3})(,([0-9]{0,3}))?\}")


def bounded(pattern: str) -> bool:
    """Whether a search of ``pattern`` over a text of at most :data:`MAX_PLAIN_TEXT_CHARS` is
    bounded without a timeout (see the module docstring)."""
    if not pattern.startswith("^") or len(pattern) > MAX_PATTERN_CHARS:
        return False
    end = len(pattern) - 1 if pattern.endswith("$") and _unescaped_end(pattern) else len(pattern)
    index, width, variable = 1, 0, 0
    while index < end:
        index = _item(pattern, index, end)
        if index < 0:
            return False
        index, low, high = _quantifier(pattern, index, end)
        if index < 0:
            return False
        if high != low:
            variable += 1
        else:
            width += low
        if variable > 1 or width > MAX_FIXED_WIDTH:
            return False
    return True


def _unescaped_end(pattern: str) -> bool:
    """Whether the final ``$`` is an anchor, not an escaped dollar (an even run of
    backslashes before it)."""
    body = pattern[:-1]
    return (len(body) - len(body.rstrip("\\"))) % 2 == 0


def _item(pattern: str, index: int, end: int) -> int:
    """Where the one-character item at ``index`` ends, or -1 for one outside the syntax."""
    char = pattern[index]
    if char == "\\":
        return index + 2 if index + 1 < end and pattern[index + 1] in _ESCAPES else -1
    if char == "[":
        return _class_end(pattern, index, end)
    return -1 if char in _SPECIAL else index + 1


def _class_end(pattern: str, index: int, end: int) -> int:
    at = index + 1
    if at < end and pattern[at] == "^":
        at += 1
    if at < end and pattern[at] == "]":
        return -1  # (a literal ']' first: refused rather than read)
    while at < end and pattern[at] != "]":
        if pattern[at] == "[":
            return -1
        if pattern[at] == "\\":
            if at + 1 >= end or pattern[at + 1] not in _ESCAPES:
                return -1
            at += 1
        at += 1
    return at + 1 if at < end else -1


def _quantifier(pattern: str, index: int, end: int) -> tuple[int, int, int | None]:
    """Where the quantifier at ``index`` ends (-1: outside the syntax) and its least and most
    counts (``None``: no most); none at all is ``{1}``."""
    if index >= end or pattern[index] not in "*+?{":
        return index, 1, 1
    if pattern[index] == "{":
        matched = _COUNT.match(pattern, index, end)
        if matched is None:
            return -1, 0, 0
        low = int(matched.group(1))
        high: int | None = (low if matched.group(2) is None
                            else int(matched.group(3)) if matched.group(3) else None)
        index = matched.end()
    else:
        low, high = (0 if pattern[index] != "+" else 1), (1 if pattern[index] == "?" else None)
        index += 1
    if index < end and pattern[index] in "?+":  # lazy or possessive
        index += 1
    if index < end and pattern[index] in "*+?{":
        return -1, 0, 0  # (a repeat of a repeat)
    if high is not None and high < low:
        return -1, 0, 0
    return index, low, high
