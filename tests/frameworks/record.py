"""Record every case of the framework matrix for replay (``make record-frameworks``).

Each case's app runs in its framework's environment with no scoring installed (the recording is
the application's telemetry only) and its OTLP JSON lines are kept as
``recorded/<case>.jsonl.gz``, with ``recorded/<case>.json`` saying what the judge must be
shown for it and which package versions produced it. ``python tests/frameworks/record.py
CASE ...`` records some cases only.
"""

from __future__ import annotations

import gzip
import json
import os
import runpy
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def record(case: str, venv: str) -> None:
    python = ROOT / ".frameworks" / venv / "bin" / "python"
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("OTEL_", "TRACELOOP_", "OPENINFERENCE_", "MATRIX_"))}
    env.update(LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_OFFLINE_MODE="true",
               HF_HUB_OFFLINE="1")
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([str(python), str(HERE / "apps" / "harness.py"), case, out], env=env,
                       check=True, timeout=300, cwd=ROOT)
        result = json.loads((Path(out) / "result.json").read_text())
        target = HERE / "recorded"
        target.mkdir(exist_ok=True)
        with (Path(out) / "telemetry.jsonl").open("rb") as source, \
                gzip.GzipFile(target / f"{case}.jsonl.gz", "wb", mtime=0) as sink:
            shutil.copyfileobj(source, sink)
    manifest = {"case": case, "venv": venv, "expected": result["expected"],
                "versions": result["versions"], "llm_requests": result["llm_requests"],
                "recorded": time.strftime("%Y-%m-%d"),
                "command": f".frameworks/{venv}/bin/python tests/frameworks/apps/harness.py "
                           f"{case} OUT"}
    (target / f"{case}.json").write_text(json.dumps(manifest, indent=2) + "\n")
    print(f"recorded {case}")


def main(argv: list[str]) -> int:
    cases = runpy.run_path(str(HERE / "apps" / "cases.py"))["CASES"]
    for case in argv[1:] or sorted(cases):
        record(case, cases[case][0])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
