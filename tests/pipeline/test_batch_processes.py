"""The batch lane with several processes on one spool (issue 38, production): a server's forked
workers and processes with processors of their own each spool what they select, one at a time
submits and emits (the spool's lock), every request goes out in one batch only, and when the
leading process is killed a forked worker takes over and emits every result once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from otel_scorers.testing import ScriptedJudgeServer, judge_responder

pytestmark = pytest.mark.timeout(300)

HERE = Path(__file__).parent


class Lines:
    """The JSON lines of processes' shared stdout, read as they come."""

    def __init__(self, processes: list[subprocess.Popen[str]]) -> None:
        self.lines: list[dict[str, Any]] = []
        self._threads = [threading.Thread(target=self._read, args=(p,), daemon=True)
                         for p in processes]
        for thread in self._threads:
            thread.start()

    def _read(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            self.lines.append(json.loads(line))

    def ended(self, timeout_s: float = 60) -> None:
        """Wait until every process writing the pipes (forked children too) has closed it."""
        for thread in self._threads:
            thread.join(timeout_s)

    def having(self, key: str) -> list[dict[str, Any]]:
        return [line for line in list(self.lines) if key in line]

    def wait(self, check: Any, what: str, timeout_s: float = 90) -> None:
        deadline = time.monotonic() + timeout_s
        while not check():
            assert time.monotonic() < deadline, f"{what}: {self.lines}"
            time.sleep(0.1)


@pytest.fixture
def workers_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    yield {**os.environ, "OTEL_SCORERS_BATCH_DIR": str(tmp_path / "spool"),
           "OTEL_SCORERS_BATCH_INTERVAL_S": "0.2", "OTEL_SCORERS_CANARY": "false",
           "PYTHONPATH": os.pathsep.join(sys.path)}


def submitted_ids(server: ScriptedJudgeServer) -> list[str]:
    """The custom ids of every line of every batch the server was given."""
    return [json.loads(line)["custom_id"]
            for batch in list(server.batches.batches.values())
            for line in server.batches.files[batch["input_file_id"]].splitlines()
            if line.strip()]


def test_forked_workers_take_over_when_the_leading_process_dies(
        tmp_path: Path, workers_env: dict[str, str], judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder()
    judge_server.batches.polls = 10_000  # in progress until the test says otherwise
    stop = tmp_path / "stop"
    parent = subprocess.Popen([sys.executable, str(HERE / "batch_workers.py"), "fork",
                               judge_server.url, str(stop)], stdout=subprocess.PIPE, text=True,
                              env=workers_env)
    out = Lines([parent])
    try:
        out.wait(lambda: len(out.having("runs")) == 2 and out.having("parent"),
                 "two forked workers ended their runs")
        runs = sorted(t for line in out.having("runs") for t in line["runs"])
        # the parent leads: it submits the workers' four requests (the batch's record on
        # disk: a kill before it is written costs a second batch, by design)
        records = Path(workers_env["OTEL_SCORERS_BATCH_DIR"]) / "batches"
        out.wait(lambda: len(submitted_ids(judge_server)) == 4 and sum(
            len(json.loads(p.read_text())["entries"]) for p in records.glob("*.json")) == 4,
            "the workers' requests submitted")
        os.kill(out.having("parent")[0]["parent"], signal.SIGKILL)
        parent.wait(30)
        judge_server.batches.polls = 1  # the batch completes at the next poll
        out.wait(lambda: len(out.having("trace_id")) >= 4, "a worker took over and emitted")
        time.sleep(1)  # a second emission, if any, would come within a few rounds
        stop.touch()
        out.wait(lambda: len(out.having("leading")) == 2, "the workers said who leads")
        stop.with_name("stop.exit").touch()
        out.ended()
    finally:
        stop.touch()
        stop.with_name("stop.exit").touch()
        parent.kill()
    results = out.having("trace_id")
    assert sorted(r["trace_id"] for r in results) == runs  # each once
    assert all(r["label"] == "pass" for r in results)
    assert len({r["pid"] for r in results}) == 1  # emitted by the one worker that took over
    assert [line["leading"] for line in out.having("leading")].count(True) == 1
    assert len(judge_server.batches.batches) == 1  # the workers' requests sent once
    assert list((Path(workers_env["OTEL_SCORERS_BATCH_DIR"]) / "pending").glob("*.json")) == []


def test_processes_with_their_own_lane_submit_each_request_once(
        tmp_path: Path, workers_env: dict[str, str], judge_server: ScriptedJudgeServer) -> None:
    """Workers that each build a processor (no fork) on one spool: one leads; every request is
    in one batch only and every result is emitted once."""
    judge_server.responder = judge_responder()
    stop = tmp_path / "stop"
    processes = [subprocess.Popen([sys.executable, str(HERE / "batch_workers.py"), "own",
                                   judge_server.url, str(stop)], stdout=subprocess.PIPE,
                                  text=True, env=workers_env) for _ in range(3)]
    out = Lines(processes)
    try:
        out.wait(lambda: len(out.having("runs")) == 3, "three processes ended their runs")
        runs = sorted(t for line in out.having("runs") for t in line["runs"])
        out.wait(lambda: len(out.having("trace_id")) >= 9, "every result emitted")
        time.sleep(1)
        stop.touch()
        stop.with_name("stop.exit").touch()
        for process in processes:
            process.wait(60)
        out.wait(lambda: len(out.having("leading")) == 3, "the processes said who led")
    finally:
        stop.touch()
        stop.with_name("stop.exit").touch()
        for process in processes:
            process.kill()
    results = out.having("trace_id")
    assert sorted(r["trace_id"] for r in results) == runs  # each once
    ids = submitted_ids(judge_server)
    assert len(ids) == len(set(ids)) == 9  # no request in two batches
    assert len({r["pid"] for r in results}) == 1  # the leading process emitted them all
    # (at the stop, as each leading process ends, the next takes the lead)
    assert True in [line["leading"] for line in out.having("leading")]
