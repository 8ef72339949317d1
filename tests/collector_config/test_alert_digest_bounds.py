"""examples/alert_digest.py under hostile posts (issue 53): a shared token when one is set, a
bounded body read within a timeout, malformed notifications refused without a traceback, and
one notification of 2,000 firing alerts costing a bounded number of Jaeger queries (it made
about 102,000) and digests, the rest counted in one line. A fake Jaeger of our own counts the
queries."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.support import free_port

pytestmark = pytest.mark.timeout(120)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "alert_digest.py"
OPERATIONS = ["gen_ai.evaluation rubric", "gen_ai.evaluation prompt_alignment",
              "gen_ai.evaluation tool_use"]


class FakeJaeger:
    """Answers every service with three evaluation operations and no traces; counts queries."""

    def __init__(self) -> None:
        self.queries = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                fake.queries += 1
                body = {"data": OPERATIONS if "/operations" in self.path else []}
                payload = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@contextlib.contextmanager
def receiver(jaeger: str, token: str | None = None) -> Iterator[tuple[str, list[str],
                                                                      list[str]]]:
    port = free_port()
    env = {**os.environ, "JAEGER_URL": jaeger}
    env.pop("ALERT_DIGEST_TOKEN", None)
    if token:
        env["ALERT_DIGEST_TOKEN"] = token
    process = subprocess.Popen([sys.executable, str(EXAMPLE), str(port)], env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out: list[str] = []
    err: list[str] = []
    for stream, into in ((process.stdout, out), (process.stderr, err)):
        assert stream is not None
        threading.Thread(target=lambda s=stream, i=into: i.extend(iter(s.readline, "")),
                         daemon=True).start()
    deadline = time.monotonic() + 60
    while not out:
        assert time.monotonic() < deadline, "the example listening"
        time.sleep(0.1)
    try:
        yield f"http://127.0.0.1:{port}/alerts", out, err
    finally:
        process.terminate()
        process.wait(30)


def send(url: str, body: bytes, token: str | None = None) -> int:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def notification(count: int, services: int) -> bytes:
    return json.dumps({"version": "4", "status": "firing", "alerts": [
        {"status": "firing", "labels": {"alertname": "OtelScorersRubricPassRateLow",
                                        "job": f"svc-{index % services}",
                                        "agent": f"agent-{index}"}}
        for index in range(count)]}).encode()


def settle(out: list[str], count: int) -> None:
    deadline = time.monotonic() + 30
    while len(out) < count:
        assert time.monotonic() < deadline, out
        time.sleep(0.1)
    time.sleep(0.5)


def test_one_notification_of_2000_alerts_costs_a_bounded_number_of_queries() -> None:
    jaeger = FakeJaeger()
    with receiver(jaeger.url) as (url, out, err):
        assert send(url, notification(2_000, 100)) == 200
        settle(out, 12)
    digests = [line for line in out if line.startswith("#### ")]
    assert len(digests) == 10
    # five services, each read once: its operations and one trace query per operation
    assert jaeger.queries == 5 * (1 + len(OPERATIONS))
    assert any("1990 more firing agent(s) in this notification not digested" in line
               for line in out)
    assert not [line for line in err if "Traceback" in line]


def test_a_token_is_required_when_one_is_set() -> None:
    jaeger = FakeJaeger()
    with receiver(jaeger.url, token="s3cret") as (url, out, err):
        assert send(url, notification(1, 1)) == 401
        assert send(url, notification(1, 1), token="wrong") == 401
        assert send(url, notification(1, 1), token="s3cret") == 200
        settle(out, 2)
    assert jaeger.queries == 1 + len(OPERATIONS)  # the one with the token only
    assert [line for line in err if "bearer token" in line] and \
        not [line for line in err if "s3cret" in line]


@pytest.mark.parametrize("body", [b"[]", b'{"alerts": 5}', b'{"alerts": [1, {"labels": []}]}',
                                  b"not json", b"[" * 100_000, b"{}" * 400_000])
def test_a_malformed_notification_is_refused_without_a_traceback(body: bytes) -> None:
    jaeger = FakeJaeger()
    with receiver(jaeger.url) as (url, _out, err):
        status = send(url, body)
        time.sleep(0.5)
    assert status in (200, 400)
    assert jaeger.queries == 0 and not [line for line in err if "Traceback" in line], err


def test_a_slow_sender_is_dropped_and_holds_nothing_else() -> None:
    jaeger = FakeJaeger()
    with receiver(jaeger.url) as (url, _out, err):
        port = int(url.split(":")[2].split("/")[0])
        slow = socket.create_connection(("127.0.0.1", port))
        slow.sendall(b"POST /alerts HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        assert send(url, notification(1, 1)) == 200  # answered meanwhile
        slow.settimeout(30)
        started = time.monotonic()
        assert slow.recv(100) == b""  # closed by the receiver
        assert time.monotonic() - started < 15
        slow.close()
        time.sleep(0.3)
    assert [line for line in err if "not sent in time" in line]
