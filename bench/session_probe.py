"""Peak RSS of a process holding many open sessions (run by bench/run.py in a subprocess).

    python bench/session_probe.py MODE JUDGE_URL SESSIONS TURNS [MAX_SESSIONS]

A real :class:`ScoringSpanProcessor` with the multi-turn scorer (its session idle time an hour,
so nothing is judged and every session stays open) takes ``SESSIONS`` conversations of
``TURNS`` turns each, every turn an agent span with a 200-character question and an
800-character answer in GenAI attributes, through ``on_end`` like any application. MODE
``baseline``: the same spans through the same processor with a turn scorer only (no sessions
kept). Past ``MAX_SESSIONS`` the least recently active session makes room and is judged at
once (by the scripted judge at JUDGE_URL). Prints the sessions held and, on its last line, the
peak resident set size in MB (``VmHWM``, as memory_probe.py).
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from memory_probe import peak_rss_mb  # (this script's folder is on the path)


def main() -> None:
    mode, url, sessions, turns = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    max_sessions = int(sys.argv[5]) if len(sys.argv) > 5 else 10_000
    from opentelemetry.sdk.trace import TracerProvider

    from otel_scorers import MultiTurnScorer, RubricScorer
    from otel_scorers.judge.client import JudgeClient
    from otel_scorers.pipeline import Sampling, ScorerSpec, ScoringSpanProcessor, SessionPolicy

    judge = JudgeClient("openai/bench", api_base=url, api_key="k")
    # the turn scorer never judges (ratio 0): the probe measures what is held, not judging
    turn_scorer = ScorerSpec(RubricScorer(judge, "- answers"), Sampling(ratio=0.0))
    scorers = [turn_scorer] if mode == "baseline" else [turn_scorer, MultiTurnScorer(judge)]
    provider = TracerProvider()
    processor = ScoringSpanProcessor(scorers, tracer_provider=provider, events=False,
                                     evaluation_spans=False, concurrency=32,
                                     sessions=SessionPolicy(idle_s=3600,
                                                            max_sessions=max_sessions))
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("app")
    question, answer = "q" * 200, "a" * 800
    for turn in range(turns):
        for number in range(sessions):
            attributes = {
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "bench",
                "session.id": f"session-{number:06d}",
                "gen_ai.input.messages": json.dumps(
                    [{"role": "user", "content": f"{number} {turn} {question}"}]),
                "gen_ai.output.messages": json.dumps(
                    [{"role": "assistant", "content": f"{number} {turn} {answer}"}])}
            with tracer.start_as_current_span("invoke_agent bench", attributes=attributes):
                pass
            if number % 1000 == 999:  # an application's pace: the default queue keeps up
                processor.force_flush(600_000)
        processor.force_flush(600_000)
    held = processor.health().get("sessions", {})
    print(f"held={held.get('held', 0)} open={held.get('open', 0)}", file=sys.stderr)
    print(held.get("held", 0))
    print(peak_rss_mb())
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
