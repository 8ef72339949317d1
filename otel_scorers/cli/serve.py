"""``otel-scorers serve``: the OTLP scoring gateway."""

from __future__ import annotations

import errno
import re
from typing import Any

import click

from otel_scorers.cli.errors import UsageProblem
from otel_scorers.cli.options import Finite
from otel_scorers.cli.rescore import processor_for

__all__ = ["serve"]


@click.command()
@click.option("--upstream", envvar="OTEL_SCORERS_UPSTREAM", required=True,
              callback=lambda _ctx, _param, value: _upstream(value),
              help="Base URL of the OTLP/HTTP receiver traces are forwarded to (a Collector: "
                   "http://collector:4318). [env OTEL_SCORERS_UPSTREAM]")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(1, 65535), default=4318, show_default=True,
              help="OTLP/HTTP port (/v1/traces, /health, /metrics).")
@click.option("--grpc-port", type=click.IntRange(0, 65535), default=4317, show_default=True,
              help="OTLP/gRPC port (what the Collector's load-balancing exporter sends); "
                   "0 disables it.")
@click.option("--config", "config_file", type=click.Path(dir_okay=False),
              help="YAML settings file, as for live scoring (default: $OTEL_SCORERS_CONFIG).")
@click.option("--max-inflight", type=click.IntRange(1), default=64, show_default=True,
              help="Requests handled at once; more get 503 with Retry-After.")
@click.option("--max-body-mb", type=Finite(0.1, 4096), default=16.0, show_default=True,
              help="Largest request body accepted (after decompression).")
@click.option("--forward-timeout", type=Finite(0.1, 3600), default=10.0, show_default=True,
              help="Seconds to wait for the upstream per request.")
@click.option("--metric-interval", type=Finite(0.1, 86400), default=10.0, show_default=True,
              help="Seconds between OTLP metric exports upstream.")
@click.option("--upstream-header", "upstream_headers", multiple=True, metavar="KEY=VALUE",
              help="Header sent upstream with forwarded traces and evaluation telemetry "
                   "(repeatable; e.g. an API key). Default: OTEL_EXPORTER_OTLP_HEADERS.")
@click.option("--read-timeout", type=Finite(0.1, 3600), default=30.0, show_default=True,
              help="Seconds a request body may take to arrive; a stalled upload gets 408.")
@click.option("--token-file", type=click.Path(dir_okay=False),
              help="File holding the bearer token senders must present on /v1/* (HTTP and "
                   "gRPC). Default: $OTEL_SCORERS_GATEWAY_TOKEN; neither: no authentication.")
@click.option("--tls-cert", type=click.Path(dir_okay=False),
              help="PEM certificate chain: serve both listeners over TLS (with --tls-key).")
@click.option("--tls-key", type=click.Path(dir_okay=False), help="PEM private key for TLS.")
@click.option("--shutdown-timeout", type=Finite(0.1, 3600), default=10.0,
              show_default=True,
              help="On SIGTERM, seconds to let queued evaluations finish, then to flush the "
                   "evaluation telemetry (also each export's timeout); requests in flight get "
                   "--forward-timeout first. Within a typical 30 s termination grace period.")
@click.option("--check-judge", is_flag=True,
              help="Before listening, make one request to each judge in its structured-output "
                   "mode; exit 2, saying what to fix, when one fails.")
