"""An Alertmanager webhook receiver that answers each alert with the failure digest of its agent.

    JAEGER_URL=http://127.0.0.1:16686 python examples/alert_digest.py [PORT]

Point a webhook receiver of collector-config/alertmanager/alertmanager.yml at
``http://<this host>:PORT/alerts`` (default 9095). For every firing alert that names a service
(``job``) and an agent, it reads the last hour's evaluations of that service from Jaeger and
prints the digest of that agent as markdown (paste it into the incident; or post it to your chat
from ``post``). Nothing here is needed by otel-scorers itself: it shows the library calls
(``JaegerSource``, ``build_digest``, ``markdown``) that ``otel-scorers report`` makes.

It is bounded as the library is, since an example is code users copy:

- ``ALERT_DIGEST_TOKEN`` set: a post without ``Authorization: Bearer <token>`` is refused (401;
  Alertmanager sends it with ``http_config.authorization.credentials``);
- a body is at most ``MAX_BODY`` bytes, read within ``READ_TIMEOUT_S``; one that is not an
  Alertmanager notification (JSON with an ``alerts`` list) is refused (400), never a traceback;
- one notification makes at most ``MAX_DIGESTS`` digests from at most ``MAX_SERVICES``
  services, each service read once from Jaeger (one list of operations and at most 50 trace
  queries: ``JaegerSource``): at most 255 Jaeger queries per notification, however many alerts
  it carries; the alerts past the caps are counted in one line of the output.

Each refusal is one line on stderr; ``COUNTS`` tallies them.
"""

from __future__ import annotations

import collections
import hmac
import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from otel_scorers.report import JaegerSource, SourceError, build_digest, markdown

WINDOW_S = 3600
MAX_BODY = 512 * 1024  # an Alertmanager notification is small: refuse anything larger
READ_TIMEOUT_S = 10.0  # a connection that sends slower than this is dropped
MAX_DIGESTS = 10  # digests per notification
MAX_SERVICES = 5  # services (Jaeger reads) per notification
#: what was refused or left out, by why
COUNTS: collections.Counter[str] = collections.Counter()


def digest_for(source: Any, read: tuple[list[Any], list[str]], agent: str, start: int,
               end: int) -> str:
    """The markdown digest of ``agent`` from one reading of its service."""
    found, notes = read
    mine = [e for e in found if e.agent == agent]
    return markdown(build_digest([e for e in mine if e.time_ns >= start],
                                 [e for e in mine if e.time_ns < start], start_ns=start,
                                 end_ns=end, source=source.name, link=source.trace_link,
                                 notes=notes))


def post(text: str) -> None:
    """Where a digest goes: stdout here; your chat's incoming webhook in production."""
    print(text, flush=True)


def refuse(why: str) -> None:
    COUNTS[why] += 1
    print(f"alert_digest: notification refused ({why})", file=sys.stderr, flush=True)


def wanted(notification: Any) -> list[tuple[str, str, str]] | None:
    """The firing alerts' (alertname, service, agent), each pair once (``None``: not a
    notification)."""
    alerts = notification.get("alerts") if isinstance(notification, dict) else None
    if not isinstance(alerts, list):
        return None
    out: dict[tuple[str, str], str] = {}
    for alert in alerts:
        labels = alert.get("labels") if isinstance(alert, dict) else None
        if not isinstance(labels, dict) or alert.get("status") != "firing":
            continue
        service, agent = labels.get("job"), labels.get("agent")
        if isinstance(service, str) and isinstance(agent, str) and service and agent:
            out.setdefault((service, agent), str(labels.get("alertname", "")))
    return [(name, service, agent) for (service, agent), name in out.items()]


def reading_of(service: str, start: int, end: int) -> Any:
    """One reading of ``service``'s evaluations over the window and the one before (the
    source and what it read), or why there is none."""
    try:
        source = JaegerSource(os.environ["JAEGER_URL"], service)
        return source, source.read(start - WINDOW_S * 1_000_000_000, end)
    except (SourceError, ValueError) as exc:
        return str(exc)


def answer(alerts: list[tuple[str, str, str]]) -> None:
    """The digests of ``alerts``, within the caps (one Jaeger reading per service)."""
    services = list(dict.fromkeys(service for _, service, _ in alerts))[:MAX_SERVICES]
    chosen = [a for a in alerts if a[1] in services][:MAX_DIGESTS]
    left = len(alerts) - len(chosen)
    end = time.time_ns()
    start = end - WINDOW_S * 1_000_000_000
    readings: dict[str, Any] = {}
    for name, service, agent in chosen:
        if service not in readings:
            readings[service] = reading_of(service, start, end)
        reading = readings[service]
        if isinstance(reading, str):
            post(f"no digest for {agent} ({service}): {reading}")
            continue
        source, read = reading
        post(f"#### {name}: {agent} ({service})\n\n"
             + digest_for(source, read, agent, start, end))
    if left:
        COUNTS["over_cap"] += left
        post(f"({left} more firing agent(s) in this notification not digested: at most "
             f"{MAX_DIGESTS} digests from {MAX_SERVICES} services per notification)")


class Receiver(BaseHTTPRequestHandler):
    timeout = READ_TIMEOUT_S  # the socket's: a slow sender never holds a thread for long

    def _status(self, code: int) -> None:
        self.send_response(code)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        token = os.environ.get("ALERT_DIGEST_TOKEN")
        given = self.headers.get("Authorization") or ""
        if token and not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
            refuse("no or wrong bearer token")
            self._status(401)
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if self.path != "/alerts" or not 0 < length <= MAX_BODY:
            refuse(f"path {self.path[:64]!r} or length {length} (at most {MAX_BODY})")
            self._status(400)
            return
        try:
            alerts = wanted(json.loads(self.rfile.read(length)))
        except (ValueError, RecursionError):
            alerts = None
        except OSError:  # the read timed out: the connection is dropped
            refuse("body not sent in time")
            return
        if alerts is None:
            refuse("not an Alertmanager notification")
            self._status(400)
            return
        self._status(200)  # answered at once: Alertmanager does not wait on the digest
        answer(alerts)

    def log_message(self, *args: Any) -> None:
        pass


def main() -> None:
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 9095
    server = ThreadingHTTPServer(("127.0.0.1", port), Receiver)
    server.daemon_threads = True
    print(f"alert digests on http://127.0.0.1:{port}/alerts", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
