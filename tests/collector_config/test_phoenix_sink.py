"""Results written natively into a real Arize Phoenix (``.venv-phoenix``, started on 127.0.0.1):
the live pipeline's evaluations become span annotations on the evaluated span, with the right
name, annotator kind, score, label and explanation; a re-score upserts; an annotation posted
before its span arrived still lands; a Phoenix that is down, then up, gets each result once."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from otel_scorers import RubricScorer, TrajectoryScorer
from otel_scorers.backends import Evaluated, PhoenixSink, SinkQueue
from otel_scorers.background_loop import submit
from otel_scorers.judge.client import JudgeClient
from otel_scorers.pipeline import ScoringSpanProcessor
from otel_scorers.scorers.result import ScoreResult
from otel_scorers.testing import ScriptedJudgeServer, judge_responder
from tests.servers import call, get, running_phoenix
from tests.support import free_port, genai_attributes, reviewed_canaries

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def phoenix() -> Iterator[str]:
    with running_phoenix() as base:
        yield base


def annotations(base: str, span_id: str, *, count: int, timeout_s: float = 30
                ) -> list[dict[str, Any]]:
    """The span's annotations once there are ``count`` of them (Phoenix inserts in the
    background)."""
    query = urllib.parse.urlencode({"span_ids": span_id, "limit": 100})
    deadline = time.monotonic() + timeout_s
    found: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        try:
            found = get(f"{base}/v1/projects/default/span_annotations?{query}")["data"]
        except urllib.error.HTTPError as exc:  # 404 until Phoenix has ingested the span
            if exc.code != 404:
                raise
            found = []
        if len(found) >= count:
            break
        time.sleep(0.3)
    return found


def send_span(base: str, attributes: dict[str, Any], processor: Any, *,
              with_tool: bool = False) -> str:
    """An agent run (with a tool call) traced through ``processor(provider)`` then a batch
    exporter to Phoenix; its span id once the processor has flushed."""
    provider = TracerProvider(resource=Resource.create({"service.name": "support-app"}))
    scoring = processor(provider)
    provider.add_span_processor(scoring)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{base}/v1/traces")))
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("invoke_agent support-bot", attributes=attributes) as agent:
        span_id = f"{agent.get_span_context().span_id:016x}"
        if with_tool:
            with tracer.start_as_current_span("execute_tool lookup", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
                    "gen_ai.tool.call.result": "Settings > Security"}):
                pass
    assert scoring.force_flush(30_000)  # the results written to Phoenix too
    provider.force_flush()
    provider.shutdown()
    return span_id


def test_live_evaluations_become_span_annotations(
        phoenix: str, judge_server: ScriptedJudgeServer, judge: JudgeClient,
        monkeypatch: pytest.MonkeyPatch) -> None:
    judge_server.responder = judge_responder(satisfied=lambda i, _t: i == 1)
    monkeypatch.setenv("OTEL_SCORERS_PHOENIX_ENDPOINT", phoenix)
    made: list[ScoringSpanProcessor] = []

    def processor(provider: TracerProvider) -> ScoringSpanProcessor:
        made.append(ScoringSpanProcessor(
            [RubricScorer(judge, "- greets the user\n- cites a source"),
             TrajectoryScorer(["lookup"])],
            tracer_provider=provider, events=False))
        return made[0]

    span_id = send_span(phoenix, genai_attributes(prompt="Reset my password?",
                                                  answer="Hello! Settings > Security."),
                        processor, with_tool=True)
    found = {a["name"]: a for a in annotations(phoenix, span_id, count=2)}
    assert set(found) == {"rubric", "trajectory"}, found
    rubric, trajectory = found["rubric"], found["trajectory"]
    assert rubric["annotator_kind"] == "LLM" and trajectory["annotator_kind"] == "CODE"
    assert rubric["result"]["score"] == 0.0 and rubric["result"]["label"] == "fail"
    assert "cites a source" in rubric["result"]["explanation"]
    assert trajectory["result"]["score"] == 1.0 and trajectory["result"]["label"] == "pass"
    assert rubric["identifier"] == "otel-scorers"
    metadata = rubric["metadata"]
    assert metadata["judge_model"] == judge.model and metadata["passed"] is False
    assert [(c["id"], c["satisfied"]) for c in metadata["criteria"]] == [
        ("greets_the_user", True), ("cites_a_source", False)]
    # which evaluator produced each (provenance): id, type, fingerprint, the score's range
    from otel_scorers.scorers.provenance import fingerprint_of

    assert metadata["evaluator_id"] == "rubric" and metadata["evaluator_type"] == "llm"
    assert metadata["evaluator_fingerprint"] == fingerprint_of(made[0].scorers[0])
    assert metadata["score_min"] == 0.0 and metadata["scale"] == 1.0
    assert trajectory["metadata"]["evaluator_type"] == "code"
    assert "judge_model" not in trajectory["metadata"]
    assert made[0].health()["sinks"]["phoenix"]["written"] == 2
    made[0].shutdown()
    # the failure digest reads them back (issue 37.4)
    from tests.support import digest_of

    link = digest_of(["--phoenix", phoenix], metadata["trace_id"])
    # its example links to the trace's page in Phoenix's UI: the project's id and the trace id
    # there resolve, through Phoenix's own API, to that trace
    project = get(f"{phoenix}/v1/projects/default")["data"]["id"]
    assert link == f"{phoenix}/projects/{project}/traces/{metadata['trace_id']}"
    query = ('query($id: ID!, $trace: ID!) { node(id: $id) { ... on Project { '
             'trace(traceId: $trace) { traceId } } } }')
    answer = call(phoenix, "POST", "/graphql", {"query": query, "variables": {
        "id": project, "trace": metadata["trace_id"]}})
    assert answer["data"]["node"]["trace"] == {"traceId": metadata["trace_id"]}, answer
    with urllib.request.urlopen(link, timeout=30) as page:  # the UI serves the page
        assert page.status == 200 and "text/html" in page.headers["Content-Type"]


def test_batch_results_reach_phoenix_late_on_their_span(
        phoenix: str, judge_server: ScriptedJudgeServer, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The batch lane (issue 38.1): the result lands as the run's span annotation when the
    batch comes back, priced as a batch result."""
    from tests.support import batched_run

    judge_server.responder = judge_responder(satisfied=lambda i, _t: i == 1)
    monkeypatch.setenv("OTEL_SCORERS_PHOENIX_ENDPOINT", phoenix)
    exporter = OTLPSpanExporter(endpoint=f"{phoenix}/v1/traces")
    context, found = batched_run(
        judge_server, exporter, tmp_path, monkeypatch,
        lambda context, timeout_s: annotations(phoenix, f"{context.span_id:016x}", count=1,
                                               timeout_s=timeout_s))
    (rubric,) = found
    assert rubric["name"] == "rubric" and rubric["result"]["label"] == "fail"
    assert rubric["metadata"]["trace_id"] == f"{context.trace_id:032x}"
    assert "cites a source" in rubric["result"]["explanation"]


