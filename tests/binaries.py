"""The real observability components as processes for the tests, all on 127.0.0.1: the
OpenTelemetry Collector built from ``collector-config/builder-config.yaml``, Jaeger v2, Prometheus,
and ``otel-scorers serve`` gateways. ``make stack`` (a dependency of ``make test``) builds the
first two into ``.stack/``; ``make test`` installs Prometheus."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.support import ROOT, free_port, wait_until_up

CONFIG = ROOT / "collector-config"
STACK = ROOT / ".stack"
COLLECTOR = STACK / "otelcol" / "otelcol-scorers"
JAEGER = STACK / "jaeger"


def binary(path: Path) -> str:
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path.relative_to(ROOT)} is missing: `make stack` builds it (`make test` "
                    "runs it first)")
    return str(path)


@dataclass
class Service:
    """A started process: its log file and the addresses it listens on."""

    process: subprocess.Popen[bytes]
    log: Path
    addresses: dict[str, str] = field(default_factory=dict)

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-6000:] if self.log.exists() else ""

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


@contextmanager
def started(args: list[str], *, log: Path, env: dict[str, str], health: str,
            addresses: dict[str, str], timeout_s: float = 90) -> Iterator[Service]:
    """Start ``args``, wait until ``health`` answers 200, stop it (and its log) on the way out."""
    with log.open("wb") as sink:
        process = subprocess.Popen(args, stdout=sink, stderr=subprocess.STDOUT,
                                   env={**os.environ, **env})
    service = Service(process, log, addresses)
    try:
        wait_until_up(health, process, timeout_s=timeout_s, output=service.output)
        yield service
    finally:
        service.stop()


T = TypeVar("T")


@contextmanager
def on_free_ports(start: Callable[[], AbstractContextManager[T]]) -> Iterator[T]:
    """``start()`` entered, tried again on fresh ports (up to three times) when another
    process took a port between choosing it and binding it (tests run beside other work)."""
    for attempt in range(3):
        stack = ExitStack()
        try:
            value = stack.enter_context(start())
        except RuntimeError as exc:
            stack.close()
            if "address already in use" in str(exc) and attempt < 2:
                continue
            raise
        with stack:
            yield value
        return


@contextmanager
def jaeger(work: Path) -> Iterator[Service]:
    """Jaeger v2 from ``collector-config/jaeger.yaml``: OTLP in, memory storage, query API."""
    def start() -> AbstractContextManager[Service]:
        ports = {name: f"127.0.0.1:{free_port()}" for name in
                 ("JAEGER_OTLP_GRPC_ENDPOINT", "JAEGER_OTLP_HTTP_ENDPOINT",
                  "JAEGER_QUERY_HTTP_ENDPOINT", "JAEGER_QUERY_GRPC_ENDPOINT",
                  "JAEGER_HEALTH_ENDPOINT")}
        return started([binary(JAEGER), "--config", str(CONFIG / "jaeger.yaml")],
                       log=work / "jaeger.log", env=ports,
                       health=f"http://{ports['JAEGER_HEALTH_ENDPOINT']}/status",
                       addresses={"otlp_grpc": ports["JAEGER_OTLP_GRPC_ENDPOINT"],
                                  "query": f"http://{ports['JAEGER_QUERY_HTTP_ENDPOINT']}"})

    with on_free_ports(start) as service:
        yield service


@contextmanager
def collector(config: str, work: Path, **env: str) -> Iterator[Service]:
    """The built Collector with a shipped config; its endpoints on free loopback ports (any
    ``env`` given wins). ``addresses``: ``grpc`` (host:port), ``http``, ``prometheus``,
    ``telemetry`` (the Collector's own metrics), ``health``."""
    def start() -> AbstractContextManager[Service]:
        ports = {"OTLP_GRPC_ENDPOINT": f"127.0.0.1:{free_port()}",
                 "OTLP_HTTP_ENDPOINT": f"127.0.0.1:{free_port()}",
                 "PROMETHEUS_EXPORTER_ENDPOINT": f"127.0.0.1:{free_port()}",
                 "HEALTH_CHECK_ENDPOINT": f"127.0.0.1:{free_port()}",
                 "OTELCOL_TELEMETRY_HOST": "127.0.0.1",
                 "OTELCOL_TELEMETRY_PORT": str(free_port()),
                 "EVALUATION_EVENTS_FILE": str(work / "evaluation-events.jsonl"),
                 **env}
        name = Path(config).stem
        return started(
            [binary(COLLECTOR), "--config", str(CONFIG / config)],
            log=work / f"{name}.log", env=ports,
            health=f"http://{ports['HEALTH_CHECK_ENDPOINT']}/",
            addresses={
                "grpc": ports["OTLP_GRPC_ENDPOINT"],
                "http": f"http://{ports['OTLP_HTTP_ENDPOINT']}",
                "prometheus": ports["PROMETHEUS_EXPORTER_ENDPOINT"],
                "telemetry": (f"http://127.0.0.1:{ports['OTELCOL_TELEMETRY_PORT']}"
                              "/metrics"),
                "events": ports["EVALUATION_EVENTS_FILE"]})

    with on_free_ports(start) as service:
        yield service


@contextmanager
def gateway(scorers_config: Path, upstream: str, work: Path, *, name: str,
            grpc_port: int | None = None) -> Iterator[Service]:
    """``otel-scorers serve`` in its own process (HTTP and gRPC listeners)."""
    port, grpc = free_port(), grpc_port or free_port()
    with started([sys.executable, "-m", "otel_scorers", "serve", "--upstream", upstream,
                  "--host", "127.0.0.1", "--port", str(port), "--grpc-port", str(grpc),
                  "--config", str(scorers_config), "--metric-interval", "1"],
                 log=work / f"{name}.log", env={},
                 health=f"http://127.0.0.1:{port}/health",
                 addresses={"http": f"http://127.0.0.1:{port}",
                            "grpc": f"127.0.0.1:{grpc}"}) as service:
        yield service


@contextmanager
def prometheus(work: Path, targets: dict[str, str], *, honor_labels: bool,
               rules: Path | None = None, alertmanager: str | None = None,
               flags: tuple[str, ...] = ()) -> Iterator[str]:
    """Prometheus scraping ``targets`` (job -> host:port) every second with the shipped rules
    (or ``rules``), sending its alerts to ``alertmanager`` (host:port) when given; yields its
    base URL."""
    path = shutil.which("prometheus")
    if path is None:
        pytest.fail("prometheus is missing: `make test` installs it (apt-get install prometheus)")
    port = free_port()
    config = work / "prometheus.yml"
    settings: dict[str, Any] = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(rules or CONFIG / "prometheus" / "otel-scorers.rules.yml")],
        "scrape_configs": [{"job_name": job, "honor_labels": honor_labels,
                            "static_configs": [{"targets": [target]}]}
                           for job, target in targets.items()]}
    if alertmanager is not None:
        settings["alerting"] = {"alertmanagers": [{"static_configs": [
            {"targets": [alertmanager]}]}]}
    config.write_text(json.dumps(settings))
    with started([path, f"--config.file={config}", f"--storage.tsdb.path={work / 'prom-data'}",
                  f"--web.listen-address=127.0.0.1:{port}", *flags],
                 log=work / "prometheus.log", env={},
                 health=f"http://127.0.0.1:{port}/-/ready", addresses={}):
        yield f"http://127.0.0.1:{port}"


