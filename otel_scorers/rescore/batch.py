"""``rescore --lane batch``: history back-filled at the batch price.

Every selected run's judge requests (each turn scorer's own prompt, recorded without a call) go
to the provider as one batch (OpenAI's files and batches endpoints); the command waits for it,
polling, and writes each answer as a result line, parsed by the scorer's own code and priced at
the batch rates. The batch's id is kept beside the output (``<output>.batch.json``) until its
results are written: a command that is stopped, or times out waiting, is run again the same way
and picks the same batch up instead of paying for a second one. A request the batch did not
answer is an error line (``batch_failed``, ``batch_expired``). A scorer that asks no judge (a
code scorer) is judged at once. Session scorers are refused (they judge whole conversations:
rescore them live). The runs of one pass are held in memory while the batch runs: bound it with
``--limit``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from otel_scorers.errors import ConfigError
from otel_scorers.judge.batches import (
    FINISHED,
    MAX_BATCH_BYTES,
    answers,
    api_for,
    batch_lines,
    replay,
    request_of,
)
from otel_scorers.scorers.result import ScoreError, ScoreResult

__all__ = ["BatchTimeout", "judge_in_batch"]

#: The most requests in one batch (OpenAI's limit).
MAX_BATCH_LINES = 50_000



class BatchTimeout(Exception):
    """The batch was not done in time; its id is kept for the next run of the command."""


async def judge_in_batch(rescorer: Any, selected: Iterator[tuple[Any, list[str]]],
                         judging: Any, state_path: Path | None, *, poll_s: float,
                         timeout_s: float) -> None:
    """Judge the ``selected`` runs in one batch, writing each result through ``judging``
    (the pass's writer)."""
    processor = rescorer.processor
    scorers = {str(s.name): s for s in processor.scorers}
    api = api_for([s.judge for s in scorers.values() if getattr(s, "judge", None) is not None],
                  "--lane batch")
    items: dict[str, tuple[Any, str, Any, str | None, dict[str, Any]]] = {}
    for ref, names in iter(lambda: next(selected, None), None):
        captured = processor.on_demand.capture(ref.span, descendants=ref.descendants,
                                               nested=ref.nested, agent=ref.agent,
                                               links=ref.links)
        agent = processor.on_demand.agent_of(ref.span) or ref.agent
        if captured.run is None:
            judging.plan.outcome["not_captured"] += 1
            continue
        for name in names:
            body = await request_of(scorers[name], captured.run)
            if body is None:  # asks no judge: judged now
                judging.write(ref, [await scorers[name].arun(captured.run)], agent, None)
                continue
            ident = hashlib.sha256(f"{ref.trace_id}:{ref.span_id}:{name}".encode()
                                   ).hexdigest()[:32]
            items[ident] = (ref, name, captured.run, agent, body)
    if not items:
        return
    batch_id = _resumed(state_path, items)
    if batch_id is None:
        lines = batch_lines({ident: item[4] for ident, item in items.items()})
        if len(items) > MAX_BATCH_LINES or len(lines) > MAX_BATCH_BYTES:
            raise ConfigError(
                f"{len(items)} judge requests ({len(lines) / 1e6:.0f} MB) are more than one "
                f"batch carries ({MAX_BATCH_LINES} requests, {MAX_BATCH_BYTES // 2**20} MB): "
                "bound the pass with --limit and run it in parts")
        batch = await api.create(await api.upload(lines), "24h")
        batch_id = str(batch.get("id") or "")
        if not batch_id:
            raise ConfigError("the batch API gave the batch no id")
        if state_path is not None:
            state_path.write_text(json.dumps({"batch": batch_id, "ids": sorted(items)}))
    deadline = time.monotonic() + timeout_s
    while True:
        state = await api.retrieve(batch_id)
        if state.get("status") in FINISHED:
            break
        if time.monotonic() >= deadline:
            raise BatchTimeout(f"batch {batch_id} is {state.get('status')} after "
                               f"{timeout_s:g}s: run the same command again to pick it up")
        await asyncio.sleep(poll_s)
    answered, failed = await answers(api, state)
    reason = "batch_expired" if state.get("status") == "expired" else "batch_failed"
    for ident, (ref, name, run, agent, _body) in items.items():
        scorer = scorers[name]
        if ident in answered:
            result = await replay(scorer, run, answered[ident])  # priced as the batch tier's
        else:
            why = failed.get(ident, reason)
            result = ScoreResult(run_id=run.run_id, scorer=name,
                                 scale=float(getattr(scorer, "scale", 1.0)),
                                 error=ScoreError(type=why, message=f"the batch did not "
                                                  f"answer this request ({why})"),
                                 reason=f"Not scored: the batch did not answer ({why})")
        if not judging.write(ref, [result], agent, run if rescorer.include_run else None):
            return
        if judging.progress is not None:
            judging.progress(1)
    if state_path is not None:
        state_path.unlink(missing_ok=True)


def _resumed(state_path: Path | None, items: dict[str, Any]) -> str | None:
    """The batch an earlier run of the command submitted for the same requests, if any."""
    if state_path is None or not state_path.exists():
        return None
    try:
        state = json.loads(state_path.read_text())
    except (OSError, ValueError):
        return None
    if isinstance(state, dict) and state.get("ids") == sorted(items) and \
            isinstance(state.get("batch"), str):
        return str(state["batch"])
    return None
