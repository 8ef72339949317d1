"""``serve`` reloads its configuration file on SIGHUP: validated first (a bad one is one error
line and the running configuration stays), then swapped in while the old pipeline finishes
what it holds; the decision counters go on adding up."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from otel_scorers.testing import ScriptedJudgeServer, judge_responder
from tests.gateway.test_gateway import _config, health, run_app
from tests.support import Upstream, free_port, wait_until_up

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def _judged(server: ScriptedJudgeServer, criterion: str) -> int:
    return sum(criterion in request.text for request in server.requests)


async def _eventually(check: object, what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.2)


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="no SIGHUP here")
async def test_sighup_reloads_the_rubric_and_a_bad_file_keeps_the_running_one(
        judge_server: ScriptedJudgeServer, tmp_path: Path) -> None:
    judge_server.responder = judge_responder(satisfied=True)
    config = _config(tmp_path, judge_server, cache_ttl_s=0, scorers=[
        {"type": "rubric", "criteria": ["greets the user warmly"]}])
    port = free_port()
    log = tmp_path / "serve.log"
    async with Upstream() as upstream:
        with log.open("w") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "otel_scorers", "serve", "--upstream", upstream.url,
                 "--port", str(port), "--grpc-port", "0", "--config", str(config),
                 "--metric-interval", "1"], env=dict(os.environ), stdout=out,
                stderr=subprocess.STDOUT, text=True)
            url = f"http://127.0.0.1:{port}"
            try:
                wait_until_up(f"{url}/health", process, timeout_s=60, output=log.read_text)
                await asyncio.to_thread(run_app, url, 2)
                await _eventually(lambda: _judged(judge_server, "greets the user warmly") >= 2,
                                  "judged with the first rubric")
                # the file changes: a new criterion, read on SIGHUP
                config.write_text(json.dumps({**json.loads(config.read_text()), "scorers": [
                    {"type": "rubric", "criteria": ["names the next step"]}]}))
                process.send_signal(signal.SIGHUP)
                await _eventually(lambda: "configuration reloaded" in log.read_text(),
                                  "the reload said")
                await asyncio.to_thread(run_app, url, 2)
                await _eventually(lambda: _judged(judge_server, "names the next step") >= 2,
                                  "judged with the reloaded rubric")
                # a broken file: one error line, the running configuration kept
                config.write_text("scorers: [unclosed\n")
                process.send_signal(signal.SIGHUP)
                await _eventually(lambda: "was not reloaded" in log.read_text(),
                                  "the bad reload said")
                before = _judged(judge_server, "names the next step")
                await asyncio.to_thread(run_app, url, 2)
                await _eventually(
                    lambda: _judged(judge_server, "names the next step") >= before + 2,
                    "still judged with the running rubric")
                # the judge has answered; the decision is counted once its result is emitted
                await _eventually(
                    lambda: health(url)["decisions"]["rubric"].get("scored", 0) >= 4,
                    "the new pipeline's runs counted")
                state = health(url)
            finally:
                process.terminate()
                process.wait(30)
    text = log.read_text()
    assert text.count("was not reloaded") == 1 and "Traceback" not in text, text
    assert _judged(judge_server, "greets the user warmly") == 2  # nothing after the reload
    assert state["decisions"]["rubric"]["scored"] == 4  # the new pipeline's own runs
