"""``report --mlflow`` reads by the window asked for (issue 54), on a real MLflow tracking server
(``.venv-mlflow``): on an experiment busier than the bound, failures of five days ago are in a
7-day digest (every part of the window is read by MLflow's ``timestamp_ms`` filter, not only
the newest traces), the parts cut by the bound are said in a note, and traces older than the
time read are not read at all."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from otel_scorers.cli import main
from tests.servers import call, running_mlflow

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

DAY_NS = 86_400 * 10**9


@pytest.fixture(scope="module")
def mlflow() -> Iterator[tuple[str, str]]:
    with running_mlflow() as base:
        experiment = call(base, "POST", "/api/2.0/mlflow/experiments/create",
                          {"name": "busy-app"})["experiment_id"]
        yield base, experiment


def runs(base: str, experiment: str, ages_ns: list[int]) -> list[str]:
    """One agent run per age, started that long ago, sent over OTLP; their trace ids."""
    provider = TracerProvider(resource=Resource.create({"service.name": "busy-app"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(
        endpoint=f"{base}/v1/traces", headers={"x-mlflow-experiment-id": experiment})))
    tracer = provider.get_tracer("app")
    now, ids = time.time_ns(), []
    for age in ages_ns:
        span = tracer.start_span("invoke_agent support-bot", start_time=now - age,
                                 attributes={"gen_ai.operation.name": "invoke_agent",
                                             "gen_ai.agent.name": "support-bot"})
        span.end(end_time=now - age + 1_000_000)
        ids.append(f"{span.get_span_context().trace_id:032x}")
    provider.shutdown()
    return ids


def assess(base: str, trace_id: str, *, passed: bool, age_ns: int) -> None:
    """This project's assessment, as the MLflow sink writes it, dated ``age_ns`` ago."""
    at = time.time_ns() - age_ns
    body: dict[str, Any] = {
        "assessment_name": "rubric", "trace_id": f"tr-{trace_id}",
        "feedback": {"value": 1.0 if passed else 0.0},
        "source": {"source_type": "LLM_JUDGE", "source_id": "otel-scorers"},
        "rationale": "Fine." if passed else "The answer does not cite a source.",
        "create_time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at / 1e9)) + "Z",
        "metadata": {"trace_id": trace_id, "agent": "support-bot",
                     "passed": "true" if passed else "false", "label": "pass" if passed
                     else "fail"}}
    deadline = time.monotonic() + 30
    while True:  # the trace may not be ingested yet
        try:
            call(base, "POST", f"/api/3.0/mlflow/traces/tr-{trace_id}/assessments",
                 {"assessment": body})
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


def test_a_busy_experiment_is_read_by_the_window(mlflow: tuple[str, str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from otel_scorers.report import backends

    base, experiment = mlflow
    monkeypatch.setattr(backends, "MAX_READ", 40)  # 4 traces a part (10 parts)
    recent = runs(base, experiment, [i * 10**9 for i in range(1, 46)])  # the last 45 s
    old = runs(base, experiment, [5 * DAY_NS + i * 10**9 for i in range(3)])  # 5 days ago
    ancient = runs(base, experiment, [40 * DAY_NS])  # long before any window read
    for trace in recent:
        assess(base, trace, passed=True, age_ns=0)
    for trace in old:
        assess(base, trace, passed=False, age_ns=5 * DAY_NS - 60 * 10**9)
    assess(base, ancient[0], passed=False, age_ns=0)  # a result now, on a 40-day-old trace
    started = time.monotonic()
    result = CliRunner().invoke(main, ["report", "--mlflow", base, "--experiment", experiment,
                                       "--window", "7d", "--json"])
    took = time.monotonic() - started
    assert result.exit_code == 0, result.output
    digest = json.loads(result.stdout)
    (group,) = digest["groups"]
    # the failures of five days ago are in the digest, 45 newer traces past the bound of 40
    assert group["failures"] == 3 and {e["trace_id"] for e in group["examples"]} == set(old)
    (rate,) = digest["rates"]
    assert rate["runs"] == 3 + 4 and rate["failures"] == 3  # the newest part: a sample of 4
    (note,) = digest["notes"]
    assert "1 of the 10 parts of the time read hold more than 4 traces" in note, note
    assert "their counts are a sample" in note
    assert took < 60, took
    # the 40-day-old trace was never read: its result of today is outside every part
    assert ancient[0] not in json.dumps(digest)
