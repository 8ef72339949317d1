"""JSON from untrusted text, parsed without letting its shape escape as an exception.

``json.loads`` raises ``RecursionError``, not ``ValueError``, for a value nested past the
interpreter's limit (a kilobyte of ``[`` is enough): code that catches ``ValueError`` around
it, as every reader of telemetry, judge answers and bodies here does, would let one hostile
value end a whole evaluation as an internal error. :func:`loads` makes that a ``ValueError``
like any other malformed text.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["loads"]


def loads(text: str | bytes, **options: Any) -> Any:
    """``json.loads(text)``; JSON nested too deep is a ``ValueError`` too."""
    try:
        return json.loads(text, **options)
    except RecursionError:
        raise ValueError("JSON is nested too deeply") from None
