"""The batch lane's spool with many requests queued: ``spool_probe.py JUDGE_URL N``.

N deferred judgements of the demo's rubric (each entry as the lane writes it: the run, its ids
and the judge request body) are added to a spool through :meth:`Spool.add` (synced files), then
one round of the real lane submits a batch to the scripted judge (at most ``batch.max_lines``
lines) with nothing else in the process. Prints one JSON line: the entries' bytes and the disk
they use, the time per add, the round's time, and the process's resident memory before the
round and at its peak (VmHWM, reset before the round).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def peak_mb() -> float:
    """This process's peak resident memory since exec (or since :func:`reset_peak`): VmHWM
    (``ru_maxrss`` would carry the parent's peak over the fork)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1000
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1000


def reset_peak() -> None:
    with contextlib.suppress(OSError), open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")  # the peak resident memory starts again from now


def main() -> None:
    url, count = sys.argv[1], int(sys.argv[2])
    from lanes import _runs

    from otel_scorers import RubricScorer
    from otel_scorers.background_loop import run_sync
    from otel_scorers.judge.batch_output import read_answers
    from otel_scorers.judge.batches import (
        FINISHED,
        MAX_BATCH_BYTES,
        BatchAPI,
        batch_lines,
        replay,
        request_of,
    )
    from otel_scorers.judge.client import JudgeClient
    from otel_scorers.judge.spool import Spool, SpoolRefused
    from otel_scorers.pipeline.batch.lane import BatchLane, BatchParts

    made = []
    for run, rubric in _runs():
        scorer = RubricScorer(JudgeClient("openai/gpt-5-mini", api_base=url, api_key="k",
                                          structured_output="json_object"), rubric)
        made.append((run, run_sync(request_of(scorer, run))))
    with tempfile.TemporaryDirectory(dir=os.environ.get("SPOOL_PROBE_DIR")) as root:
        spool = Spool(root, 1 << 40)
        started = time.perf_counter()
        for index in range(count):
            run, body = made[index % len(made)]
            ident = hashlib.sha256(f"{index}".encode()).hexdigest()[:32]
            spool.add({"id": ident, "scorer": "rubric", "run": run.model_dump(mode="json"),
                       "trace_id": f"{index:032x}", "span_id": f"{index:016x}",
                       "span_name": "invoke_agent support-bot", "agent": "support-bot",
                       "source": "gen_ai", "body": body, "attempts": 0,
                       "spooled_ns": time.time_ns()})
        add_s = (time.perf_counter() - started) / count
        disk = sum(p.stat().st_blocks * 512 for p in Path(root).rglob("*.json"))
        entry_bytes = spool.used_bytes
        parts = BatchParts(spool=spool, api=BatchAPI(url, "k"), request_of=request_of,
                           replay=replay, batch_lines=batch_lines,
                           read_answers=read_answers, finished=FINISHED, refused=SpoolRefused,
                           max_batch_bytes=MAX_BATCH_BYTES,
                           interval_s=3600, max_lines=50_000, max_attempts=3, window="24h",
                           give_up_after_s=90_000)
        lane = BatchLane(parts, {"rubric": object()}, emission=None,
                         log_once=lambda key, line: None)
        before = rss_mb()
        reset_peak()
        started = time.perf_counter()
        run_sync(lane.round())
        round_s = time.perf_counter() - started
        peak = peak_mb()
        submitted = lane.counts["submitted"]
    result: dict[str, Any] = {
        "queued": count, "entry_bytes_mean": round(entry_bytes / count),
        "disk_mb": round(disk / 1e6, 1), "add_ms": round(add_s * 1000, 3),
        "round_s": round(round_s, 1), "round_submitted": submitted,
        "rss_mb_before_round": round(before, 1), "rss_mb_peak_round": round(peak, 1)}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