def serve(upstream: str, host: str, port: int, grpc_port: int, config_file: str | None,
          max_inflight: int,
          max_body_mb: float, forward_timeout: float, metric_interval: float,
          upstream_headers: tuple[str, ...], read_timeout: float, token_file: str | None,
          tls_cert: str | None, tls_key: str | None, shutdown_timeout: float,
          check_judge: bool) -> None:
    """Run the OTLP scoring gateway: accept /v1/traces, /v1/logs and /v1/metrics (HTTP and
    gRPC), forward upstream, score.

    Data is forwarded before it is scored, so a slow judge never delays it. GET /health and
    GET /metrics (Prometheus) report on the gateway and its pipeline.
    """
    from aiohttp import web
    from opentelemetry.exporter.prometheus import PrometheusMetricReader

    from otel_scorers.gateway import Gateway
    from otel_scorers.gateway.security import BearerAuth, safe_url, server_tls, token_from
    from otel_scorers.otlp import Telemetry

    logging_setup()
    headers = _headers(upstream_headers)
    try:
        token = token_from(token_file)
        auth = BearerAuth(token) if token else None
        tls = server_tls(tls_cert, tls_key)
    except ValueError as exc:
        raise UsageProblem(str(exc)) from exc
    _check_free(host, port, grpc_port)
    telemetry = Telemetry(upstream, service_name="otel-scorers-gateway",
                          metric_interval_s=metric_interval,
                          extra_readers=[PrometheusMetricReader()], headers=headers or None,
                          timeout_s=shutdown_timeout)
    extra = {"check_judge": False} if check_judge else {}  # checked here, not twice
    processor = processor_for(config_file, telemetry, shutdown_timeout_s=shutdown_timeout,
                              **extra)
    if check_judge:
        _check_judges(processor, telemetry)
    gateway = Gateway(processor, upstream, meter_provider=telemetry.meter_provider,
                      max_body_bytes=int(max_body_mb * 1024 * 1024), max_inflight=max_inflight,
                      forward_timeout_s=forward_timeout, read_timeout_s=read_timeout,
                      grpc_address=f"{host}:{grpc_port}" if grpc_port else None,
                      upstream_headers=headers, auth=auth, tls=tls,
                      tls_files=(tls_cert, tls_key) if tls_cert and tls_key else None)
    if config_file is not None:  # SIGHUP reads it again
        gateway.rebuild = lambda: _rebuild(config_file, telemetry, shutdown_timeout)
    app = gateway.app()

    async def flush_telemetry(_app: Any) -> None:
        import asyncio

        await asyncio.to_thread(telemetry.shutdown)

    app.on_cleanup.append(flush_telemetry)
    scheme = "https" if tls is not None else "http"
    click.echo(f"otel-scorers gateway on {scheme}://{host}:{port}"
               + (f" and grpc://{host}:{grpc_port}" if grpc_port else "")
               + f" -> {safe_url(upstream)} "
               f"(scorers: {', '.join(s.name for s in processor.scorers)}; "
               f"judge: {_judges(processor)}; "
               + (f"results also to: {_sinks(processor)}; " if _sinks(processor) else "")
               + f"auth: {'bearer token' if auth else 'none'}; "
               f"tls: {'on' if tls else 'off'})", err=True)
    # on SIGTERM, requests in flight get at most --forward-timeout more (not aiohttp's 60 s)
    try:
        web.run_app(app, host=host, port=port, print=None, handle_signals=True,
                    ssl_context=tls, shutdown_timeout=forward_timeout)
    except OSError as exc:  # taken since the check above (a race): one line, not a traceback
        if exc.errno not in (errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES):
            raise
        raise UsageProblem(f"cannot listen on {host}:{port} or :{grpc_port}: "
                           f"{exc.strerror or exc}") from None


def _upstream(url: str) -> str:
    """``url`` when it is an http(s) URL with a host (and a valid port); else a usage error
    (exit 2) naming it without its credentials, before anything listens."""
    from urllib.parse import urlsplit

    from otel_scorers.http import shown_url

    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (parsing the port is the check)
        good = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:
        good = False
    if not good:
        shown = shown_url(url) if "://" in url else url if "@" not in url else "the value"
        raise click.BadParameter(f"{shown} is "
                                 "not an http(s) URL with a host (e.g. http://collector:4318)",
                                 param_hint="'--upstream'")
    return url


