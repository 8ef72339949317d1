"""Why nothing was scored: LLM calls (spans or log records) in traces with no interaction.

An app traced only at the LLM-client level (one ``chat`` span per call, no agent, workflow or
chain span) gets no score from the default selection; the worker notes the LLM calls of every
trace it decided without an interaction, while nothing has been selected, and the processor
warns once, naming the setting that would select something. Only the worker notes (after it
decided the trace), so an app that flushes right after a run never gets the warning falsely.
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

    def __init__(self, per_agent: bool = False) -> None:
        self.selected = False
        self.count = 0
        self.first = ""
        #: per-agent evaluation judges agent spans only: the first workflow or chain span
        #: seen, which the default (per-interaction) selection would have judged
        self.per_agent = per_agent
        self.chain = ""

    def note(self, name: str, attrs: Mapping[str, Any] | None, *, record: bool = False,
             count: int = 1) -> bool:
        """Count ``count`` unjudged LLM calls (a span with content ``attrs``, or ``record``s);
        ``True`` when it is time to warn."""
        if self.selected or (not record and (attrs is None
                                             or CONTENT_KEY_SET.isdisjoint(attrs))):
            return False
        before = self.count
        self.count += count
        if not self.first:
            self.first = name
        return before < self.WARN_AFTER <= self.count

    def message(self) -> str | None:
        """The warning, or ``None`` when there is nothing to say."""
        if self.selected or not self.count:
            return None
        if self.per_agent and self.chain:
            return (f"otel-scorers has seen {self.count} LLM calls under workflow or chain "
                    f"spans (the first: {self.chain!r}) but no agent span: per_agent=True "
                    "judges agent spans only. To fix: turn per_agent off "
                    "(OTEL_SCORERS_PER_AGENT=false) to judge each whole run, or select the "
                    "runs by span name (OTEL_SCORERS_SPAN_NAMES).")
        return (f"otel-scorers has seen {self.count} LLM calls (spans or log records; the "
                f"first trace: {self.first!r}) but no agent run, workflow or chain span "
                "holding them: the app looks traced at the LLM-client level only. To score "
                "each LLM call, set include_llm_spans=True (OTEL_SCORERS_INCLUDE_LLM_SPANS="
                "true); to score whole runs, wrap them in an invoke_agent span, or select "
                "them by span name (OTEL_SCORERS_SPAN_NAMES).")
