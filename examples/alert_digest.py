"""An Alertmanager webhook receiver that answers each alert with the failure digest of its agent.

    JAEGER_URL=http://127.0.0.1:16686 python examples/alert_digest.py [PORT]

Point a webhook receiver of collector-config/alertmanager/alertmanager.yml at
``http://<this host>:PORT/alerts`` (default 9095). For every firing alert that names a service
(``job``) and an agent, it reads the last hour's evaluations of that service from Jaeger and
prints the digest of that agent as markdown (paste it into the incident; or post it to your chat
from ``post``). Nothing here is needed by otel-scorers itself: it shows the library calls
(``JaegerSource``, ``build_digest``, ``markdown``) that ``otel-scorers report`` makes.
"""

from __future__ import annotations

import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from otel_scorers.report import JaegerSource, SourceError, build_digest, markdown

WINDOW_S = 3600
MAX_BODY = 1_048_576  # an Alertmanager notification is small: refuse anything larger


def digest_for(jaeger: str, service: str, agent: str) -> str:
    """The markdown digest of ``agent`` in ``service`` over the last hour."""
    source = JaegerSource(jaeger, service)
    end = time.time_ns()
    start = end - WINDOW_S * 1_000_000_000
    read, notes = source.read(start - WINDOW_S * 1_000_000_000, end)
    mine = [e for e in read if e.agent == agent]
    return markdown(build_digest([e for e in mine if e.time_ns >= start],
                                 [e for e in mine if e.time_ns < start], start_ns=start,
                                 end_ns=end, source=source.name, link=source.trace_link,
                                 notes=notes))


def post(text: str) -> None:
    """Where a digest goes: stdout here; your chat's incoming webhook in production."""
    print(text, flush=True)


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if self.path != "/alerts" or not 0 < length <= MAX_BODY:
            self.send_response(400)
            self.end_headers()
            return
        try:
            notification: dict[str, Any] = json.loads(self.rfile.read(length))
        except ValueError:
            self.send_response(400)
            self.end_headers()
            return
        self.send_response(200)  # answered at once: Alertmanager does not wait on the digest
        self.end_headers()
        seen = set()
        for alert in notification.get("alerts", []):
            labels = alert.get("labels", {}) if isinstance(alert, dict) else {}
            service, agent = labels.get("job"), labels.get("agent")
            if alert.get("status") != "firing" or not service or not agent or \
                    (service, agent) in seen:
                continue
            seen.add((service, agent))
            try:
                post(f"#### {labels.get('alertname')}: {agent} ({service})\n\n"
                     + digest_for(os.environ["JAEGER_URL"], str(service), str(agent)))
            except SourceError as exc:
                post(f"no digest for {agent} ({service}): {exc}")

    def log_message(self, *args: Any) -> None:
        pass


def main() -> None:
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 9095
    server = ThreadingHTTPServer(("127.0.0.1", port), Receiver)
    print(f"alert digests on http://127.0.0.1:{port}/alerts", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
