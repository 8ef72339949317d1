"""The real evaluation backends the tests start on 127.0.0.1: Arize Phoenix (``.venv-phoenix``)
and an MLflow tracking server (``.venv-mlflow``), both made by ``make test``.

Each server keeps its data in a working directory: pass one of your own (``work=``) to stop a
server and start it again on the same data and port (a restart), else a temporary one is made
and removed afterwards.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import ROOT, free_port, wait_until_up

__all__ = ["call", "get", "mlflow_binary", "phoenix_binary", "running_mlflow",
           "running_phoenix", "running_server"]


def _binary(variable: str, default: str, what: str) -> str:
    path = os.environ.get(variable) or str(ROOT / default)
    if not Path(path).exists():
        pytest.fail(f"{what} is missing at {path}: `make test` installs it into "
                    f"{default.split('/', maxsplit=1)[0]}")
    return path


def phoenix_binary() -> str:
    return _binary("OTEL_SCORERS_PHOENIX", ".venv-phoenix/bin/phoenix", "Phoenix")


def mlflow_binary() -> str:
    return _binary("OTEL_SCORERS_MLFLOW", ".venv-mlflow/bin/mlflow", "MLflow")


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def call(base: str, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    request = urllib.request.Request(
        base + path, method=method, headers={"Content-Type": "application/json"},
        data=None if body is None else json.dumps(body).encode())
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read() or b"{}")


@contextlib.contextmanager
def running_server(command: list[str], *, health: str, work: str | None, name: str,
                   env: dict[str, str] | None = None) -> Iterator[str]:
    """Run ``command`` (its output in ``<work>/<name>.log``: a file, not a pipe, since these
    servers log a lot and an unread pipe blocks them) until ``health`` answers 200; stop it
    afterwards, killing it if it does not stop within 30 s. ``work``: the data directory
    (kept), or ``None`` for a temporary one (removed)."""
    own = work is None
    folder = tempfile.mkdtemp(prefix=f"otel-scorers-{name}-") if own else str(work)
    log = Path(folder) / f"{name}.log"
    process = subprocess.Popen(command, env={**os.environ, **(env or {})},
                               stdout=log.open("a"), stderr=subprocess.STDOUT)
    try:
        wait_until_up(health, process, timeout_s=120, output=lambda: log.read_text()[-3000:])
        yield folder
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        if own:
            shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def running_phoenix(port: int | None = None, *, work: str | None = None) -> Iterator[str]:
    """Phoenix serving on 127.0.0.1 (OTLP/HTTP on ``/v1/traces``); yields its base URL."""
    port = port or free_port()
    base = f"http://127.0.0.1:{port}"
    data = work or tempfile.mkdtemp(prefix="otel-scorers-phoenix-")
    env = {"PHOENIX_HOST": "127.0.0.1", "PHOENIX_PORT": str(port),
           "PHOENIX_GRPC_PORT": str(free_port()), "PHOENIX_WORKING_DIR": data,
           "PHOENIX_TELEMETRY_ENABLED": "false", "DO_NOT_TRACK": "1"}
    try:
        with running_server([phoenix_binary(), "serve"], health=f"{base}/healthz", work=data,
                            name="phoenix", env=env):
            yield base
    finally:
        if work is None:
            shutil.rmtree(data, ignore_errors=True)


@contextlib.contextmanager
def running_mlflow(port: int | None = None, *, work: str | None = None) -> Iterator[str]:
    """An MLflow tracking server on 127.0.0.1 with a SQLite store in ``work``; yields its base
    URL."""
    port = port or free_port()
    base = f"http://127.0.0.1:{port}"
    data = work or tempfile.mkdtemp(prefix="otel-scorers-mlflow-")
    command = [mlflow_binary(), "server", "--host", "127.0.0.1", "--port", str(port),
               "--backend-store-uri", f"sqlite:///{data}/mlflow.db",
               "--default-artifact-root", f"{data}/artifacts"]
    try:
        with running_server(command, health=f"{base}/health", work=data, name="mlflow",
                            env={"MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "1"}):
            yield base
    finally:
        if work is None:
            shutil.rmtree(data, ignore_errors=True)
