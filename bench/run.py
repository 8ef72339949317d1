"""Benchmarks of otel-scorers: each figure is a ratio (or a rate) against a baseline measured in
the same run, never an absolute timing compared with a constant.

    python bench/run.py            # the full set (under 10 minutes on 2 cores)
    python bench/run.py --quick    # smaller sizes (under a minute)
    python bench/run.py --only hot_path,throughput

Output ends with one line per figure, ``name: value``.

The judge is a scripted OpenAI-compatible server (``python -m otel_scorers.testing``) in a
separate process, answering after a fixed latency, so the judge's own CPU never competes with the
measured process and litellm really makes its HTTP calls.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from workloads import (  # noqa: E402
    NoOpExporter,
    agent_iteration,
    plain_provider,
    scoring_provider,
)

FIGURES: list[tuple[str, float | int | str]] = []


def figure(name: str, value: float | int | str) -> None:
    FIGURES.append((name, value))
    print(f"  {name}: {value}", flush=True)


@contextmanager
def judge_server(delay_s: float) -> Iterator[str]:
    """A scripted judge in its own process; yields its api_base."""
    process = subprocess.Popen([sys.executable, "-m", "otel_scorers.testing",
                                "--delay", str(delay_s)],
                               stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        if not url.startswith("http"):
            raise RuntimeError("the scripted judge did not start")
        yield url
    finally:
        process.terminate()
        process.wait(10)


# -- hot path ---------------------------------------------------------------------------------
def time_batch(run: Callable[[], None], iterations: int) -> float:
    started = time.perf_counter()
    for _ in range(iterations):
        run()
    return (time.perf_counter() - started) / iterations


HOT_PATH_JUDGE_LATENCY_S = 1.0  # a fast real LLM judge answers in 1-5 s


def bench_hot_path(quick: bool) -> None:
    """Cost per traced workload (1 agent span + 4 children) with the processor vs without.

    Every measurement gets a fresh pipeline, shut down right after, so no configuration's
    background work (a backlog of evaluations) leaks into another's timing. Configurations are
    interleaved in shuffled order within each repetition; each figure is the median of the
    per-repetition ratios to the baseline (consecutive runs here differ by up to 20%).
    """
    reps, iterations = (3, 4000) if quick else (8, 20000)
    print(f"hot path: {reps} interleaved repetitions x {iterations} workloads, "
          f"judge latency {HOT_PATH_JUDGE_LATENCY_S:g}s", flush=True)
    with judge_server(HOT_PATH_JUDGE_LATENCY_S) as url:
        factories: dict[str, Callable[[], Any]] = {"baseline": plain_provider}
        for ratio in (0.0, 0.1, 1.0):
            factories[f"sampling_{ratio:g}"] = (
                lambda ratio=ratio: scoring_provider(url, ratio=ratio, collect=False))
        warm = factories["sampling_1"]()  # one-time costs: imports, litellm, connections
        time_batch(agent_iteration(warm.tracer, distinct=True), 20)
        assert warm.processor is not None
        warm.processor.force_flush(60_000)
        warm.processor.shutdown()
        warm.provider.shutdown()
        times: dict[str, list[float]] = {name: [] for name in factories}
        dropped: list[float] = []
        order = list(factories)
        for _ in range(reps):
            random.shuffle(order)
            for name in order:
                cfg = factories[name]()
                run = agent_iteration(cfg.tracer, distinct=True)
                time_batch(run, 20)
                times[name].append(time_batch(run, iterations))
                if cfg.processor is not None:
                    stats = cfg.processor.stats()["rubric"]
                    if name == "sampling_1":
                        dropped.append(stats.get("dropped", 0) / max(1, stats["selected"]))
                    cfg.processor.shutdown()
                cfg.provider.shutdown()
        for name in factories:
            if name != "baseline":
                ratios = [t / b for t, b in zip(times[name], times["baseline"], strict=True)]
                figure(f"hot_path_ratio_{name}", round(statistics.median(ratios), 3))
        figure("hot_path_us_per_workload_baseline",
               round(statistics.median(times["baseline"]) * 1e6, 1))
        figure("hot_path_sampling_1_dropped_fraction", round(statistics.median(dropped), 3))


# -- throughput -------------------------------------------------------------------------------
def bench_throughput(quick: bool) -> None:
    """Sustained evaluations per second with judge latency L and concurrency C vs C / L."""
    latency = 0.2
    seconds = 3.0 if quick else 8.0
    levels: Sequence[int] = (8, 32) if quick else (8, 32, 128)
    print(f"throughput: judge latency {latency}s, {seconds:g}s of load per level", flush=True)
    with judge_server(latency) as url:
        for concurrency in levels:
            ceiling = concurrency / latency
            total = int(ceiling * seconds)
            cfg = scoring_provider(url, ratio=1.0, concurrency=concurrency,
                                   queue_size=total + 10, scorers=("rubric",), cache_ttl_s=0)
            run = agent_iteration(cfg.tracer, distinct=True)
            run()  # warm-up evaluation (imports, connection)
            cfg.processor.force_flush(60_000)
            cpu_before, started = time.process_time(), time.perf_counter()
            for _ in range(total):
                run()
            cfg.processor.force_flush(600_000)
            elapsed = time.perf_counter() - started
            cpu = time.process_time() - cpu_before
            scored = cfg.processor.stats()["rubric"].get("scored", 0) - 1
            rate = scored / elapsed
            figure(f"throughput_eval_per_s_c{concurrency}", round(rate, 1))
            figure(f"throughput_fraction_c{concurrency}", round(rate / ceiling, 3))
            figure(f"cpu_ms_per_eval_c{concurrency}", round(cpu / max(1, scored) * 1000, 2))
            cfg.processor.shutdown()
            cfg.provider.shutdown()


# -- judge calls and tokens -------------------------------------------------------------------
def bench_calls(quick: bool) -> None:
    """Judge calls and tokens per evaluation, per scorer; and with the cache on repeats."""
    runs = 20 if quick else 60
    with judge_server(0.0) as url:
        cfg = scoring_provider(url, ratio=1.0, cache_ttl_s=0)
        run = agent_iteration(cfg.tracer, distinct=True)
        for _ in range(runs):
            run()
        cfg.processor.force_flush(120_000)
        for scorer in ("rubric", "prompt_alignment"):
            spans = cfg.evaluation_spans(scorer)
            calls = sum(s.attributes["otel_scorers.judge.calls"] for s in spans)
            tokens = sum(s.attributes["otel_scorers.judge.input_tokens"]
                         + s.attributes["otel_scorers.judge.output_tokens"] for s in spans)
            figure(f"judge_calls_per_eval_{scorer}", round(calls / len(spans), 3))
            figure(f"judge_tokens_per_eval_{scorer}", round(tokens / len(spans), 1))
        cfg.processor.shutdown()
        cfg.provider.shutdown()
        # half the runs repeat an earlier run exactly: the cache serves them
        cfg = scoring_provider(url, ratio=1.0, cache_ttl_s=600, concurrency=1)
        run = agent_iteration(cfg.tracer, distinct=True, repeat_every=2)
        for _ in range(runs):
            run()
        cfg.processor.force_flush(120_000)
        stats = cfg.processor.stats()["rubric"]
        evaluations = stats.get("scored", 0) + stats.get("cached", 0)
        figure("judge_calls_per_eval_with_cache_half_repeats",
               round(stats.get("scored", 0) / max(1, evaluations), 3))
        cfg.processor.shutdown()
        cfg.provider.shutdown()


# -- memory -----------------------------------------------------------------------------------
def bench_memory(quick: bool) -> None:
    """Peak RSS while a judge that never answers faces many selected spans, vs a baseline."""
    spans = 20_000 if quick else 100_000
    script = Path(__file__).resolve().parent / "memory_probe.py"
    with judge_server(3600.0) as url:
        results = {}
        for mode in ("baseline", "hung_judge", "hung_judge_enriched"):
            out = subprocess.run([sys.executable, str(script), mode, url, str(spans)],
                                 capture_output=True, text=True, timeout=600, check=True)
            results[mode] = float(out.stdout.strip().splitlines()[-1])
    figure("peak_rss_mb_baseline", round(results["baseline"], 1))
    figure("peak_rss_mb_hung_judge", round(results["hung_judge"], 1))
    figure("peak_rss_mb_hung_judge_enriched", round(results["hung_judge_enriched"], 1))
    figure("peak_rss_ratio_hung_judge", round(results["hung_judge"] / results["baseline"], 3))
    figure("memory_probe_spans", spans)


BENCHES = {"hot_path": bench_hot_path, "throughput": bench_throughput, "calls": bench_calls,
           "memory": bench_memory}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes (under a minute)")
    parser.add_argument("--only", default=",".join(BENCHES), help="comma list of benchmarks")
    args = parser.parse_args(argv)
    started = time.monotonic()
    for name in args.only.split(","):
        BENCHES[name.strip()](args.quick)
    print(f"\n# {len(FIGURES)} figures in {time.monotonic() - started:.0f}s"
          f"{' (quick)' if args.quick else ''}")
    for name, value in FIGURES:
        print(f"{name}: {value}")


if __name__ == "__main__":
    main()
