"""JSON from untrusted text, parsed without letting its shape escape as an exception.

``json.loads`` raises ``RecursionError``, not ``ValueError``, for a value nested past the
interpreter's limit (a kilobyte of ``[`` is enough): code that catches ``ValueError`` around
it, as every reader of telemetry, judge answers and bodies here does, would let one hostile
value end a whole evaluation as an internal error. :func:`loads` makes that a ``ValueError``
like any other malformed text.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

__all__ = ["loads"]


#: The scanner ``json.loads`` runs (its default decoder's, in C), called directly on text that
#: is one value and nothing else: a microsecond saved on a tool call's arguments.
_SCAN: Callable[[str, int], tuple[Any, int]] = (
    json.JSONDecoder().scan_once)  # type: ignore[attr-defined]


def loads(text: str | bytes, **options: Any) -> Any:
    """``json.loads(text)``; JSON nested too deep is a ``ValueError`` too."""
    try:
        if not options and type(text) is str:
            try:
                value, end = _SCAN(text, 0)
            except StopIteration:  # (no value at the first character: json.loads says why)
                pass
            else:
                if end == len(text):
                    return value
        return json.loads(text, **options)
    except RecursionError:
        raise ValueError("JSON is nested too deeply") from None
