"""The JSON-lines results of ``rescore``: one line per (evaluated span, scorer), resumable."""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, Any

from otel_scorers import safe_json
from otel_scorers.capture.sessions import conversation_of
from otel_scorers.pipeline.sessions import SessionJob
from otel_scorers.rescore.runs import RunRef
from otel_scorers.scorers.result import ScoreResult
from otel_scorers.scorers.run import ScorerRun

__all__ = ["done_pairs", "ends_torn", "result_line", "write_line"]


def result_line(ref: RunRef, result: ScoreResult, agent: str | None,
                run: ScorerRun | None = None, session: SessionJob | None = None
                ) -> dict[str, Any]:
    """One JSON-lines record: the evaluated span's identity, then the result's ``to_dict``
    (a skipped evaluation with ``score: null``, ``label: "skipped"``), and with ``run`` the
    judged run in the labelled-case shape (``input``, ``system``, ``context``, ``output``) plus
    what the agent did (``steps``: tool calls, retrievals, LLM calls, handoffs, in order).
    A session result is on its last turn's span and says which turns it covers
    (``session``: ``id``, ``scope``, ``first_turn``, ``last_turn``, ``turns``,
    ``dropped_turns``)."""
    line = {"trace_id": ref.trace_id, "span_id": ref.span_id, "span_name": ref.span.name,
            "agent": agent, **result.reported().to_dict()}
    if session is not None:
        scope, conversation = conversation_of(session.key)
        line["session"] = {"id": conversation, "first_turn": session.first_turn,
                           "last_turn": session.last_turn, "turns": len(session.run.turns),
                           "dropped_turns": session.dropped_turns}
        if scope is not None:  # what scopes the id (the service's name)
            line["session"]["scope"] = scope
    if run is not None:
        line["run"] = {"input": run.user_prompt or "", "system": run.system_prompt or "",
                       "context": [{"role": m.role, "content": m.content}
                                   for m in run.conversation],
                       "output": run.response,
                       "steps": [step.model_dump(exclude_defaults=True) for step in run.steps],
                       "tools": [tool.model_dump(exclude_defaults=True) for tool in run.tools]}
        if run.steps_dropped:
            line["run"]["steps_dropped"] = run.steps_dropped
        for key in ("output_schema", "duration_ns"):  # what the run declared, how long it took
            if getattr(run, key) is not None:
                line["run"][key] = getattr(run, key)
    return line


def done_pairs(path: Path) -> set[tuple[str, str, str]]:
    """(trace_id, span_id, scorer) already judged in an earlier output, each pair on its own
    (an error line means not done; a torn last line from an interrupted run is ignored). A
    pair skipped without a judge call (``no_rubric``, ``no_steps``, ...: a cause the user may
    have fixed since) is not done either: deciding it again costs no call, and its new line,
    later in the file, is the one that counts."""
    done: set[tuple[str, str, str]] = set()
    if not path.exists():
        return done
    with path.open(encoding="utf-8") as stream:
        for line in stream:
            try:
                record = safe_json.loads(line)
                key = (record["trace_id"], record["span_id"], record["scorer"])
            except (ValueError, KeyError, TypeError, RecursionError):
                continue
            if record.get("error") or (record.get("label") == "skipped"
                                       and not record.get("judge")):
                done.discard(key)
            else:
                done.add(key)
    return done


def ends_torn(path: Path) -> bool:
    """Whether ``path`` ends in the middle of a line (an interrupted run's last write)."""
    with path.open("rb") as stream:
        stream.seek(0, 2)
        if stream.tell() == 0:
            return False
        stream.seek(-1, 2)
        return stream.read(1) != b"\n"


def write_line(stream: IO[str], record: dict[str, Any]) -> None:
    stream.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
    stream.flush()
