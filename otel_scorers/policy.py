"""What judge-written text may leave the process: the ``reasons`` switch as a value.

Every floor that writes a result somewhere (span attributes, events, the sinks, an analysis
rendering itself) applies the same :class:`ContentPolicy`, so no path can carry more text than
the switch allows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["ContentMode", "ContentPolicy"]

ContentMode = Literal["full", "truncate", "none"]


@dataclass(frozen=True)
class ContentPolicy:
    """What judge-written text is kept: all of it, ``max_chars`` of each, or none.

    With ``none`` only numbers, labels, ids and verdicts leave the process (content-free
    telemetry); criterion descriptions are dropped too, since a dynamic rubric is app content.
    """

    mode: ContentMode = "full"
    max_chars: int = 1_000

    @property
    def content_free(self) -> bool:
        """No text at all may leave (``reasons: none``)."""
        return self.mode == "none"

    def text(self, value: str) -> str | None:
        if self.mode == "none" or not value:
            return None
        if self.mode == "truncate" and len(value) > self.max_chars:
            return value[: self.max_chars - 1] + "…"
        return value
