"""The memory a batch output file costs while it is read: ``output_probe.py MB [answers]``.

A scripted provider (in a process of its own) holds one finished batch whose output file is
MB megabytes of small answered lines (about 280 bytes each, as a provider answers many short
judgements). This process reads it as the batch lane does (``read_answers``: each line handed
on as it is read, none kept) or, with ``answers``, as ``rescore --lane batch`` does (every
answer kept in memory until the command writes them). Prints one JSON line: the file's size,
its lines, the resident memory before the reading and at its peak (VmHWM, reset before).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from spool_probe import peak_mb, reset_peak, rss_mb


def serve(megabytes: float) -> None:
    """The provider: one completed batch whose output is ``megabytes`` of small lines."""
    from otel_scorers.testing import ScriptedJudgeServer

    server = ScriptedJudgeServer().start()
    body = {"id": "c", "object": "chat.completion", "model": "gpt-4o-mini",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {
                "role": "assistant", "content": '{"verdicts": [true]}'}}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 5, "total_tokens": 105}}
    lines, size, index = [], 0, 0
    while size < megabytes * 1e6:
        line = json.dumps({"id": f"req-{index}", "custom_id": f"{index:032x}",
                           "response": {"status_code": 200, "body": body}}).encode() + b"\n"
        lines.append(line)
        size += len(line)
        index += 1
    server.batches.files["file-out"] = b"".join(lines)
    print(json.dumps({"url": server.url, "bytes": size, "lines": index}), flush=True)
    sys.stdin.read()  # until the reader is done


def main() -> None:
    if sys.argv[1] == "--serve":
        serve(float(sys.argv[2]))
        return
    provider = subprocess.Popen([sys.executable, __file__, "--serve", sys.argv[1]],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert provider.stdout is not None
    served = json.loads(provider.stdout.readline())
    from otel_scorers.background_loop import run_sync
    from otel_scorers.judge.batches import BatchAPI

    api, state = BatchAPI(served["url"], "k"), {"output_file_id": "file-out"}
    handed = 0

    async def handle(ident: str, body: Any, reason: str) -> None:
        nonlocal handed
        handed += 1

    async def read() -> int:
        if sys.argv[2:] == ["answers"]:
            from otel_scorers.judge.batches import answers

            answered, _ = await answers(api, state)
            return len(answered)
        from otel_scorers.judge.batch_output import read_answers

        await read_answers(api, state, handle)
        return handed

    import aiohttp  # noqa: F401 - imported before the baseline, as in a running lane

    import otel_scorers.judge.batch_output  # noqa: F401

    before = rss_mb()
    reset_peak()
    started = time.perf_counter()
    count = run_sync(read())
    result = {"mode": sys.argv[2] if sys.argv[2:] else "read_answers",
              "file_mb": round(served["bytes"] / 1e6, 1), "lines": served["lines"],
              "answers": count, "read_s": round(time.perf_counter() - started, 2),
              "rss_mb_before": round(before, 1), "rss_mb_peak": round(peak_mb(), 1)}
    provider.communicate("")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