def result(scorer: str, score: float) -> ScoreResult:
    return ScoreResult(run_id="r", scorer=scorer, score=score, label="pass" if score else "fail",
                       reason=f"scored {score}")


def write(queue: SinkQueue, *items: Evaluated) -> bool:
    async def offer() -> None:
        for item in items:
            queue.offer(item)
    submit(offer()).result(10)
    return queue.flush(60)


def test_a_rescore_upserts_and_an_early_annotation_still_lands(phoenix: str) -> None:
    queue = SinkQueue([PhoenixSink(phoenix)])
    provider = TracerProvider()  # no exporter yet: the span is sent after its annotation
    with provider.get_tracer("app").start_as_current_span(
            "invoke_agent early", attributes=genai_attributes(prompt="early")) as agent:
        context = agent.get_span_context()
    trace, span = f"{context.trace_id:032x}", f"{context.span_id:016x}"
    assert write(queue, Evaluated(trace, span, result("rubric", 0.0)))
    time.sleep(2)  # Phoenix holds the annotation until the span is ingested
    OTLPSpanExporter(endpoint=f"{phoenix}/v1/traces").export([agent])  # type: ignore[list-item]
    first = annotations(phoenix, span, count=1)
    assert [(a["name"], a["result"]["score"]) for a in first] == [("rubric", 0.0)]
    # the same evaluation again (a retry, a re-score): one annotation, the new score
    assert write(queue, Evaluated(trace, span, result("rubric", 1.0)))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        again = annotations(phoenix, span, count=1)
        if again and again[0]["result"]["score"] == 1.0:
            break
        time.sleep(0.3)
    assert [(a["name"], a["result"]["score"]) for a in again] == [("rubric", 1.0)]
    assert queue.totals()["phoenix"]["written"] == 2
    queue.close(5)


