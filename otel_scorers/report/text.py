"""What the failure digest reads from a backend, made safe to show: everything it prints
(agent and scorer names, criterion ids, judge reasons, trace ids) came from a file or a
server, and judge reasons quote the agent's users. Shown as text, never as instructions to the
terminal or the markdown renderer: control and format characters (ESC and its sequences, BEL,
CR, the bidirectional overrides) are written as visible escapes (``\\x1b``), markdown's
punctuation is escaped, and the terminal renderer never reads markup in them
(:mod:`otel_scorers.report.render`)."""

from __future__ import annotations

import re
import unicodedata
from datetime import datetime, timezone

__all__ = ["is_trace_id", "markdown_text", "one_line", "plain", "utc"]

#: An OTel trace id as the exporters write it: only such ids go into a link.
_TRACE_ID = re.compile(r"[0-9a-f]{32}")
#: Inline markdown that could turn text into a link, an image, HTML, emphasis or a table cell.
_MARKDOWN = re.compile(r"([\\`*\[\]()<>!|~#{}])")
#: ``_`` opens emphasis only at a word's edge; inside a word (``greets_the_user``) it is text.
_EDGE_UNDERSCORE = re.compile(r"(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")


def _visible(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def plain(text: str) -> str:
    """``text`` with every control (Cc) and format (Cf) character but tab and newline written
    as a visible escape: nothing in it moves the cursor, clears the screen, opens an OSC 8
    link or reorders what follows."""
    if text.isprintable():
        return text
    return "".join(_visible(c) if c not in "\n\t" and unicodedata.category(c) in ("Cc", "Cf")
                   else c for c in text)


def one_line(text: str, limit: int = 160) -> str:
    """:func:`plain` on one line (white space folded), cut at ``limit`` with an ellipsis."""
    text = " ".join(plain(text).split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def markdown_text(text: str, limit: int = 160) -> str:
    """:func:`one_line`, its markdown punctuation escaped: renders as the text it is."""
    escaped = _MARKDOWN.sub(r"\\\1", one_line(text, limit))
    return _EDGE_UNDERSCORE.sub(r"\\_", escaped)


def is_trace_id(value: str) -> bool:
    """32 lowercase hex digits: what may go into a trace link."""
    return _TRACE_ID.fullmatch(value) is not None


def utc(ns: int) -> str:
    """A time (nanoseconds since the epoch) as the digest prints it."""
    return datetime.fromtimestamp(ns / 1e9, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
