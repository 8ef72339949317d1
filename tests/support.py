"""Helpers shared by the tests: traced agent runs and the programs some tests start (gateways,
Prometheus, Phoenix)."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import time
import urllib.request
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import Status, StatusCode
from oteltap import OtelTapHttpProtobufReceiver, OtelTapHttpProtobufReceiverSettings

from otel_scorers.testing import CapturedTelemetry

#: The in-memory telemetry of the ``telemetry`` fixture.
Telemetry = CapturedTelemetry


ROOT = Path(__file__).resolve().parents[1]


def doc(name: str) -> str:
    """The text of a user-facing document: ``README.md`` or a page under ``docs/``."""
    return (ROOT / name).read_text() if name == "README.md" else (ROOT / "docs" / name).read_text()


def section(text: str, heading: str, until: str | None = None) -> str:
    """The part of a Markdown document after ``heading`` (and before ``until``)."""
    after = text.split(heading, 1)[1]
    return after.split(until, 1)[0] if until else after


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


def genai_attributes(prompt: str = "Hello, who are you?", answer: str = "Hi! I am a bot.",
                     system: str | None = "Be polite.", agent: str = "support-bot",
                     **extra: Any) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": agent,
        "gen_ai.input.messages": json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": prompt}]}]),
        "gen_ai.output.messages": json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": answer}],
              "finish_reason": "stop"}]),
    }
    if system is not None:
        attrs["gen_ai.system_instructions"] = json.dumps([{"type": "text", "content": system}])
    attrs.update(extra)
    return attrs


def end_agent_span(telemetry: Telemetry, *, error: bool = False, name: str = "invoke_agent",
                   **attrs: Any) -> ReadableSpan:
    with telemetry.tracer().start_as_current_span(
            name, attributes=genai_attributes(**attrs)) as span:
        if error:
            span.set_status(Status(StatusCode.ERROR, "boom"))
    return span  # type: ignore[return-value]


class Upstream:
    """oteltap on 127.0.0.1 collecting every span it receives."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.spans: list[Any] = []
        self.logs: list[Any] = []
        self.metrics: list[Any] = []
        self._tap = OtelTapHttpProtobufReceiver(
            OtelTapHttpProtobufReceiverSettings(http_port=self.port))
        self._tasks: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> Upstream:
        await self._tap.start()
        self._tasks = [asyncio.create_task(self._collect(stream, into)) for stream, into in (
            (self._tap.stream_traces(), self.spans), (self._tap.stream_logs(), self.logs),
            (self._tap.stream_metrics(), self.metrics))]
        await asyncio.sleep(0.2)
        return self

    async def _collect(self, stream: AsyncIterator[Any], into: list[Any]) -> None:
        async for item in stream:
            into.append(item)

    async def __aexit__(self, *exc: object) -> None:
        for task in self._tasks:
            task.cancel()
        await self._tap.stop()

    async def wait_for(self, check: Any, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not check(self.spans):
            if time.monotonic() > deadline:
                return
            await asyncio.sleep(0.1)


def processor_from_env(monkeypatch: Any, judge_server: Any, telemetry: Telemetry,
                       env: dict[str, str]) -> Any:
    """A processor configured only from ``OTEL_SCORERS_*`` variables (``env`` plus the judge
    at ``judge_server``), installed on ``telemetry``'s providers before its span exporter."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from otel_scorers import ScoringSpanProcessor

    for key, value in {**env, "OTEL_SCORERS_JUDGE_MODEL": judge_server.model,
                       "OTEL_SCORERS_JUDGE_API_BASE": judge_server.url,
                       "OTEL_SCORERS_JUDGE_API_KEY": "k"}.items():
        monkeypatch.setenv(key, value)
    processor = ScoringSpanProcessor(tracer_provider=telemetry.tracer_provider,
                                     meter_provider=telemetry.meter_provider,
                                     logger_provider=telemetry.logger_provider)
    telemetry.tracer_provider.add_span_processor(processor)
    telemetry.tracer_provider.add_span_processor(SimpleSpanProcessor(telemetry.spans_out))
    return processor


def digest_of(source: list[str], trace_id: str) -> str:
    """``otel-scorers report`` from a backend: the failing rubric criterion, its reason and
    this trace among its examples; the example's link."""
    from click.testing import CliRunner

    from otel_scorers.cli import main

    result = CliRunner().invoke(main, ["report", *source, "--agent", "support-bot",
                                       "--window", "1h", "--json"])
    assert result.exit_code == 0, result.output
    digest = json.loads(result.stdout)
    rubric = [r for r in digest["rates"] if r["scorer"] == "rubric"]
    assert rubric and rubric[0]["failures"] >= 1, digest
    groups = {(g["scorer"], g["criterion"]): g for g in digest["groups"]}
    group = groups[("rubric", "cites_a_source")]
    links = {e["trace_id"]: e["link"] for e in group["examples"]}
    assert trace_id in links
    assert group["reasons"] and group["reasons"][0]["count"] >= 1
    return str(links[trace_id])


def reviewed_canaries(processor: Any) -> None:
    """The canaries of a processor whose cases are the reviewers' labels (one passing, two
    failing runs) judged by a judge that passes everything: TPR 1, TNR 0."""
    import time

    canaries = processor.canaries
    assert canaries is not None
    deadline = time.monotonic() + 120
    while len(getattr(canaries.states.get("rubric"), "window", ())) < 6:
        assert time.monotonic() < deadline, processor.health().get("canaries")
        time.sleep(0.1)
    state = canaries.states["rubric"]
    assert (len(state.passing), len(state.failing)) == (1, 2)
    report = processor.health()["canaries"]["rubric"]
    assert report["true_positive_rate"] == 1.0 and report["true_negative_rate"] == 0.0


def batched_run(judge_server: Any, exporter: Any, tmp_path: Any, monkeypatch: Any,
                landed: Any) -> tuple[Any, Any]:
    """An agent run judged by a rubric scorer in the batch lane (the scripted judge's batch
    completing only after the run's spans were exported through ``exporter``), its results
    written to the backend the environment names; returns (the run's span context, what
    ``landed(context)`` found once the batch came back)."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from otel_scorers import RubricScorer
    from otel_scorers.judge.client import JudgeClient
    from otel_scorers.pipeline import ScorerSpec, ScoringSpanProcessor

    monkeypatch.setenv("OTEL_SCORERS_BATCH_DIR", str(tmp_path / "spool"))
    monkeypatch.setenv("OTEL_SCORERS_BATCH_INTERVAL_S", "0.3")
    monkeypatch.setenv("OTEL_SCORERS_CANARY", "false")
    judge_server.batches.polls = 10_000
    judge = JudgeClient("openai/gpt-4o-mini", api_base=judge_server.url, api_key="k",
                        structured_output="json_object")
    provider = TracerProvider(resource=Resource.create({"service.name": "support-app"}))
    processor = ScoringSpanProcessor(
        [ScorerSpec(RubricScorer(judge, "- greets the user\n- cites a source"), lane="batch")],
        tracer_provider=provider, events=False)
    provider.add_span_processor(processor)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    try:
        with provider.get_tracer("app").start_as_current_span(
                "invoke_agent support-bot", attributes=genai_attributes(
                    prompt="Reset my password?", answer="Hello! Settings > Security.")) as agent:
            context = agent.get_span_context()
        assert processor.force_flush(30_000)
        assert landed(context, timeout_s=5) in (None, []), "judged before its batch came back"
        judge_server.batches.polls = 1  # the provider finishes the batch
        found = landed(context, timeout_s=60)
    finally:
        processor.shutdown()
        provider.shutdown()
    return context, found
