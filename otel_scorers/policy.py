"""What judge-written text may leave the process: the ``reasons`` switch as a value.

Every floor that writes a result somewhere (span attributes, events, the sinks, an analysis
rendering itself) applies the same :class:`ContentPolicy`, so no path can carry more text than
the switch allows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

__all__ = ["ContentMode", "ContentPolicy"]

ContentMode = Literal["full", "truncate", "none"]


@dataclass(frozen=True)
class ContentPolicy:
    """What text of a result leaves the process: all of it, ``max_chars`` of each, or none
    (``mode``, the ``reasons`` switch); ``redactor``: run on every text that leaves (the
    judge's redaction: what the judge never saw never leaves either); ``run_content``:
    ``False`` with ``exported_content: strip``, so text a scorer copied from the run itself
    (a tool call's arguments, a rubric that came with the run) never leaves, while judge-written
    reasons do.

    With ``none`` only numbers, labels, ids and verdicts leave the process (content-free
    telemetry); criterion descriptions are dropped too, since a dynamic rubric is app content.
    """

    mode: ContentMode = "full"
    max_chars: int = 1_000
    redactor: Callable[[str], str] | None = None
    run_content: bool = True

    @property
    def content_free(self) -> bool:
        """No text at all may leave (``reasons: none``)."""
        return self.mode == "none"

    def text(self, value: str) -> str | None:
        """``value`` as it may leave (``None``: it may not)."""
        if self.mode == "none" or not value:
            return None
        if self.redactor is not None:
            value = self.redactor(value)
        if self.mode == "truncate" and len(value) > self.max_chars:
            return value[: self.max_chars - 1] + "…"
        return value

    def run_text(self, value: str) -> str | None:
        """Text copied from the run (not written by the judge): as :meth:`text`, and never
        with ``exported_content: strip``."""
        return self.text(value) if self.run_content else None
