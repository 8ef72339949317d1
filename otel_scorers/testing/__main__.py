"""``python -m otel_scorers.testing``: serve a scripted judge until interrupted."""

from __future__ import annotations

import argparse
import contextlib
import threading
from collections.abc import Sequence

from otel_scorers.testing.answers import judge_responder
from otel_scorers.testing.judge_server import ScriptedJudgeServer


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m otel_scorers.testing``: serve a scripted judge until interrupted.

    Answers every rubric and prompt-alignment request (``judge_responder``) after ``--delay``
    seconds; handy as a stand-in judge for integration tests and benchmarks in another process.
    """
    parser = argparse.ArgumentParser(prog="python -m otel_scorers.testing")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument("--satisfied", choices=("true", "false"), default="true")
    args = parser.parse_args(argv)
    responder = judge_responder(satisfied=args.satisfied == "true", delay_s=args.delay)
    with ScriptedJudgeServer(responder) as server:
        print(server.url, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()