@contextmanager
def alertmanager(work: Path, config: Path) -> Iterator[str]:
    """Alertmanager (Debian's package, installed by ``make test``) with ``config``, clustering
    off; yields its host:port."""
    path = shutil.which("prometheus-alertmanager")
    if path is None:
        pytest.fail("prometheus-alertmanager is missing: `make test` installs it (apt-get "
                    "install prometheus-alertmanager)")
    port = free_port()
    with started([path, f"--config.file={config}", f"--storage.path={work / 'am-data'}",
                  f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="],
                 log=work / "alertmanager.log", env={},
                 health=f"http://127.0.0.1:{port}/-/ready", addresses={}):
        yield f"127.0.0.1:{port}"


def get_json(url: str, **params: Any) -> Any:
    if params:
        url += "?" + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def eventually(check: Callable[[], Any], *, timeout_s: float = 90, every_s: float = 0.5,
               what: str = "") -> Any:
    """Call ``check`` until it returns something truthy; fail with ``what`` after the time."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except OSError as exc:
            last = exc
        else:
            if last:
                return last
        time.sleep(every_s)
    pytest.fail(f"timed out waiting for {what or check}: last {last!r}")


# -- Jaeger's query API ----------------------------------------------------------------------
def jaeger_traces(query: str, service: str) -> list[dict[str, Any]]:
    data = get_json(f"{query}/api/traces", service=service, limit=1000, lookback="1h")
    traces: list[dict[str, Any]] = data.get("data") or []
    return traces


def tags(span: dict[str, Any]) -> dict[str, Any]:
    return {tag["key"]: tag["value"] for tag in span.get("tags", [])}


def parent_of(span: dict[str, Any]) -> str | None:
    for reference in span.get("references", []):
        if reference.get("refType") == "CHILD_OF":
            return str(reference["spanID"])
    return None


def metric_samples(url: str, name: str) -> dict[str, float]:
    """``name``'s samples in a Prometheus text exposition: labels text -> value."""
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    samples: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            key, _, value = line.rpartition(" ")
            samples[key] = float(value)
    return samples
