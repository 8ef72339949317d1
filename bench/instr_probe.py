"""The instruction-count hot-path benchmark's workloads, run under callgrind by ``bench/run.py``:

    valgrind --tool=callgrind --separate-threads=yes --collect-atstart=no \
        --toggle-collect=functools_reduce --dump-after=functools_reduce \
        python bench/instr_probe.py RUNS MODE [MODE ...]

Each MODE, in order, is ``baseline`` (the SDK's BatchSpanProcessor alone), ``sampling_<ratio>``
(the scoring processor in front of it, both scorers) or ``trajectory_<ratio>`` (both scorers and
the trajectory scorer: steps captured), with a pipeline of its own. Each measured region is one
mode's workload loop, run inside ``functools.reduce`` so that callgrind collects exactly that
call in the application (main) thread and dumps its count when it returns (one profile part per
mode, in order); startup, warm-up and the background threads are outside it. The judge never
answers (the scorers wait forever): what the application thread does is the same as with a real
judge (selection, sampling, queueing, or dropping once the queue is full), and no judge work or
litellm import competes for valgrind's single virtual CPU. Two things would make the count
depend on how threads are scheduled, and are set aside in every mode alike: the garbage
collector is off in the measured region (its runs land in whichever thread allocates), and the
SDK's BatchSpanProcessor has a queue and batch size large enough that its worker is never woken
during the loop (under valgrind a starved worker leaves the queue full, and every later span
would take the "wake the worker" path).
"""

from __future__ import annotations

import functools
import gc
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from workloads import RESOURCE, NeverAnswers, NoOpExporter, agent_iteration

QUIET = 10_000_000  # queue, batch size and delay (ms) the loop never reaches


def quiet_batch_processor() -> BatchSpanProcessor:
    return BatchSpanProcessor(NoOpExporter(), max_queue_size=QUIET, max_export_batch_size=QUIET,
                              schedule_delay_millis=QUIET)


def main() -> None:
    runs = int(sys.argv[1])
    for mode in sys.argv[2:]:
        if mode == "baseline":
            provider = TracerProvider(resource=RESOURCE)
            provider.add_span_processor(quiet_batch_processor())
            tracer: object = provider.get_tracer("bench")
        else:
            kind, ratio = mode.split("_", 1)
            tracer = _scoring_tracer(float(ratio), trajectory=kind == "trajectory")
        run = agent_iteration(tracer, distinct=True)
        for _ in range(50):  # warm-up: first-call costs stay out of the count
            run()
        gc.collect()
        gc.disable()
        functools.reduce(lambda acc, _: (run(), acc)[1], range(runs), 0)
        gc.enable()
    sys.stdout.flush()
    os._exit(0)  # no teardown: nothing after the loops is measured anyway


def _scoring_tracer(ratio: float, *, trajectory: bool = False) -> object:
    """Both judged scorers (never answering); with ``trajectory``, the trajectory scorer too,
    so the interaction's steps are captured."""
    from opentelemetry.sdk.metrics import MeterProvider

    from otel_scorers import TrajectoryScorer
    from otel_scorers.pipeline import Sampling, ScoringSpanProcessor

    provider = TracerProvider(resource=RESOURCE)
    extra: list[object] = [TrajectoryScorer(["lookup"])] if trajectory else []
    processor = ScoringSpanProcessor(
        [NeverAnswers("rubric"), NeverAnswers("prompt_alignment"), *extra],  # type: ignore[list-item]
        sampling=Sampling(ratio=ratio), tracer_provider=provider,
        meter_provider=MeterProvider(), events=False)
    provider.add_span_processor(processor)
    provider.add_span_processor(quiet_batch_processor())
    return provider.get_tracer("bench")


if __name__ == "__main__":
    main()
