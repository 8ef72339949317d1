"""CPU per evaluation of this tree against another commit's, measured in the same run.

    python bench/compare.py --base 5bdd553                 # 8 rounds
    python bench/compare.py --base 5bdd553 --rounds 12 --seconds 3

``bench/run.py``'s ``cpu_ms_per_eval_c32_l0.2`` is an absolute figure, and on a shared host it
moves with the host: one commit read from 1.2 to 2.7 ms within a day here, and 5bdd553, whose
window read 1.08 ms when issue 33's goal was set, read 1.5 to 2.8 ms on 2026-12-05. This measures
the same window (``run._throughput``: C = 32, L = 0.2 s, runs arriving at 1.25 x C / L, a fresh
pipeline, process CPU over the evaluations finished) for both trees, each window in a fresh
process, the two trees in ABBA order (this, base; base, this; ...), so that a host slowing down
or speeding up during the run weighs on both alike. Each round's ratio is this / base; the figure
is the median ratio (``cpu_ratio_vs_base_c32_l0.2``), printed with each tree's median window.

The base tree is ``git archive``'d into a temporary folder and run with this checkout's
virtual environment, its own ``otel_scorers``, its own ``bench/workloads.py`` and its own
scripted judge; the window is this tree's ``run._throughput`` (so both are measured alike), which
needs ``scoring_provider``, ``agent_iteration`` and ``RESOURCE``/``NoOpExporter``/``plain_provider``
in the base's ``bench/workloads.py`` (true from 5bdd553 on). Instruction counts compare without a
second tree: ``bench/eval_instr.py``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
LATENCY_S, CONCURRENCY = 0.2, 32


def window(tree: Path, seconds: float) -> dict[str, float]:
    """One throughput window of ``tree``'s pipeline, in this process (``--window``); refused
    when ``otel_scorers`` would come from elsewhere (an installed copy measured twice)."""
    sys.path[:0] = [str(tree), str(tree / "bench")]
    spec = importlib.util.spec_from_file_location("workloads", tree / "bench" / "workloads.py")
    assert spec is not None and spec.loader is not None
    workloads = importlib.util.module_from_spec(spec)
    sys.modules["workloads"] = workloads  # this tree's run.py imports it by that name
    spec.loader.exec_module(workloads)
    spec = importlib.util.spec_from_file_location("bench_run", HERE / "run.py")
    assert spec is not None and spec.loader is not None
    run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run)
    import otel_scorers
    if not Path(otel_scorers.__file__).resolve().is_relative_to(tree.resolve()):
        raise RuntimeError(f"otel_scorers came from {otel_scorers.__file__}, not {tree}")
    with run.judge_server(LATENCY_S) as url:
        rate, cpu, off_app = run._throughput(url, LATENCY_S, CONCURRENCY, seconds)
    return {"rate": rate, "cpu_ms_per_eval": cpu, "off_app_thread": off_app}


def measure(tree: Path, seconds: float) -> dict[str, float]:
    """A window of ``tree`` in a fresh process (its own ``otel_scorers`` first on the path, for
    the scripted judge's process too)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--window", str(tree),
                          "--seconds", str(seconds)], env=env, cwd=tree, capture_output=True,
                         text=True, timeout=600, check=False)
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"the window of {tree} failed:\n{out.stderr[-2000:]}")
    result: dict[str, float] = json.loads(lines[-1])
    return result


def archive(rev: str, into: Path) -> Path:
    """``rev``'s tree, extracted under ``into`` (``rev`` resolved to a commit first, so that
    nothing in it is read as an option of git's)."""
    commit = subprocess.run(["git", "rev-parse", "--verify", "--end-of-options",
                             f"{rev}^{{commit}}"], cwd=ROOT, capture_output=True, text=True,
                            check=False)
    if commit.returncode != 0:
        raise SystemExit(f"compare: {rev!r} is not a commit of this repository")
    tar = into / "base.tar"
    subprocess.run(["git", "archive", "--format=tar", "-o", str(tar), commit.stdout.strip()],
                   cwd=ROOT, check=True)
    tree = into / "base"
    tree.mkdir()
    with tarfile.open(tar) as archived:
        archived.extractall(tree, filter="data")
    return tree


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", help="the commit to compare with (any git revision)")
    parser.add_argument("--rounds", type=int, default=8, help="windows per tree (default 8)")
    parser.add_argument("--seconds", type=float, default=2.0, help="seconds per window")
    parser.add_argument("--window", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.window is not None:
        print(json.dumps(window(args.window, args.seconds)), flush=True)
        return
    if not args.base:
        parser.error("--base is required")
    with tempfile.TemporaryDirectory(prefix="otel-scorers-compare-") as tmp:
        base = archive(args.base, Path(tmp))
        trees = {"this": ROOT, "base": base}
        results: dict[str, list[dict[str, float]]] = {"this": [], "base": []}
        print(f"compare: this tree vs {args.base}, {args.rounds} rounds of "
              f"{args.seconds:g}s windows (C = {CONCURRENCY}, L = {LATENCY_S:g}s), ABBA order",
              flush=True)
        for i in range(args.rounds):
            order = ("this", "base") if i % 2 == 0 else ("base", "this")
            for name in order:
                results[name].append(measure(trees[name], args.seconds))
            this, base_ = results["this"][-1], results["base"][-1]
            print(f"  round {i + 1}: this {this['cpu_ms_per_eval']:.2f} ms, base "
                  f"{base_['cpu_ms_per_eval']:.2f} ms, ratio "
                  f"{this['cpu_ms_per_eval'] / base_['cpu_ms_per_eval']:.3f}", flush=True)
    for key, suffix in (("cpu_ms_per_eval", ""), ("off_app_thread", "_off_app_thread")):
        ratios = [t[key] / b[key] for t, b in zip(results["this"], results["base"],
                                                      strict=True)]
        print(f"  cpu_ratio_vs_base{suffix}_c32_l0.2: {statistics.median(ratios):.3f} "
              f"(rounds {min(ratios):.3f} to {max(ratios):.3f})")
        for name in ("this", "base"):
            print(f"  cpu_ms_per_eval{suffix}_c32_l0.2_{name}: "
                  f"{statistics.median(r[key] for r in results[name]):.2f} (median window)")


if __name__ == "__main__":
    main()
