"""The cost lanes measured (issue 38): what 1,000 evaluations of the demo's rubric cost at the
price map's ``gpt-5-mini`` rates, live, flex, batch and live with cached prefixes; the batch
lane's CPU per evaluation against the live lane's, in the same run; its spool's disk and a
round's memory with many requests queued (``spool_probe.py``, in a process of its own).

Costs are the library's own: each judge call goes over HTTP to the scripted judge (in this
process), which reports the request's real token count (litellm's ``token_counter`` for
``gpt-5-mini`` over the messages received, and over the answer), and the transport prices the
answer at the tier's rates exactly as it does in production (the batch tier through the batch
API's files and batches endpoints and ``replay``). With cached prefixes, the judge reports as
cached what OpenAI caches of a repeated prefix: the system message's tokens from 1,024 up, in
steps of 128 (none below 1,024), as if every call hit the cache.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

MODEL = "openai/gpt-5-mini"
#: each demo run judged this many times per lane (each call's fence token changes the request's
#: token count by a few tokens: the mean over many calls is steady)
REPEATS = 20
HERE = Path(__file__).resolve().parent


def _runs() -> list[tuple[Any, str]]:
    """The demo's three runs (two support-bot answers, one code-helper answer), each with
    its agent's rubric."""
    from otel_scorers import Message, ScorerRun
    from otel_scorers.demo import DEMO_TASKS, RUBRICS

    return [(ScorerRun(input_messages=(Message(role="user", content=task.prompt),),
                       system_messages=(Message(role="system", content=task.system),),
                       output=(Message(role="assistant", content=task.answer),)),
             RUBRICS[task.agent]) for task in DEMO_TASKS]


def _counting(cached: bool) -> Callable[[Any], Any]:
    """The scripted judge's answers, with the request's and the answer's real token counts."""
    import litellm

    from otel_scorers.testing import judge_responder

    inner = judge_responder()
    model = MODEL.split("/", 1)[1]

    def respond(request: Any) -> Any:
        answer = inner(request)
        prompt = litellm.token_counter(model=model, messages=request.messages)
        completion = litellm.token_counter(model=model, text=answer.content or "")
        hit = 0
        if cached:
            system = litellm.token_counter(model=model, messages=request.messages[:1])
            hit = 1024 + (system - 1024) // 128 * 128 if system >= 1024 else 0
        return dataclasses.replace(answer, prompt_tokens=prompt, completion_tokens=completion,
                                   cached_tokens=hit)
    return respond


def _live_cost(url: str, tier: str) -> tuple[float, int]:
    """The mean cost of one demo rubric evaluation, and its prompt tokens."""
    from otel_scorers import RubricScorer
    from otel_scorers.judge.client import JudgeClient

    costs, tokens = [], []
    for run, rubric in _runs() * REPEATS:
        judge = JudgeClient(MODEL, api_base=url, api_key="k", structured_output="json_object",
                            service_tier=tier)  # type: ignore[arg-type]
        result = RubricScorer(judge, rubric).run(run)
        assert result.judge is not None and result.judge.cost_usd, result
        costs.append(result.judge.cost_usd)
        tokens.append(result.judge.prompt_tokens)
    return sum(costs) / len(costs), round(sum(tokens) / len(tokens))


def _batch_cost(url: str) -> float:
    """The same evaluations through the batch API: requests recorded, one batch, answers
    replayed (priced at the batch rates)."""
    from otel_scorers import RubricScorer
    from otel_scorers.background_loop import run_sync
    from otel_scorers.judge.batches import (
        FINISHED,
        BatchAPI,
        answers,
        batch_lines,
        replay,
        request_of,
    )
    from otel_scorers.judge.client import JudgeClient

    scored = [(RubricScorer(JudgeClient(MODEL, api_base=url, api_key="k",
                                        structured_output="json_object"), rubric), run)
              for run, rubric in _runs() * REPEATS]

    async def go() -> list[float]:
        api = BatchAPI(url, "k")
        bodies = {f"r{i}": await request_of(scorer, run) for i, (scorer, run) in
                  enumerate(scored)}
        batch = await api.create(await api.upload(batch_lines(bodies)), "24h")  # type: ignore
        state = batch
        while state.get("status") not in FINISHED:
            state = await api.retrieve(batch["id"])
        answered, _ = await answers(api, state)
        costs = []
        for i, (scorer, run) in enumerate(scored):
            result = await replay(scorer, run, answered[f"r{i}"])
            assert result.judge is not None and result.judge.service_tier == "batch"
            costs.append(result.judge.cost_usd)
        return costs

    costs = run_sync(go())
    return sum(costs) / len(costs)


