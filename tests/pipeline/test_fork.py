"""``os.fork()`` while spans are being ended in other threads: no child may hang on a lock a
parent's thread held at fork time (every lock and buffer is reset in the child)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from otel_scorers.testing import ScriptedJudgeServer, judge_responder

HERE = Path(__file__).resolve().parent


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_forks_never_deadlock_on_the_processors_locks(
        judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder()
    out = subprocess.run([sys.executable, str(HERE / "fork_app.py"), judge_server.url, "150"],
                         capture_output=True, text=True, timeout=200, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report == {"forks": 150, "hung": 0, "failed": 0}, report
