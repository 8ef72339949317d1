"""Instructions per evaluation (``eval_instr_per_eval_*``): the CPU figure that does not move
with the machine.

``cpu_ms_per_eval_c32_l0.2`` (``run.py``, throughput) is process CPU time, and on a shared
host it swings by a fifth between two runs of one commit (a neighbour's load slows every
instruction). This counts instructions instead, under callgrind: the same pipeline as the
throughput benchmark (C = 32, the scripted judge answering in 0.2 s in its own process, one
rubric scorer, no cache), warmed up, then ``RUNS`` agent runs (each one evaluation) between two
dumps requested with ``callgrind_control``; every thread's count in that window divided by the
evaluations finished in it. ``all_threads`` is the whole process (the application thread's
spans and ``on_end`` included: one run per evaluation here, 1.25 in the throughput benchmark);
``loop_thread`` is the library's event loop alone, where an evaluation is captured, judged and
emitted. Repeated runs agree within 1 %. Needs valgrind; otherwise the figures are reported as
unavailable, never estimated.

    python bench/eval_instr.py RUNS     # the workload, run under callgrind by bench_eval_instr
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))


def bench_eval_instr(quick: bool, figure: Callable[[str, Any], None]) -> None:
    runs = 200 if quick else 600
    valgrind, control = shutil.which("valgrind"), shutil.which("callgrind_control")
    if valgrind is None or control is None:
        figure("eval_instr_per_eval", "unavailable (valgrind's callgrind_control missing)")
        return
    with tempfile.TemporaryDirectory() as work:
        done = subprocess.run(
            [valgrind, "--tool=callgrind", "--separate-threads=yes",
             f"--callgrind-out-file={work}/cg.%p", sys.executable, __file__, str(runs)],
            env={**os.environ, "PYTHONHASHSEED": "0"}, capture_output=True, text=True,
            timeout=900, check=False)
        evaluations = [int(line.split()[1]) for line in done.stdout.splitlines()
                       if line.startswith("evaluations ")]
        counts: dict[int, int] = {}  # thread -> instructions in the window (part 2)
        for path in Path(work).glob("cg.*.2-*"):
            match = re.search(r"\.2-(\d+)$", path.name)
            totals = [line for line in path.read_text().splitlines()
                      if line.startswith("totals:")]
            if match and totals:
                counts[int(match.group(1))] = int(totals[0].split()[1])
    if not evaluations or not evaluations[0] or not counts:
        figure("eval_instr_per_eval", "unavailable (the workload did not finish under valgrind)")
        return
    finished = evaluations[0]
    figure("eval_instr_per_eval_c32_l0.2_all_threads", round(sum(counts.values()) / finished))
    # the busiest thread other than the main one is the library's event loop
    loop = max((count for thread, count in counts.items() if thread != 1), default=0)
    figure("eval_instr_per_eval_c32_l0.2_loop_thread", round(loop / finished))


def _workload(runs: int) -> None:
    from run import judge_server
    from workloads import agent_iteration, scoring_provider

    def dump() -> None:
        subprocess.run(["callgrind_control", "-d", str(os.getpid())],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)

    with judge_server(0.2) as url:
        cfg = scoring_provider(url, ratio=1.0, concurrency=32, queue_size=100_000,
                               scorers=("rubric",), cache_ttl_s=0, collect=False)
        processor = cfg.processor
        assert processor is not None
        run = agent_iteration(cfg.tracer, distinct=True)
        for _ in range(64):  # warm-up: imports, first calls, 32 connections open
            run()
        processor.force_flush(600_000)
        before = int(processor.stats()["rubric"].get("scored", 0))
        dump()  # part 1: start-up and warm-up, left out
        for index in range(runs):
            run()
            if index % 8 == 7:  # arrivals in small groups, as a paced producer's
                time.sleep(0.05)
        processor.force_flush(600_000)
        dump()  # part 2: the window
        print("evaluations", int(processor.stats()["rubric"].get("scored", 0)) - before,
              flush=True)
    os._exit(0)  # no teardown: nothing after the window is measured


if __name__ == "__main__":
    _workload(int(sys.argv[1]))
