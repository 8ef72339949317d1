"""Benchmarks of otel-scorers: each figure is a ratio (or a rate) against a baseline measured in
the same run, never an absolute timing compared with a constant.

    python bench/run.py            # the full set (under 10 minutes on 2 cores)
    python bench/run.py --quick    # smaller sizes (under 3 minutes)
    python bench/run.py --only hot_path,throughput

Output ends with one line per figure, ``name: value``.

``cpu_ms_per_eval_*`` are the exception, CPU time per evaluation, and move with the host;
``python bench/compare.py --base REV`` measures this tree's against another commit's in the
same run (alternating windows, the median ratio).

The judge is a scripted OpenAI-compatible server (``python -m otel_scorers.testing``) in a
separate process, answering after a fixed latency, so the judge's own CPU never competes with the
measured process and litellm really makes its HTTP calls.
"""

from __future__ import annotations

import argparse
import gc
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

from workloads import (
    RESOURCE,
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
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
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
def time_batch(run: Callable[[], None], iterations: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the calling thread) per iteration."""
    started, cpu = time.perf_counter(), time.thread_time()
    for _ in range(iterations):
        run()
    return ((time.perf_counter() - started) / iterations,
            (time.thread_time() - cpu) / iterations)


HOT_PATH_JUDGE_LATENCY_S = 1.0  # a fast real LLM judge answers in 1-5 s


def bench_hot_path(quick: bool) -> None:
    """Cost per traced workload (1 agent span + 4 children) with the processor vs without.

    Two figures per sampling ratio. ``hot_path_ratio_*`` is the CPU time of the application thread
    (``time.thread_time``): what creating and ending the spans costs the code that ends them, which
    is what the hot-path goal bounds. ``hot_path_wall_ratio_*`` is wall time: on top, the background
    evaluations share the interpreter (the GIL) with the application; the workload here ends 4000+
    agent runs per second back to back, so at sampling 1 (and 0.1) the process is saturated with
    evaluation work that a real agent (seconds per run) would never generate. Every measurement gets
    a fresh pipeline, shut down right after, so no configuration's background work (a backlog of
    evaluations) leaks into another's timing. Configurations are interleaved in shuffled order
    within each repetition; each figure is the median of the per-repetition ratios (``*_best``: the
    ratio of the best repetitions; consecutive runs here differ by up to 20%).
    """
    reps, iterations = (3, 800) if quick else (8, 20000)
    print(f"hot path: {reps} interleaved repetitions x {iterations} workloads, "
          f"judge latency {HOT_PATH_JUDGE_LATENCY_S:g}s", flush=True)
    with judge_server(HOT_PATH_JUDGE_LATENCY_S) as url:
        factories: dict[str, Callable[[], Any]] = {"baseline": plain_provider}
        for ratio in (0.0, 0.1, 1.0):
            factories[f"sampling_{ratio:g}"] = (
                lambda ratio=ratio: scoring_provider(url, ratio=ratio, collect=False))
        # judging in a child process: the application keeps capture and emission only
        factories["sampling_1_isolated"] = lambda: scoring_provider(
            url, ratio=1.0, collect=False, isolation="process")
        warm = factories["sampling_1"]()  # one-time costs: imports, litellm, connections
        time_batch(agent_iteration(warm.tracer, distinct=True), 20)
        assert warm.processor is not None
        warm.processor.force_flush(60_000)
        warm.processor.shutdown()
        warm.provider.shutdown()
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in factories}
        dropped: dict[str, list[float]] = {}
        order = list(factories)
        for _ in range(reps):
            random.shuffle(order)
            for name in order:
                cfg = factories[name]()
                run = agent_iteration(cfg.tracer, distinct=True)
                if name.endswith("_isolated"):  # the judging process up before the timing
                    run()
                    cfg.processor.force_flush(60_000)
                time_batch(run, 20)
                gc.collect()
                times[name].append(time_batch(run, iterations))
                if cfg.processor is not None:
                    stats = cfg.processor.stats()["rubric"]
                    if name.startswith("sampling_1"):
                        dropped.setdefault(name, []).append(
                            stats.get("dropped", 0) / max(1, stats["selected"]))
                    cfg.processor.shutdown()
                cfg.provider.shutdown()
        # The figure is the median of the per-repetition ratios (interleaved A/B pairs);
        # ``*_best`` is the ratio of each configuration's best repetition (noise only ever adds
        # time, as timeit's documentation argues), a cross-check.
        for kind, index in (("ratio", 1), ("wall_ratio", 0)):
            for name in factories:
                if name != "baseline":
                    ratios = [t[index] / b[index]
                              for t, b in zip(times[name], times["baseline"], strict=True)]
                    figure(f"hot_path_{kind}_{name}", round(statistics.median(ratios), 3))
                    best = min(t[index] for t in times[name])
                    figure(f"hot_path_{kind}_{name}_best", round(
                        best / min(b[index] for b in times["baseline"]), 3))
        figure("hot_path_cpu_us_per_workload_baseline",
               round(min(t[1] for t in times["baseline"]) * 1e6, 1))
        figure("hot_path_wall_us_per_workload_baseline",
               round(min(t[0] for t in times["baseline"]) * 1e6, 1))
        for name, fractions in dropped.items():
            figure(f"hot_path_{name}_dropped_fraction", round(statistics.median(fractions), 3))


def bench_hot_path_instructions(quick: bool) -> None:
    """Instructions the application thread executes per agent run, with the processor vs
    without: ``hot_path_instr_ratio_sampling_*``. A figure that does not move with machine load:
    callgrind (valgrind) counts the instructions of the main thread alone
    (``--separate-threads=yes``) inside the workload loop alone (``bench/instr_probe.py`` runs
    it inside ``functools.reduce``, the one function collection is toggled on), whatever the
    other threads and processes do. Repeated runs here agree within 0.5 %. Needs valgrind and a
    CPython whose libpython keeps its function symbols (pyenv builds do); otherwise the figures
    are reported as unavailable, never estimated."""
    import shutil
    import tempfile

    runs = 100 if quick else 600
    modes = ["baseline", "sampling_0", "sampling_0.1", "sampling_1", "trajectory_1"]
    valgrind = shutil.which("valgrind")
    counts: dict[str, int] = {}
    if valgrind is not None:
        with tempfile.TemporaryDirectory() as work:
            subprocess.run(
                [valgrind, "--tool=callgrind", "--separate-threads=yes",
                 "--collect-atstart=no", "--toggle-collect=functools_reduce",
                 "--dump-after=functools_reduce", f"--callgrind-out-file={work}/cg.%p",
                 sys.executable, str(Path(__file__).with_name("instr_probe.py")), str(runs),
                 *modes],
                env={**os.environ, "PYTHONHASHSEED": "0"}, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, timeout=900, check=False)
            # one part per mode, in order: cg.<pid>.<part>-01 (thread 1: the main thread)
            parts = sorted(Path(work).glob("cg.*.*-01"),
                           key=lambda p: int(p.name.split(".")[2].split("-")[0]))
            for mode, path in zip(modes, parts, strict=False):  # fewer parts: a crash
                totals = [line for line in path.read_text().splitlines()
                          if line.startswith("totals:")]
                if totals:
                    counts[mode] = int(totals[0].split()[1])
    if not counts.get("baseline"):
        figure("hot_path_instr_ratio", "unavailable (valgrind or libpython symbols missing)")
        return
    figure("hot_path_instr_per_workload_baseline", round(counts["baseline"] / runs))
    for mode, count in counts.items():
        if mode != "baseline":
            figure(f"hot_path_instr_ratio_{mode}", round(count / counts["baseline"], 4))


def bench_on_end(quick: bool) -> None:
    """Microseconds ``on_end`` takes on the application thread, per kind of span, for the
    scoring processor (both scorers, sampling 1, a judge that never answers; ``_full_queue``: with a
    queue of 50 runs, full, so nearly every run is decided on the calling thread and dropped,
    counted) and for the SDK's ``BatchSpanProcessor`` on the same ended spans:
    ``on_end_us_agent_span`` (an ``invoke_agent`` span: handed to the worker's intake),
    ``on_end_us_llm_span`` (a ``chat`` span without content) and ``on_end_us_plain_span`` (no GenAI
    attributes). Each figure is the best of several passes over distinct spans (noise only adds
    time), in CPU time of the calling thread (``time.thread_time_ns``): what ``on_end`` itself
    costs, not the time it waits for the GIL while the worker drains the intake (that moved work is
    in the wall-time figures of ``hot_path``)."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from workloads import NeverAnswers

    from otel_scorers.pipeline import Sampling, ScoringSpanProcessor

    count, passes = (2000, 5) if quick else (10000, 9)
    source = TracerProvider(resource=RESOURCE)
    kept = InMemorySpanExporter()
    source.add_span_processor(SimpleSpanProcessor(kept))
    run = agent_iteration(source.get_tracer("bench"), distinct=True)
    for _ in range(count * passes):
        run()
    spans = kept.get_finished_spans()
    kinds = {"agent": [s for s in spans if s.name.startswith("invoke_agent")],
             "llm": [s for s in spans if s.name.startswith("chat")][:count * passes],
             "plain": [s for s in spans if s.name.startswith("retrieve")]}
    processors = {
        "": ScoringSpanProcessor([NeverAnswers("rubric"), NeverAnswers("prompt_alignment")],
                                 sampling=Sampling(ratio=1.0), meter_provider=MeterProvider(),
                                 events=False, queue_size=count * passes,
                                 shutdown_timeout_s=0.1),
        # the queue full (a judge that never answers, a queue of 50 runs): nearly every run
        # is decided on the application thread and dropped, counted
        "_full_queue": ScoringSpanProcessor(
            [NeverAnswers("rubric"), NeverAnswers("prompt_alignment")],
            sampling=Sampling(ratio=1.0), meter_provider=MeterProvider(), events=False,
            queue_size=50, shutdown_timeout_s=0.1),
        "_batch_span_processor": BatchSpanProcessor(
            NoOpExporter(), max_queue_size=count * passes * 4,
            max_export_batch_size=count * passes * 4, schedule_delay_millis=3_600_000)}
    best: dict[str, float] = {}
    for kind, items in kinds.items():
        for suffix, processor in processors.items():
            times = []
            for index in range(passes):
                chunk = items[index * count:(index + 1) * count]
                end = processor.on_end
                gc.disable()
                started = time.thread_time_ns()
                for span in chunk:
                    end(span)
                times.append((time.thread_time_ns() - started) / 1e9 / len(chunk))
                gc.enable()
            best[f"{kind}{suffix}"] = min(times)
            figure(f"on_end_us_{kind}_span{suffix}", round(min(times) * 1e6, 3))
    for kind in kinds:
        figure(f"on_end_ratio_{kind}_span_vs_batch_span_processor",
               round(best[kind] / best[f"{kind}_batch_span_processor"], 2))
    figure("on_end_ratio_agent_span_full_queue_vs_batch_span_processor",
           round(best["agent_full_queue"] / best["agent_batch_span_processor"], 2))
    for processor in processors.values():
        processor.shutdown()
    # the SDK's exit hook keeps ``source`` alive: its 10,000s of kept spans would otherwise
    # stay in the heap of every later benchmark of this process (each garbage collection
    # walking them), as they did until 2026-12-05
    source.shutdown()
    kept.clear()


# -- throughput -------------------------------------------------------------------------------
def bench_throughput(quick: bool) -> None:
    """Sustained evaluations per second with judge latency L and concurrency C, vs C / L.

    Agent runs arrive paced at 1.25 x C / L (more than the pipeline can take, so the queue
    always holds work) rather than all at once: a burst would start every evaluation in the
    same instant and keep them in lockstep, measuring the burst rather than the pipeline. The
    rate is taken over a window that starts after 1.2 L (the ramp) while the queue is backlogged.
    L = 1 s is the primary setting (a fast real judge); L = 0.2 s shows where one process
    becomes CPU-bound (every evaluation costs a few ms of CPU, most of it inside litellm).
    ``cpu_ms_per_eval`` is the whole process's CPU in the window (the producer's span creation
    included) over the evaluations finished in it.

    Each setting is measured ``REPEATS`` times, each with a fresh pipeline (no backlog carried
    over): the rate and fraction are the median window, ``cpu_ms_per_eval*`` the least (the
    argument of ``timeit``: a busy host only ever adds CPU time, never removes it; on this
    shared machine one commit's window read from 1.25 to 2.1 ms within an hour, the
    application thread's unchanged work alone doubling), and ``cpu_ms_per_eval_*_median`` the
    median, printed beside it. Until 2026-12-05 the figure was one window.
    """
    seconds = 1.0 if quick else 8.0
    # C = 32 at L = 0.2 s is the CPU-bound setting the goals are set at; --quick measures it
    # and C = 32 at 1 s
    settings: list[tuple[float, int, str]] = [(1.0, 32, "c32"), (0.2, 32, "c32_l0.2")]
    if not quick:
        settings += [(1.0, 8, "c8"), (1.0, 128, "c128"), (0.2, 8, "c8_l0.2"),
                     (0.2, 128, "c128_l0.2")]
    print(f"throughput: {seconds:g}s measured per setting", flush=True)
    for latency in sorted({s[0] for s in settings}, reverse=True):
        with judge_server(latency) as url:
            for _, concurrency, name in [s for s in settings if s[0] == latency]:
                windows = [_throughput(url, latency, concurrency,
                                       seconds if latency >= 1.0 else max(seconds, 2.0))
                           for _ in range(THROUGHPUT_REPEATS)]
                ceiling = concurrency / latency
                rate = statistics.median(w[0] for w in windows)
                figure(f"throughput_eval_per_s_{name}", round(rate, 1))
                figure(f"throughput_fraction_{name}", round(rate / ceiling, 3))
                figure(f"cpu_ms_per_eval_{name}", round(min(w[1] for w in windows), 2))
                figure(f"cpu_ms_per_eval_{name}_median",
                       round(statistics.median(w[1] for w in windows), 2))
                # the same without the application's thread (its spans, 1.25 runs per
                # evaluation, and the processor's on_end): what evaluating costs off it
                figure(f"cpu_ms_per_eval_off_app_thread_{name}",
                       round(min(w[2] for w in windows), 2))


#: windows per throughput setting (see bench_throughput)
THROUGHPUT_REPEATS = 3


def _throughput(url: str, latency: float, concurrency: int, seconds: float
                ) -> tuple[float, float, float]:
    """One window with a fresh pipeline: evaluations per second, and CPU ms per evaluation
    of the process and off the application's thread."""
    ceiling = concurrency / latency
    arrival_rate = 1.25 * ceiling
    ramp = 1.2 * latency
    total = int(arrival_rate * (ramp + seconds))
    cfg = scoring_provider(url, ratio=1.0, concurrency=concurrency, queue_size=total + 10,
                           scorers=("rubric",), cache_ttl_s=0, collect=False)
    assert cfg.processor is not None
    processor = cfg.processor
    run = agent_iteration(cfg.tracer, distinct=True)
    for _ in range(concurrency):  # warm-up: imports, and C connections open, as in steady state
        run()
    processor.force_flush(60_000)

    def scored() -> int:
        return int(processor.stats()["rubric"].get("scored", 0))

    started = time.perf_counter()
    window: dict[str, float] = {}
    for i in range(total):
        now = time.perf_counter() - started
        if "t0" not in window and now >= ramp:
            window.update(t0=time.perf_counter(), cpu0=time.process_time(), n0=scored(),
                          app0=time.thread_time())
        pause = i / arrival_rate - now
        if pause > 0:
            time.sleep(pause)
        run()
    t1, cpu1, n1, app1 = time.perf_counter(), time.process_time(), scored(), time.thread_time()
    finished = max(1, n1 - window["n0"])
    processor.shutdown()
    cfg.provider.shutdown()
    cpu = cpu1 - window["cpu0"]
    return (finished / (t1 - window["t0"]), cpu / finished * 1000,
            (cpu - (app1 - window["app0"])) / finished * 1000)


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
        # both scorers, one fused call per run: calls summed over both scorers' evaluations
        cfg = scoring_provider(url, ratio=1.0, cache_ttl_s=0, fuse_judge_calls=True)
        run = agent_iteration(cfg.tracer, distinct=True)
        for _ in range(runs):
            run()
        cfg.processor.force_flush(120_000)
        spans = cfg.evaluation_spans("rubric") + cfg.evaluation_spans("prompt_alignment")
        calls = sum(s.attributes["otel_scorers.judge.calls"] for s in spans)
        tokens = sum(s.attributes["otel_scorers.judge.input_tokens"]
                     + s.attributes["otel_scorers.judge.output_tokens"] for s in spans)
        figure("judge_calls_per_eval_fused", round(calls / len(spans), 3))
        figure("judge_tokens_per_eval_fused", round(tokens / len(spans), 1))
        cfg.processor.shutdown()
        cfg.provider.shutdown()


# -- judge prompt size ------------------------------------------------------------------------
def bench_prompts(quick: bool) -> None:
    """Bytes (system + user message) and input tokens of the prompt the judge really receives,
    for a 3-criterion rubric and for prompt alignment in both mode, on the workload's agent run
    (a one-line prompt and answer, a one-line system prompt). ``json_schema`` is the mode of
    providers that enforce the schema (it is then not repeated in the prompt); ``json_object``
    carries the schema in the prompt."""
    from otel_scorers import PromptAlignmentScorer, RubricScorer
    from otel_scorers.background_loop import run_sync
    from otel_scorers.judge.provider import load_litellm
    from otel_scorers.testing import ScriptedJudgeServer, judge_responder

    del quick
    litellm = load_litellm()
    run = {"input": "Hello, who are you?", "system": "Be polite.", "output": "Hi! I am a bot."}
    with ScriptedJudgeServer(judge_responder()) as server:
        for mode in ("json_schema", "json_object"):
            options = {"api_base": server.url, "api_key": "k", "structured_output": mode}
            scorers = {"rubric_3": RubricScorer(
                server.model, "- greets the user\n- is polite\n- answers the question",
                **options),
                "alignment": PromptAlignmentScorer(server.model, **options)}
            for name, scorer in scorers.items():
                server.reset()
                scorer.run(run)
                messages = server.requests[-1].messages
                size = sum(len(str(m["content"]).encode()) for m in messages)
                suffix = "" if mode == "json_schema" else "_json_object"
                figure(f"judge_prompt_bytes_{name}{suffix}", size)
                if mode == "json_schema":
                    tokens = litellm.token_counter(model="gpt-4o-mini", messages=messages)
                    figure(f"judge_input_tokens_{name}", int(tokens))
            # both scorers in one fused call (the run's fields shown once)
            server.reset()
            run_sync(_fused(list(scorers.values()), run))
            messages = server.requests[-1].messages
            suffix = "" if mode == "json_schema" else "_json_object"
            figure(f"judge_prompt_bytes_fused_rubric_3_alignment{suffix}",
                   sum(len(str(m["content"]).encode()) for m in messages))
            if mode == "json_schema":
                figure("judge_input_tokens_fused_rubric_3_alignment", int(
                    litellm.token_counter(model="gpt-4o-mini", messages=messages)))


async def _fused(scorers: Sequence[Any], run: Any) -> list[Any]:
    """The scorers judging ``run`` as the pipeline does with fuse_judge_calls on."""
    from otel_scorers.scorers.fused import score_together
    from otel_scorers.scorers.run import ScorerRun

    named = {str(index): scorer for index, scorer in enumerate(scorers)}
    return list((await score_together(named, ScorerRun.coerce(run))).values())


# -- memory -----------------------------------------------------------------------------------
def bench_memory(quick: bool) -> None:
    """Peak RSS while a judge that never answers faces many selected spans, vs a baseline.

    Bounded means: more spans past the queue's size do not mean more memory
    (``peak_rss_growth_mb_from_10k_spans``: 10k spans, already far past the default queue of
    2048 runs, against the full count), and the excess over the plain pipeline is the queue and
    the held spans, not the workload.
    """
    spans = 10_000 if quick else 100_000
    script = Path(__file__).resolve().parent / "memory_probe.py"
    runs = {"baseline": ("baseline", spans), "hung_judge": ("hung_judge", spans),
            "hung_judge_enriched": ("hung_judge_enriched", spans)}
    if not quick:  # (quick: 20k runs, too close to 10k for the growth figure to mean much)
        runs["hung_judge_10k"] = ("hung_judge", 10_000)
    results = {}
    with judge_server(3600.0) as url:
        # the probes run side by side: each measures its own peak, and time matters here
        probes = {name: subprocess.Popen([sys.executable, str(script), mode, url, str(count)],
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                         text=True)
                  for name, (mode, count) in runs.items()}
        for name, probe in probes.items():
            out, _ = probe.communicate(timeout=600)
            if probe.returncode != 0:
                raise RuntimeError(f"memory probe {name} failed with {probe.returncode}")
            results[name] = float(out.strip().splitlines()[-1])
    figure("peak_rss_mb_baseline", round(results["baseline"], 1))
    figure("peak_rss_mb_hung_judge", round(results["hung_judge"], 1))
    figure("peak_rss_mb_hung_judge_enriched", round(results["hung_judge_enriched"], 1))
    if "hung_judge_10k" in results:
        figure("peak_rss_growth_mb_from_10k_spans",
               round(results["hung_judge"] - results["hung_judge_10k"], 1))
    figure("peak_rss_ratio_hung_judge", round(results["hung_judge"] / results["baseline"], 3))
    figure("memory_probe_spans", spans)


# -- sessions memory ----------------------------------------------------------------------
def bench_sessions(quick: bool) -> None:
    """Peak RSS with 10,000 open sessions (three turns each, a 200-character question and an
    800-character answer per turn, through a real processor's ``on_end``) against the same
    spans with no session scorer; and, not quick, twice as many sessions with room for
    10,000 (``sessions.max_sessions``, the default): the least recently active make room
    (judged at once), so memory stays at the bound (``session_peak_rss_ratio_20k_vs_10k``)."""
    script = Path(__file__).resolve().parent / "session_probe.py"
    runs = {"baseline": ("baseline", 10_000), "sessions_10k": ("sessions", 10_000)}
    if not quick:
        runs["sessions_20k"] = ("sessions", 20_000)
    results = {}
    with judge_server(0.0) as url:
        for name, (mode, count) in runs.items():  # one at a time: evictions judge
            out = subprocess.run([sys.executable, str(script), mode, url, str(count), "3",
                                  "10000"], capture_output=True, text=True, timeout=1800,
                                 check=True).stdout.split()
            results[name] = (int(out[-2]), float(out[-1]))
    figure("session_peak_rss_mb_baseline", round(results["baseline"][1], 1))
    figure("session_peak_rss_mb_10k_open", round(results["sessions_10k"][1], 1))
    figure("sessions_held_10k", results["sessions_10k"][0])
    growth = results["sessions_10k"][1] - results["baseline"][1]
    figure("session_kb_per_open_session", round(growth * 1024 / 10_000, 2))
    if "sessions_20k" in results:
        figure("sessions_held_20k_sent", results["sessions_20k"][0])
        figure("session_peak_rss_mb_20k_sent", round(results["sessions_20k"][1], 1))
        figure("session_peak_rss_ratio_20k_vs_10k",
               round(results["sessions_20k"][1] / results["sessions_10k"][1], 3))


# -- rescore memory -----------------------------------------------------------------------
def bench_rescore_memory(quick: bool) -> None:
    """Peak RSS of ``rescore`` over an OTLP JSON-lines file and one four times its size.

    Each line is one exported request of ~3.5 kB (the shape of the file that once took 929 MB
    for 351 MB): LLM spans with content, and every 50th line an agent run that is judged.
    Streaming means the larger file costs no more memory: ``rescore_peak_rss_growth_mb``
    (large minus small) stays near zero, whatever the file size.
    """
    import json
    import tempfile

    lines = 500 if quick else 10_000
    with tempfile.TemporaryDirectory() as tmp, judge_server(0.0) as url:
        config = Path(tmp) / "rescore.yaml"
        config.write_text(json.dumps({
            "judge": {"model": "openai/scripted-judge", "api_base": url, "api_key": "k"},
            "scorers": [{"type": "rubric", "criteria": ["answers"]}], "cache_ttl_s": 0}))
        script = Path(__file__).resolve().parent / "rescore_probe.py"
        peaks = {}
        for name, count in (("small", lines), ("large", 4 * lines)):
            path = Path(tmp) / f"{name}.jsonl"
            _rescore_file(path, count)
            out = subprocess.run([sys.executable, str(script), str(path), str(config)],
                                 capture_output=True, text=True, timeout=900, check=True)
            peaks[name] = float(out.stdout.strip().splitlines()[-1])
            figure(f"rescore_input_mb_{name}", round(path.stat().st_size / 1e6, 1))
            figure(f"rescore_peak_rss_mb_{name}", round(peaks[name], 1))
    figure("rescore_peak_rss_growth_mb", round(peaks["large"] - peaks["small"], 1))


def _rescore_file(path: Path, lines: int) -> None:
    from workloads import exported_request

    from otel_scorers.otlp import request_to_json

    with path.open("w", encoding="utf-8") as out:
        for index in range(lines):
            request = exported_request(index, agent=index % 50 == 0)
            out.write(request_to_json(request) + "\n")


# -- the gateway -----------------------------------------------------------------------------
def bench_gateway(quick: bool) -> None:
    """What ``otel-scorers serve`` adds to an OTLP export: the latency of posting one agent
    trace (5 spans) through the gateway, against posting it straight to the same upstream, with
    every run scored by a judge that answers in 1 s (so evaluations are always in flight)."""
    import json
    import urllib.request

    bodies = _agent_bodies(60 if quick else 1000)
    with _sink() as upstream, judge_server(1.0) as judge_url, \
            _gateway(upstream, judge_url) as base:
        _post_all(base, bodies)  # warm-up: imports, connections, the first evaluations
        _post_all(upstream, bodies)
        direct = _post_all(upstream, bodies)
        through = _post_all(base, bodies)
        with urllib.request.urlopen(f"{base}/health", timeout=10) as response:
            health = json.loads(response.read())
    direct_ms = statistics.median(direct) * 1000
    through_ms = statistics.median(through) * 1000
    figure("gateway_post_ms_direct_p50", round(direct_ms, 2))
    figure("gateway_post_ms_through_p50", round(through_ms, 2))
    figure("gateway_post_ms_through_p99",
           round(sorted(through)[int(len(through) * 0.99) - 1] * 1000, 2))
    figure("gateway_added_ms_p50", round(through_ms - direct_ms, 2))
    figure("gateway_latency_ratio_p50", round(through_ms / direct_ms, 2))
    decisions = health["decisions"]["rubric"]
    figure("gateway_runs_selected", decisions.get("selected", 0))
    figure("gateway_runs_dropped_while_judging", decisions.get("dropped", 0))


def _agent_bodies(count: int) -> list[bytes]:
    """``count`` OTLP protobuf bodies, one traced agent run each."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    provider = TracerProvider()
    kept = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(kept))
    run = agent_iteration(provider.get_tracer("bench"), distinct=True)
    bodies = []
    for _ in range(count):
        kept.clear()
        run()
        bodies.append(encode_spans(kept.get_finished_spans()).SerializeToString())
    return bodies


def _post_all(base: str, bodies: Sequence[bytes]) -> list[float]:
    import urllib.request

    latencies = []
    for body in bodies:
        request = urllib.request.Request(f"{base}/v1/traces", data=body, method="POST",
                                         headers={"Content-Type": "application/x-protobuf"})
        started = time.perf_counter()
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()
            if response.status != 200:
                raise RuntimeError(f"{base} answered {response.status}")
        latencies.append(time.perf_counter() - started)
    return latencies


@contextmanager
def _sink() -> Iterator[str]:
    process = subprocess.Popen([sys.executable, str(Path(__file__).parent / "upstream.py")],
                               stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        yield process.stdout.readline().strip()
    finally:
        process.terminate()
        process.wait(10)


@contextmanager
def _gateway(upstream: str, judge_url: str) -> Iterator[str]:
    import json
    import tempfile

    with tempfile.TemporaryDirectory() as work:
        config = Path(work) / "gateway.yaml"
        config.write_text(json.dumps({"judge": {
            "model": "openai/gpt-4o-mini", "api_base": judge_url, "api_key": "bench",
            "structured_output": "json_object"}}))
        port = _free_port()
        process = subprocess.Popen(
            [sys.executable, "-m", "otel_scorers", "serve", "--upstream", upstream,
             "--port", str(port), "--grpc-port", "0", "--config", str(config)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            base = f"http://127.0.0.1:{port}"
            _wait_healthy(base)
            yield base
        finally:
            process.terminate()
            process.wait(60)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_healthy(base: str) -> None:
    import urllib.request

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{base}/health", timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("the gateway did not start")


def bench_code_scorers(quick: bool) -> None:
    """CPU per run of the scorers that need no judge, on a run of 10 steps (3 LLM calls, 6
    tool calls, a retrieval): ``code_scorer_us_per_run_*`` (the target: at most 50 us), and the
    same as a ratio to building the run's ``ScorerRun`` from its steps, which live scoring does
    for every evaluated run anyway (``code_scorer_cost_ratio_*``); and the checks scorer with
    every check of issue 55 on a 20-step run (``..._checks_all_20_steps``: at most 100 us)."""
    from otel_scorers import ChecksScorer, RubricScorer, TrajectoryScorer
    from otel_scorers.scorers.run import ScorerRun

    steps: list[dict[str, Any]] = []
    for index in range(3):
        steps.append({"kind": "llm", "name": "gpt-4o-mini", "input_tokens": 400,
                      "output_tokens": 60, "start_ns": index * 10, "end_ns": index * 10 + 5})
        steps += [{"kind": "tool", "name": name, "arguments": f'{{"q": "{name} {index}"}}',
                   "result": "a result of some length " * 4, "start_ns": index * 10 + 6,
                   "end_ns": index * 10 + 7} for name in ("search", "lookup")]
    steps.append({"kind": "retrieval", "name": "kb", "query": "reset", "documents": ["d"] * 3})
    shape = {"input": "How do I reset my password?", "output": "Open Settings > Security.",
             "steps": steps}
    run = ScorerRun.coerce(shape)
    iterations = 2_000 if quick else 20_000
    batch = iterations // 5
    # A fresh copy of the run for every call: a run caches what it derives from its steps
    # (its tool calls, its acts), and live scoring scores each run once, so reusing one run
    # would time the cache, not the scorer. Copies are made before any scorer touches it.
    fresh = [run.model_copy() for _ in range(batch * 8)]
    runs = iter(fresh)
    scorers: dict[str, Callable[[], object]] = {}
    trajectory = TrajectoryScorer(["search", "lookup", {"name": "kb"}], max_steps=20,
                                  max_total_tokens=5000, blacklist=["delete_all"])
    scorers["trajectory"] = lambda: trajectory.decide(next(runs))
    checks = ChecksScorer(["called_tool lookup", "did_not_call delete_all",
                           "tool_order search, lookup", "max_tool_calls 10", "no_tool_errors",
                           "no_loops 3", "includes settings", r"matches Settings > \w+"])
    scorers["checks_8"] = lambda: checks.decide(next(runs))
    rubric = RubricScorer("openai/unused", "check: called_tool lookup\ncheck: no_tool_errors",
                          api_key="k", api_base="http://127.0.0.1:9")
    scorers["rubric_of_checks"] = lambda: rubric.ask(next(runs))
    build = min(time_batch(lambda: ScorerRun.coerce(shape), batch)[1] for _ in range(7))
    for name, decide in scorers.items():
        runs = iter(fresh)
        for _ in range(200):
            decide()
        # the least of 7 batches: what the code costs when the machine lets it run (this
        # figure is CPU time, but a busy shared machine still inflates it, never deflates it)
        cpu = min(time_batch(decide, batch)[1] for _ in range(7))
        figure(f"code_scorer_us_per_run_{name}", round(cpu * 1e6, 1))
        figure(f"code_scorer_cost_ratio_{name}", round(cpu / build, 3))
    # issue 55's checks, all of them, on a 20-step run with a 2 KB answer and 5 tool schemas
    # (target: at most 100 us per run), beside the figures above
    checks_all, many = _checks_all_case(batch * 8)
    runs = iter(many)
    for _ in range(200):
        checks_all.decide(next(runs))
    runs = iter(many)
    cpu = min(time_batch(lambda: checks_all.decide(next(runs)), batch)[1] for _ in range(7))
    figure("code_scorer_us_per_run_checks_all_20_steps", round(cpu * 1e6, 1))


def _checks_all_case(copies: int) -> tuple[Any, list[Any]]:
    """The checks scorer with every structure, limit and personal-data check, and ``copies``
    fresh copies of a run of 20 steps (5 LLM calls, 15 tool calls of 5 tools, each tool with
    a parameters schema) whose 2 KB answer is the JSON its declared response schema asks for."""
    import json

    from otel_scorers import ChecksScorer
    from otel_scorers.scorers.run import ScorerRun

    names = ("search", "lookup", "fetch_order", "refund", "notify")
    tools = [{"name": name, "parameters": {
        "type": "object", "additionalProperties": False, "required": ["id", "query"],
        "properties": {"id": {"type": "integer", "minimum": 0},
                       "query": {"type": "string", "maxLength": 200},
                       "tags": {"type": "array", "items": {"type": "string"}}}}}
        for name in names]
    steps: list[dict[str, Any]] = []
    for index in range(5):
        steps.append({"kind": "llm", "name": "gpt-4o-mini", "input_tokens": 400,
                      "output_tokens": 60})
        steps += [{"kind": "tool", "name": names[(index * 3 + k) % 5], "result": "ok " * 20,
                   "arguments": json.dumps({"id": index * 3 + k, "query": f"order {index}",
                                            "tags": ["a", "b"]})} for k in range(3)]
    items: list[dict[str, Any]] = []
    while len(answer := json.dumps({"status": "refunded", "items": items})) < 2_000:
        items.append({"sku": f"SKU-{len(items):04d}", "name": f"Item number {len(items)}",
                      "quantity": len(items) % 7 + 1,
                      "note": "delivered to the front desk in good order"})
    schema = {"type": "object", "required": ["status", "items"], "properties": {
        "status": {"enum": ["refunded", "open", "closed"]},
        "items": {"type": "array", "items": {"type": "object", "required": ["sku", "quantity"],
                                             "properties": {
                                                 "sku": {"type": "string",
                                                         "pattern": "^SKU-[0-9]{4}$"},
                                                 "quantity": {"type": "integer"}}}}}}
    run = ScorerRun.coerce({"input": "Refund my order", "output": answer, "steps": steps,
                            "tools": tools, "output_schema": schema,
                            "duration_ns": 3_000_000_000})
    scorer = ChecksScorer(["json", "json_schema declared", "tool_args_valid",
                           "max_length 4000 chars", "min_length 10 words", "max_duration 30s",
                           "max_tokens 100000", "max_cost 1", "max_llm_calls 10", "no_pii"])
    fresh = [run.model_copy() for _ in range(copies)]  # (made before any scorer touches it)
    assert scorer.decide(run).passed, scorer.decide(run).reason
    return scorer, fresh


def bench_cost_lanes(quick: bool) -> None:
    """Cost per 1,000 demo rubric evaluations per lane; the batch lane's CPU and spool
    (``lanes.py``)."""
    from lanes import bench_lanes

    bench_lanes(quick, figure, judge_server)


def bench_eval_instructions(quick: bool) -> None:
    """Instructions per evaluation at C = 32, L = 0.2 s, under callgrind (``eval_instr.py``):
    the CPU per evaluation that machine load does not move."""
    from eval_instr import bench_eval_instr

    bench_eval_instr(quick, figure)


BENCHES = {"hot_path_instructions": bench_hot_path_instructions,
           "eval_instructions": bench_eval_instructions, "on_end": bench_on_end,
           "code_scorers": bench_code_scorers,
           "hot_path": bench_hot_path,
           "throughput": bench_throughput, "calls": bench_calls,
           "memory": bench_memory, "sessions": bench_sessions,
           "rescore_memory": bench_rescore_memory,
           "gateway": bench_gateway, "prompts": bench_prompts, "lanes": bench_cost_lanes}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes (under 3 minutes)")
    parser.add_argument("--only", default=",".join(BENCHES), help="comma list of benchmarks")
    args = parser.parse_args(argv)
    started = time.monotonic()
    took: list[tuple[str, float]] = []
    for name in args.only.split(","):
        began = time.monotonic()
        BENCHES[name.strip()](args.quick)
        took.append((name.strip(), time.monotonic() - began))
    print("\n# seconds per benchmark: " + ", ".join(f"{n} {s:.0f}" for n, s in took))
    print(f"\n# {len(FIGURES)} figures in {time.monotonic() - started:.0f}s"
          f"{' (quick)' if args.quick else ''}")
    for name, value in FIGURES:
        print(f"{name}: {value}")


if __name__ == "__main__":
    main()