def _rebuild(config_file: str, telemetry: Any, shutdown_timeout: float) -> Any:
    """The processor the configuration file (and the environment) describe now; raises
    :class:`~otel_scorers.errors.ConfigError` when it is not valid."""
    from otel_scorers.config import load_settings
    from otel_scorers.pipeline.processor import ScoringSpanProcessor

    load_settings(config=config_file)  # raises on a bad file or variable
    return ScoringSpanProcessor(config=config_file, tracer_provider=telemetry.tracer_provider,
                                meter_provider=telemetry.meter_provider,
                                logger_provider=telemetry.logger_provider,
                                shutdown_timeout_s=shutdown_timeout, check_judge=False)


def _check_judges(processor: Any, telemetry: Any) -> None:
    """``--check-judge``: one request to each judge before listening; exit 2 on a failure
    (its fix is the error line the check logged)."""
    from otel_scorers import background_loop
    from otel_scorers.pipeline.build import check_judges
    from otel_scorers.pipeline.health import judges_of

    results = background_loop.run_sync(check_judges(judges_of(processor.scorers)))
    failed = [r for r in results if not r.ok]
    if failed:
        processor.shutdown()
        telemetry.shutdown()
        raise UsageProblem(f"--check-judge: {len(failed)} judge(s) did not answer the start "
                           f"check ({', '.join(str(r.error_type) for r in failed)}); the line "
                           "above says what to fix")
    click.echo(f"judge check: {len(results)} judge(s) answered", err=True)


def _judges(processor: Any) -> str:
    """The scorers' judges as they may be printed: model and endpoint, never a key."""
    from otel_scorers.gateway.security import safe_url

    shown = []
    for scorer in processor.scorers:
        judge = getattr(scorer, "judge", None)
        if judge is None:
            continue
        base = getattr(judge, "api_base", None)
        text = f"{judge.model}" + (f" at {safe_url(base)}" if base else "")
        if text not in shown:
            shown.append(text)
    return ", ".join(shown) or "none"


def _check_free(host: str, port: int, grpc_port: int) -> None:
    """A port in use is a usage error (one line, exit 2), not a traceback after start-up."""
    import socket

    if port == grpc_port:
        raise UsageProblem(f"--port and --grpc-port are both {port}: OTLP/HTTP and OTLP/gRPC "
                           "need a port each (--grpc-port 0 turns gRPC off)")
    for number in (port, grpc_port):
        if not number:
            continue
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host, number))
            except OSError as exc:
                raise UsageProblem(f"cannot listen on {host}:{number}: "
                                   f"{exc.strerror or exc}") from None


def _headers(pairs: tuple[str, ...]) -> dict[str, str]:
    """``KEY=VALUE`` options, else ``OTEL_EXPORTER_OTLP_HEADERS`` (``k1=v1,k2=v2``)."""
    import os
    from urllib.parse import unquote

    if not pairs:
        raw = os.environ.get("OTEL_EXPORTER_OTLP_HEADERS", "")
        pairs = tuple(p for p in raw.split(",") if p.strip())
    headers: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageProblem(f"an upstream header must be KEY=VALUE (got one without '=' "
                               f"of {len(pair)} characters)")
        name, text = key.strip().lower(), unquote(value.strip())
        # a header's name is a token and its value has no control character: a CR or LF
        # would split the request (header injection), and every export would fail
        if not _TOKEN.fullmatch(name) or any((ord(c) < 32 and c != "\t") or ord(c) == 127
                                             for c in text):
            raise UsageProblem(f"an upstream header must be a name of letters, digits and "
                               f"-_. and a value without control characters (the header "
                               f"{name[:40]!r} is not; its value is not shown)")
        headers[name] = text
    return headers


_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9a-z-]+")


def logging_setup() -> None:
    import logging

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")


def _sinks(processor: Any) -> str:
    """The result backends, as the start line names them (their rows say how: endpoints
    without credentials)."""
    from otel_scorers import registry

    settings = processor.settings
    return ", ".join(row.describe(settings.backend(row.name)) for row in registry.backends()
                     if row.enabled(settings.backend(row.name)))
