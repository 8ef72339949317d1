"""Why nothing was scored: spans (or log records) with GenAI content and no run selected.

An app traced only at the LLM-client level (one ``chat`` span per call, no agent span) gets no
score from the default selection; the processor notes the content it sees while nothing has
been selected and warns once, naming the setting that would select something.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from otel_scorers.capture.trace import CONTENT_KEY_SET

__all__ = ["Unselected"]


class Unselected:
    """Content seen while nothing is selected. ``note`` is on the hot path: one flag test
    once a run has been selected."""

    WARN_AFTER = 20

    def __init__(self) -> None:
        self.selected = False
        self.count = 0
        self.first = ""

    def note(self, name: str, attrs: Mapping[str, Any] | None, *, record: bool = False) -> bool:
        """Count a span (``attrs``) or record with content; ``True`` when it is time to warn."""
        if self.selected or (not record and (attrs is None
                                             or CONTENT_KEY_SET.isdisjoint(attrs))):
            return False
        self.count += 1
        if not self.first:
            self.first = name
        return self.count == self.WARN_AFTER

    def message(self) -> str | None:
        """The warning, or ``None`` when there is nothing to say."""
        if self.selected or not self.count:
            return None
        return (f"otel-scorers has seen {self.count} spans or log records with GenAI content "
                f"(the first: {self.first!r}) but no agent-run span to score: the app looks "
                "traced at the LLM-client level only. To score each LLM call, set "
                "include_llm_spans=True (OTEL_SCORERS_INCLUDE_LLM_SPANS=true); to score whole "
                "runs, wrap them in an invoke_agent span, or select them by span name "
                "(OTEL_SCORERS_SPAN_NAMES).")