def test_a_phoenix_that_is_down_then_up_gets_each_result_once() -> None:
    port = free_port()
    queue = SinkQueue([PhoenixSink(f"http://127.0.0.1:{port}")], retry_s=180)
    attrs = genai_attributes(prompt="while down", answer="while down")
    provider = TracerProvider()
    with provider.get_tracer("app").start_as_current_span("invoke_agent down",
                                                         attributes=attrs) as agent:
        context = agent.get_span_context()
    item = Evaluated(f"{context.trace_id:032x}", f"{context.span_id:016x}",
                     result("rubric", 1.0))

    async def offer() -> None:
        queue.offer(item)
    submit(offer()).result(10)
    assert not queue.flush(1.5)  # nothing listens yet: retried, not lost
    assert queue.totals()["phoenix"]["retried"] >= 1
    with running_phoenix(port) as base:
        OTLPSpanExporter(endpoint=f"{base}/v1/traces").export([agent])  # type: ignore[list-item]
        assert queue.flush(60)
        found = annotations(base, item.span_id, count=1)
        assert [(a["name"], a["result"]["score"]) for a in found] == [("rubric", 1.0)]
        assert len(annotations(base, item.span_id, count=2, timeout_s=2)) == 1
    totals = queue.totals()["phoenix"]
    assert totals["written"] == 1 and "dropped" not in totals
    queue.close(1)


def test_a_refused_write_is_dropped_and_counted_at_once(phoenix: str) -> None:
    sink = PhoenixSink(phoenix)
    bad = Evaluated("0" * 32, "0" * 16, result("note", 1.0))  # 'note' is reserved: HTTP 400
    queue = SinkQueue([sink], retry_s=60)
    assert write(queue, bad)
    assert queue.totals()["phoenix"] == {"dropped": 1, "dropped:http_400": 1, "waiting": 0}
    queue.close(1)


