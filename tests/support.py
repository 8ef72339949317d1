"""Helpers shared by the tests that start real programs (gateways, Prometheus, Phoenix)."""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until_up(url: str, process: subprocess.Popen[str] | subprocess.Popen[bytes], *,
                  timeout_s: float, output: Callable[[], str]) -> None:
    """Poll ``url`` until it answers 200; raise with ``output()`` if ``process`` exits first or
    the time runs out (the process is killed then)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"{url} did not come up: {output()}")
        time.sleep(0.2)
