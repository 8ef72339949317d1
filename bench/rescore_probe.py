"""Peak RSS of ``otel-scorers rescore`` over one file (run by bench/run.py in a subprocess).

    python bench/rescore_probe.py FILE CONFIG

Runs the command in this process and prints the peak resident set size in MB (``VmHWM``) on its
last line.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def main(path: str, config: str) -> None:
    from otel_scorers.cli import main as cli

    try:
        cli(["rescore", path, "--config", config, "-o", os.devnull, "--restart",
             "--no-progress", "--concurrency", "16"], standalone_mode=False)
    finally:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                print(int(line.split()[1]) / 1024, flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
