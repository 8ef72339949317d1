"""A finished batch's output and error files, read line by line in bounded memory.

Each file is downloaded chunk by chunk into an unlinked temporary file (at most
``MAX_FILE_BYTES`` of it: past that the download stops, the lines read so far count and
``Reading.truncated`` says the rest was left), then read back one line at a time, each line at
most ``MAX_LINE_BYTES`` (a longer one is skipped, counted ``unreadable``). The memory a reading
costs is one download chunk plus one line and its parsed JSON (a few times ``MAX_LINE_BYTES``
at the worst), whatever the size of the provider's file. A ``custom_id`` seen twice keeps its
first line (counted ``duplicates``; the second is never used). An output file the provider
says it has but answers 404 (or 410) for is counted in ``missing`` and the reading goes on: its
lines are the batch's requests with no answer.
"""

from __future__ import annotations

import tempfile
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from otel_scorers import safe_json
from otel_scorers.errors import JudgeRequestError

__all__ = ["MAX_FILE_BYTES", "MAX_LINE_BYTES", "Reading", "file_lines", "read_answers"]

#: The most of one batch output or error file read (a provider's file of 50,000 judge answers
#: is well under it); past it the download stops.
MAX_FILE_BYTES = 256 * 1024 * 1024
#: The most of one line of such a file (a chat completion of a bounded judge answer, with its
#: envelope, is a few kB).
MAX_LINE_BYTES = 2 * 1024 * 1024
#: The states of a gone file (the provider deleted or never kept it).
GONE = frozenset({404, 410})

#: ``handle(custom_id, body, reason)``: ``body`` the chat completion of an answered line
#: (``reason`` empty), or ``None`` with why it got none (``batch_expired``, ``batch_failed``)
Handler = Callable[[str, "dict[str, Any] | None", str], Awaitable[None]]


@dataclass
class Reading:
    """What a reading of a batch's files found, beside the lines it handed on."""

    lines: int = 0
    #: lines that are not a JSON object with a string ``custom_id`` (or over the line bound)
    unreadable: int = 0
    #: lines whose ``custom_id`` an earlier line had (the first one kept)
    duplicates: int = 0
    #: a file was over ``MAX_FILE_BYTES``: its lines past the bound were never read
    truncated: bool = False
    #: the files the provider answered 404 or 410 for
    missing: list[str] = field(default_factory=list)


def file_lines(source: IO[bytes], reading: Reading) -> Iterator[dict[str, Any]]:
    """The JSON objects of ``source``, one line at a time (bounded; see the module)."""
    while True:
        line = source.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
            reading.unreadable += 1
            while line and not line.endswith(b"\n"):  # the rest of the long line, skipped
                line = source.readline(MAX_LINE_BYTES + 1)
            continue
        if not line.strip():
            continue
        reading.lines += 1
        try:
            item = safe_json.loads(line)
        except ValueError:
            reading.unreadable += 1
            continue
        if isinstance(item, dict) and isinstance(item.get("custom_id"), str):
            yield item
        else:
            reading.unreadable += 1


def _outcome(line: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str]:
    response = line.get("response")
    if isinstance(response, dict) and response.get("status_code") == 200 and \
            isinstance(response.get("body"), dict):
        return response["body"], ""
    error = line.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    return None, "batch_expired" if code == "batch_expired" else "batch_failed"


async def read_answers(api: Any, state: Mapping[str, Any], handle: Handler, *,
                       directory: str | Path | None = None) -> Reading:
    """Each line of the output then the error file of the finished batch ``state``, handed to
    ``handle`` as it is read (the temporary copies live in ``directory``: the system's
    temporary directory by default). A connection failure or another non-2xx answer raises
    (the caller tries again later: a line already handled is handled again then)."""
    reading = Reading()
    seen: set[str] = set()
    for key in ("output_file_id", "error_file_id"):
        file_id = state.get(key)
        if not isinstance(file_id, str) or not file_id:
            continue
        with tempfile.TemporaryFile(dir=directory) as copy:
            try:
                complete = await api.download(file_id, copy, MAX_FILE_BYTES)
            except JudgeRequestError as exc:
                if exc.status_code not in GONE:
                    raise
                reading.missing.append(file_id)
                continue
            reading.truncated = reading.truncated or not complete
            copy.seek(0)
            for line in file_lines(copy, reading):
                ident = line["custom_id"]
                if ident in seen:
                    reading.duplicates += 1
                    continue
                seen.add(ident)
                body, reason = _outcome(line)
                await handle(ident, body, reason)
    return reading


async def answers(api: Any, state: Mapping[str, Any], *,
                  directory: str | Path | None = None
                  ) -> tuple[dict[str, dict[str, Any]], dict[str, str], Reading]:
    """A finished batch's answers by ``custom_id`` and its requests that got none with why,
    all in memory (``rescore --lane batch``, whose runs are in memory anyway)."""
    answered: dict[str, dict[str, Any]] = {}
    failed: dict[str, str] = {}

    async def keep(ident: str, body: dict[str, Any] | None, reason: str) -> None:
        if body is not None:
            answered[ident] = body
        else:
            failed[ident] = reason

    reading = await read_answers(api, state, keep, directory=directory)
    return answered, failed, reading
