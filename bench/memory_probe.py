"""Peak RSS of a process that ends many selected spans (run by bench/run.py in a subprocess).

    python bench/memory_probe.py MODE JUDGE_URL SPANS

MODE: ``baseline`` (plain SDK pipeline, with litellm imported as the scoring process has it),
``hung_judge`` (the scoring processor, its judge never answers), ``hung_judge_enriched`` (the
same, owning the exporter: spans are held for scores). Prints the peak resident set size in MB on
its last line: ``VmHWM`` of this process (``ru_maxrss`` is not used: Linux carries the parent's
peak across fork and exec, so a child of a big benchmark process would report the parent's).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from workloads import (
    NoOpExporter,
    agent_iteration,
    plain_provider,
    scoring_provider,
)


def peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def main() -> None:
    mode, url, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    # Every mode loads litellm first: the scoring modes would load it lazily on the first judge
    # call (in a thread, still loading when a short probe ends); the baseline counts it too.
    from otel_scorers.judge.client import load_litellm

    load_litellm()
    if mode == "baseline":
        cfg = plain_provider()
    else:
        cfg = scoring_provider(url, ratio=1.0, collect=False, exporter=NoOpExporter()
                               if mode == "hung_judge_enriched" else None)
    run = agent_iteration(cfg.tracer, distinct=True)
    for _ in range(count):
        run()
    if cfg.processor is not None:
        stats = cfg.processor.stats()["rubric"]
        print(f"selected={stats.get('selected')} dropped={stats.get('dropped')}",
              file=sys.stderr)
        cfg.processor.shutdown()
    cfg.provider.shutdown()
    print(peak_rss_mb())
    sys.stdout.flush()
    os._exit(0)  # the hung judge calls were cancelled; do not wait on anything else


if __name__ == "__main__":
    main()
