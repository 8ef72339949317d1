"""Fork storm (test_fork.py): a thread ends content-bearing spans nonstop while the main
thread forks children that each end an agent run through the same processor and exit.

    python fork_app.py JUDGE_URL FORKS   -> one JSON line: {"forks", "hung", "failed"}
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

from opentelemetry.sdk.trace import TracerProvider

from otel_scorers import RubricScorer
from otel_scorers.judge.client import JudgeClient
from otel_scorers.pipeline import Sampling, ScoringSpanProcessor

CHAT = {"gen_ai.operation.name": "chat",
        "gen_ai.input.messages": json.dumps([{"role": "user", "content": "q"}]),
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "content": "a"}])}
AGENT = {**CHAT, "gen_ai.operation.name": "invoke_agent"}


def main(judge_url: str, forks: int) -> None:
    provider = TracerProvider()
    judge = JudgeClient("openai/scripted-judge", api_base=judge_url, api_key="k")
    processor = ScoringSpanProcessor([RubricScorer(judge, "- answers")],
                                     sampling=Sampling(rate_limit=1000.0),
                                     tracer_provider=provider, events=False)
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("app")
    stop = threading.Event()

    def busy() -> None:  # keeps the buffer, counts and limiter locks taken most of the time
        while not stop.is_set():
            with tracer.start_as_current_span("agent", attributes=AGENT), \
                    tracer.start_as_current_span("chat", attributes=CHAT):
                pass

    threads = [threading.Thread(target=busy, daemon=True) for _ in range(2)]
    for thread in threads:
        thread.start()
    children = []
    for _ in range(forks):
        pid = os.fork()
        if pid == 0:  # the child: use every lock of the processor, then leave
            with tracer.start_as_current_span("agent", attributes=AGENT), \
                    tracer.start_as_current_span("chat", attributes=CHAT):
                pass
            processor.stats()
            os._exit(0)
        children.append(pid)
        time.sleep(0.002)
    stop.set()
    hung = failed = 0
    deadline = time.monotonic() + 60
    for pid in children:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                failed += os.waitstatus_to_exitcode(status) != 0
                break
            if time.monotonic() > deadline:
                hung += 1
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                break
            time.sleep(0.01)
    print(json.dumps({"forks": len(children), "hung": hung, "failed": failed}))
    os._exit(0)  # the busy threads and the judge-less workers need no goodbye


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
