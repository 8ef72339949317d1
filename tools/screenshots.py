"""Screenshots of otel-scorers' results in the real Phoenix and MLflow UIs, for docs/sinks.md.

    make screenshots        # or: .venv/bin/python tools/screenshots.py docs/images

Needs what `make test` installs (.venv-phoenix, .venv-mlflow) and a Chromium (`apt-get install
chromium`). It starts both servers on loopback ports, traces three small agent runs with the
scoring processor writing to both (the judge is the scripted server of otel_scorers.testing,
answering every criterion but the last of the third run; no API key, no network), then has a
headless Chromium take one screenshot of each UI: `phoenix-annotations.png` (the project's spans
with their annotation columns) and `mlflow-assessments.png` (the last run's trace, its evaluated
span carrying the two assessments: "Assess 2"). Not run by the test suite: the tests check the
same results through each server's API.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait(url: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"{url} did not come up")


@contextmanager
def server(argv: list[str], env: dict[str, str], health: str) -> Iterator[None]:
    work = tempfile.mkdtemp(prefix="otel-scorers-shot-")
    log = Path(work) / "server.log"
    process = subprocess.Popen(argv, env={**os.environ, **env, "DO_NOT_TRACK": "1"},
                               stdout=log.open("w"), stderr=subprocess.STDOUT, cwd=work)
    try:
        wait(health)
        yield
    finally:
        process.terminate()
        process.wait(30)
        shutil.rmtree(work, ignore_errors=True)


def post(url: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def trace_runs(phoenix: str, mlflow: str, experiment: str) -> str:
    """Traces the runs, scored into both backends; returns the last run's trace id."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from otel_scorers import JudgeClient, RubricScorer, TrajectoryScorer
    from otel_scorers.pipeline import ScoringSpanProcessor
    from otel_scorers.testing import ScriptedJudgeServer, judge_responder

    os.environ["OTEL_SCORERS_PHOENIX_ENDPOINT"] = phoenix
    os.environ["OTEL_SCORERS_MLFLOW_TRACKING_URI"] = mlflow
    with ScriptedJudgeServer(judge_responder(satisfied=lambda i, text: "source" not in text)
                             ) as judge_server:
        judge = JudgeClient(judge_server.model, api_base=judge_server.url, api_key="k")
        provider = TracerProvider(resource=Resource.create({"service.name": "support-app"}))
        processor = ScoringSpanProcessor(
            [RubricScorer(judge, "- answers the question\n- is polite\n- cites a source"),
             TrajectoryScorer(["search_docs"])], tracer_provider=provider, events=False)
        provider.add_span_processor(processor)
        provider.add_span_processor(SimpleSpanProcessor(
            OTLPSpanExporter(endpoint=f"{phoenix}/v1/traces")))
        provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(
            endpoint=f"{mlflow}/v1/traces", headers={"x-mlflow-experiment-id": experiment})))
        tracer = provider.get_tracer("support-app")
        trace_id = ""
        for question, answer in (("How do I reset my password?",
                                  "Open Settings > Security > Reset password (docs: /reset)."),
                                 ("Can I export my data?", "Yes: Settings > Export."),
                                 ("Why was I charged twice?", "Sorry about that.")):
            attributes = {
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support",
                "gen_ai.input.messages": json.dumps(
                    [{"role": "user", "parts": [{"type": "text", "content": question}]}]),
                "gen_ai.output.messages": json.dumps(
                    [{"role": "assistant", "parts": [{"type": "text", "content": answer}]}])}
            with tracer.start_as_current_span("invoke_agent support",
                                              attributes=attributes) as agent, \
                    tracer.start_as_current_span("execute_tool search_docs", attributes={
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": "search_docs",
                        "gen_ai.tool.call.result": "docs: " + question}):
                trace_id = f"{agent.get_span_context().trace_id:032x}"
        processor.force_flush(60_000)
        processor.shutdown()
        provider.shutdown()
    return trace_id


def shoot(url: str, out: Path, width: int = 1600) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("no Chromium: apt-get install chromium")
    subprocess.run([chromium, "--headless=new", "--no-sandbox", "--disable-gpu",
                    "--hide-scrollbars", f"--window-size={width},1000",
                    "--virtual-time-budget=20000", f"--screenshot={out}", url],
                   check=True, capture_output=True, timeout=120)
    print(f"wrote {out}")


def main(argv: list[str]) -> int:
    out = Path(argv[1] if len(argv) > 1 else ROOT / "docs" / "images")
    out.mkdir(parents=True, exist_ok=True)
    phoenix_port, mlflow_port = free_port(), free_port()
    phoenix, mlflow = f"http://127.0.0.1:{phoenix_port}", f"http://127.0.0.1:{mlflow_port}"
    with ExitStack() as stack:
        work = tempfile.mkdtemp(prefix="otel-scorers-shot-")
        stack.callback(shutil.rmtree, work, True)
        stack.enter_context(server(
            [str(ROOT / ".venv-phoenix/bin/phoenix"), "serve"],
            {"PHOENIX_HOST": "127.0.0.1", "PHOENIX_PORT": str(phoenix_port),
             "PHOENIX_GRPC_PORT": str(free_port()), "PHOENIX_WORKING_DIR": work,
             "PHOENIX_TELEMETRY_ENABLED": "false"}, f"{phoenix}/healthz"))
        stack.enter_context(server(
            [str(ROOT / ".venv-mlflow/bin/mlflow"), "server", "--host", "127.0.0.1",
             "--port", str(mlflow_port), "--backend-store-uri", f"sqlite:///{work}/mlflow.db",
             "--default-artifact-root", f"{work}/artifacts"],
            {"MLFLOW_DISABLE_TELEMETRY": "true"}, f"{mlflow}/health"))
        experiment = post(f"{mlflow}/api/2.0/mlflow/experiments/create",
                          {"name": "support-app"})["experiment_id"]
        trace_id = trace_runs(phoenix, mlflow, experiment)
        time.sleep(3)  # Phoenix inserts annotations in the background
        shoot(f"{phoenix}/projects/UHJvamVjdDox/spans", out / "phoenix-annotations.png",
              width=2400)
        shoot(f"{mlflow}/#/experiments/{experiment}/traces/tr-{trace_id}",
              out / "mlflow-assessments.png", width=2000)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