def bench_costs(figure: Callable[[str, Any], None]) -> None:
    from otel_scorers.testing import ScriptedJudgeServer

    with ScriptedJudgeServer(_counting(cached=False)) as server:
        live, tokens = _live_cost(server.url, "standard")
        flex, _ = _live_cost(server.url, "flex")
        batch = _batch_cost(server.url)
    with ScriptedJudgeServer(_counting(cached=True)) as server:
        cached, _ = _live_cost(server.url, "standard")
    figure("demo_rubric_prompt_tokens", tokens)
    for name, cost in (("live", live), ("flex", flex), ("batch", batch),
                       ("live_cached", cached)):
        figure(f"cost_usd_per_1000_evals_{name}", round(cost * 1000, 4))
    for name, cost in (("flex", flex), ("batch", batch), ("live_cached", cached)):
        figure(f"cost_ratio_{name}_vs_live", round(cost / live, 3))


def _lane_cpu(url: str, lane: str, runs: int, spool: str) -> float:
    """CPU seconds of this process per evaluation: ``runs`` agent runs ended and every result
    emitted (live: judged now; batch: spooled, one batch, answers emitted)."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from workloads import NoOpExporter, agent_iteration

    from otel_scorers import RubricScorer
    from otel_scorers.judge.client import JudgeClient
    from otel_scorers.pipeline import ScorerSpec, ScoringSpanProcessor

    os.environ["OTEL_SCORERS_BATCH_DIR"] = spool
    os.environ["OTEL_SCORERS_BATCH_INTERVAL_S"] = "0.5"
    os.environ["OTEL_SCORERS_BATCH_MAX_BYTES"] = str(1 << 34)
    provider = TracerProvider()
    judge = JudgeClient("openai/gpt-4o-mini", api_base=url, api_key="k",
                        structured_output="json_object")
    processor = ScoringSpanProcessor(
        [ScorerSpec(RubricScorer(judge, "- greets the user\n- is polite"), lane=lane)],
        tracer_provider=provider, queue_size=runs + 10, cache_ttl_s=0)
    provider.add_span_processor(processor)
    provider.add_span_processor(SimpleSpanProcessor(NoOpExporter()))
    run = agent_iteration(provider.get_tracer("bench"), distinct=True)
    for _ in range(4):  # warm-up: imports, connections
        run()
    deadline = time.monotonic() + 120
    while processor.stats().get("rubric", {}).get("scored", 0) < 4:
        assert time.monotonic() < deadline, "the warm-up was never judged"
        time.sleep(0.05)
    cpu = time.process_time()
    for _ in range(runs):
        run()
    while processor.stats()["rubric"].get("scored", 0) < runs + 4:
        assert time.monotonic() < deadline + 300, processor.stats()
        time.sleep(0.05)
    spent = time.process_time() - cpu
    processor.shutdown()
    provider.shutdown()
    return spent / runs


def bench_lane_cpu(figure: Callable[[str, Any], None], quick: bool,
                   judge_server: Callable[[float], Any]) -> None:
    runs = 200 if quick else 1000
    with judge_server(0.0) as url, tempfile.TemporaryDirectory() as spool:
        live = _lane_cpu(url, "live", runs, spool)
        batch = _lane_cpu(url, "batch", runs, spool)
    figure("cpu_ms_per_eval_live_lane", round(live * 1000, 2))
    figure("cpu_ms_per_eval_batch_lane", round(batch * 1000, 2))
    figure("cpu_ratio_batch_lane_vs_live", round(batch / live, 2))


def bench_spool(figure: Callable[[str, Any], None], quick: bool,
                judge_server: Callable[[float], Any]) -> None:
    queued = 10_000 if quick else 100_000
    with judge_server(0.0) as url:
        probe = subprocess.run([sys.executable, str(HERE / "spool_probe.py"), url, str(queued)],
                               check=False, capture_output=True, text=True, timeout=1800)
    if probe.returncode != 0:
        raise RuntimeError(f"spool probe failed: {probe.stderr[-2000:]}")
    found = json.loads(probe.stdout.strip().splitlines()[-1])
    for name, value in found.items():
        figure(f"spool_{name}", value)


def bench_lanes(quick: bool, figure: Callable[[str, Any], None],
                judge_server: Callable[[float], Any]) -> None:
    """Cost per 1,000 demo rubric evaluations per lane; the batch lane's CPU and spool."""
    bench_costs(figure)
    bench_lane_cpu(figure, quick, judge_server)
    bench_spool(figure, quick, judge_server)