def test_rescore_back_fills_phoenix_and_a_second_rescore_upserts(
        phoenix: str, judge_server: ScriptedJudgeServer, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from otel_scorers.cli import main
    from otel_scorers.otlp.json_lines import JsonLinesFile, JsonLinesSpanExporter

    judge_server.responder = judge_responder()
    exported = tmp_path / "traces.jsonl"
    provider = TracerProvider(resource=Resource.create({"service.name": "support-app"}))
    with exported.open("w") as stream:  # the app's spans: in Phoenix and in a file
        provider.add_span_processor(SimpleSpanProcessor(JsonLinesSpanExporter(
            JsonLinesFile(stream))))
        provider.add_span_processor(SimpleSpanProcessor(
            OTLPSpanExporter(endpoint=f"{phoenix}/v1/traces")))
        ids = []
        for i in range(3):
            with provider.get_tracer("app").start_as_current_span(
                    "invoke_agent support-bot",
                    attributes=genai_attributes(prompt=f"question {i}")) as agent:
                ids.append(f"{agent.get_span_context().span_id:016x}")
        provider.shutdown()
    monkeypatch.setenv("OTEL_SCORERS_PHOENIX_ENDPOINT", phoenix)
    config = tmp_path / "scorers.yaml"
    config.write_text(json.dumps({
        "judge": {"model": judge_server.model, "api_base": judge_server.url, "api_key": "k"},
        "scorers": [{"type": "rubric", "criteria": ["greets the user"]}]}))
    for _ in range(2):
        result = CliRunner().invoke(main, ["rescore", str(exported), "--config", str(config),
                                           "-o", str(tmp_path / "out.jsonl"), "--restart"])
        assert result.exit_code == 0, result.output
        assert "3 written to phoenix" in " ".join(result.output.split())
    for span_id in ids:
        found = annotations(phoenix, span_id, count=1)
        assert [(a["name"], a["result"]["label"]) for a in found] == [("rubric", "pass")]
        assert len(annotations(phoenix, span_id, count=2, timeout_s=1)) == 1  # upserted


def test_rescore_says_when_results_could_not_be_written(
        judge_server: ScriptedJudgeServer, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from otel_scorers.cli import main

    judge_server.responder = judge_responder()
    recorded = Path(__file__).resolve().parents[1] / "frameworks" / "recorded"
    monkeypatch.setenv("OTEL_SCORERS_PHOENIX_ENDPOINT", f"http://127.0.0.1:{free_port()}")
    config = tmp_path / "scorers.yaml"
    config.write_text(json.dumps({
        "judge": {"model": judge_server.model, "api_base": judge_server.url, "api_key": "k"},
        "scorers": [{"type": "trajectory", "expected": ["get_weather"]}],
        "sinks": {"retry_s": 1}}))
    result = CliRunner().invoke(main, ["rescore", str(recorded / "pydantic_ai-native-content"
                                                      ".jsonl.gz"), "--config", str(config)])
    assert result.exit_code == 1
    assert "3 result(s) not written to phoenix (retries_exhausted: 3)" in result.output


def test_the_gateway_writes_what_it_scores_into_phoenix(
        phoenix: str, judge_server: ScriptedJudgeServer, tmp_path: Path) -> None:
    from tests.gateway.test_gateway import _config, gateway, run_tool_app

    judge_server.responder = judge_responder()
    config = _config(tmp_path, judge_server, scorers=[
        {"type": "trajectory", "expected": ["get_weather"]}, {"type": "faithfulness"}])
    with gateway(config, phoenix, OTEL_SCORERS_PHOENIX_ENDPOINT=phoenix) as url:
        run_tool_app(url)
        deadline = time.monotonic() + 60
        spans: list[dict[str, Any]] = []
        while time.monotonic() < deadline and not spans:
            spans = [s for s in get(f"{phoenix}/v1/projects/default/spans?limit=100")["data"]
                     if s["name"] == "invoke_agent weather"]
            time.sleep(0.3)
        assert spans, "the gateway forwarded the app's spans to Phoenix"
        found = {a["name"]: a for a in annotations(phoenix, spans[0]["context"]["span_id"],
                                                   count=2, timeout_s=60)}
    assert {name: a["result"]["score"] for name, a in found.items()} == {
        "trajectory": 1.0, "faithfulness": 1.0}
    assert found["trajectory"]["annotator_kind"] == "CODE"
    assert found["faithfulness"]["annotator_kind"] == "LLM"


def test_calibrate_and_the_canaries_read_the_reviewers_labels_from_phoenix(
        phoenix: str, judge_server: ScriptedJudgeServer, judge: JudgeClient,
        monkeypatch: pytest.MonkeyPatch, make_processor: Any) -> None:
    from click.testing import CliRunner

    from otel_scorers import PromptAlignmentScorer
    from otel_scorers.cli import main

    judge_server.responder = judge_responder()  # every criterion met, alignment 1.0
    monkeypatch.setenv("OTEL_SCORERS_PHOENIX_ENDPOINT", phoenix)
    made: list[ScoringSpanProcessor] = []

    def processor(provider: TracerProvider) -> ScoringSpanProcessor:
        made.append(ScoringSpanProcessor(
            [RubricScorer(judge, "- greets the user"), PromptAlignmentScorer(judge)],
            tracer_provider=provider, events=False))
        return made[-1]

    good = send_span(phoenix, genai_attributes(prompt="Reviewed one?", answer="Hello! Yes."),
                     processor)
    bad = send_span(phoenix, genai_attributes(prompt="Reviewed two?", answer="No."), processor)
    for each in made:
        each.shutdown()
    # the reviewers' verdicts, as Phoenix's UI posts them
    request = urllib.request.Request(
        f"{phoenix}/v1/span_annotations", method="POST",
        headers={"Content-Type": "application/json"}, data=json.dumps({"data": [
            {"span_id": good, "name": "rubric", "annotator_kind": "HUMAN",
             "result": {"label": "pass"}, "identifier": "reviewer-1"},
            {"span_id": bad, "name": "rubric", "annotator_kind": "HUMAN",
             "result": {"label": "fail", "explanation": "does not greet"},
             "identifier": "reviewer-1"},
            {"span_id": good, "name": "prompt_alignment", "annotator_kind": "HUMAN",
             "result": {"score": 0.9}, "identifier": "reviewer-1"},
            {"span_id": good, "name": "tool_use", "annotator_kind": "HUMAN",
             "result": {"label": "pass"}, "identifier": "reviewer-1"},
            # a second reviewer on the same span: a case of its own (issue 35.9)
            {"span_id": bad, "name": "rubric", "annotator_kind": "HUMAN",
             "result": {"label": "fail"}, "identifier": "reviewer-2"}]}).encode())
    with urllib.request.urlopen(request, timeout=10):
        pass
    assert len(annotations(phoenix, good, count=5)) == 5  # 2 of ours, 3 of the reviewer's
    assert len(annotations(phoenix, bad, count=4)) == 4
    result = CliRunner().invoke(main, [
        "calibrate", "--cases", "phoenix", "--model", judge_server.model, "--api-base",
        judge_server.url, "--api-key", "k", "--json", "-", "--no-progress"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout[result.stdout.index("{"):])
    assert report["cases"] == 4 and report["errors"] == 0
    # the judge passed the run both reviewers failed
    assert report["pass_agreement"] == 0.3333
    assert report["band_hit_rate"] == 1.0 and report["alignment_mae"] == 0.1
    assert "tool_use: reviewers label runs, not each call" in result.stderr

    # the live canaries hold the judge to the same labels (issue 36.1): this judge passes all
    monkeypatch.setenv("OTEL_SCORERS_CANARY_FILE", "phoenix")
    monkeypatch.setenv("OTEL_SCORERS_CANARY_INTERVAL_S", "0.1")
    reviewed_canaries(make_processor([RubricScorer(judge, "- greets the user")]))


def test_phoenix_stopped_mid_run_then_restarted_loses_nothing_and_writes_each_result_once(
        judge_server: ScriptedJudgeServer, judge: JudgeClient, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Phoenix up (results written), stopped while more runs are judged (the app's spans and
    evaluation spans go out as ever, results retried), started again on the same data and
    port: every result is there once, the ones written before the stop not duplicated."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    judge_server.responder = judge_responder()
    port, work = free_port(), str(tmp_path)  # the restarted Phoenix keeps its database
    monkeypatch.setenv("OTEL_SCORERS_PHOENIX_ENDPOINT", f"http://127.0.0.1:{port}")
    provider = TracerProvider()
    processor = ScoringSpanProcessor([RubricScorer(judge, "- greets the user")],
                                     tracer_provider=provider, events=False)
    provider.add_span_processor(processor)
    kept = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(kept))
    tracer = provider.get_tracer("app")

    def judged(prompt: str) -> Any:
        with tracer.start_as_current_span("invoke_agent support-bot",
                                          attributes=genai_attributes(prompt=prompt)) as agent:
            return agent

    def ids(spans: list[Any]) -> list[str]:
        return [f"{span.get_span_context().span_id:016x}" for span in spans]

    with running_phoenix(port, work=work) as base:
        before = [judged(f"up {i}") for i in range(2)]
        OTLPSpanExporter(endpoint=f"{base}/v1/traces").export(before)
        assert processor.force_flush(60_000)
        assert all([a["name"] for a in annotations(base, span_id, count=1)] == ["rubric"]
                   for span_id in ids(before))
    during = [judged(f"down {i}") for i in range(3)]  # Phoenix is stopped now
    started = time.monotonic()
    # the results wait for Phoenix, retried; the flush does not wait it out (30 s)
    assert not processor.force_flush(30_000)
    assert time.monotonic() - started < 20
    names = [span.name for span in kept.get_finished_spans()]
    assert names.count("invoke_agent support-bot") == 5
    assert names.count("gen_ai.evaluation rubric") == 5  # evaluation spans went out as ever
    assert processor.health()["sinks"]["phoenix"]["retried"] >= 1
    with running_phoenix(port, work=work) as base:
        OTLPSpanExporter(endpoint=f"{base}/v1/traces").export(during)
        assert processor.force_flush(60_000)
        for span_id in ids(before + during):
            assert [a["name"] for a in annotations(base, span_id, count=1)] == ["rubric"]
            assert len(annotations(base, span_id, count=2, timeout_s=1)) == 1
    totals = processor.health()["sinks"]["phoenix"]
    assert totals["written"] == 5 and "dropped" not in totals
    processor.shutdown()
    provider.shutdown()
