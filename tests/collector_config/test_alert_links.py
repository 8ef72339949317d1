"""The links of the alerts about runs left unjudged, opened on the real Jaeger (issue 37.1).
``OtelScorersEvaluationsDropped`` and ``OtelScorersJudgeBudgetExhausted`` link to examples of the
runs not judged. Their links, exactly as the shipped rules render them for service ``app`` and
scorer ``rubric`` (checked by promtool in collector-config/prometheus/tests), are opened on a
real Jaeger that an application scoring live sends its spans to over OTLP: they return runs of
that application that were dropped (queue full) or skipped (budget spent), each with its marker
span under its agent span, and no judged run. (The other alerts' links: test_alerting.py,
test_judge_drift.py.)"""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
import yaml
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from otel_scorers import RubricScorer
from otel_scorers.judge.client import JudgeClient
from otel_scorers.pipeline import Sampling, ScorerSpec, ScoringSpanProcessor
from otel_scorers.testing import ScriptedJudgeServer, judge_responder
from tests.binaries import CONFIG, eventually, get_json, jaeger, parent_of, tags
from tests.support import genai_attributes

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def shipped_link(alert: str) -> str:
    """The ``failing_runs`` link promtool checks the shipped rules render for ``alert``."""
    tests = yaml.safe_load((CONFIG / "prometheus" / "tests" / "otel-scorers.rules.test.yml")
                           .read_text())
    for case in tests["tests"]:
        for check in case.get("alert_rule_test", []):
            if check["alertname"] == alert:
                for fired in check["exp_alerts"]:
                    if fired["exp_labels"].get("job") == "app":
                        return str(fired["exp_annotations"]["failing_runs"])
    raise AssertionError(f"no rendered link of {alert} in the promtool test")


def opened(link: str) -> dict[str, str]:
    """The link's search, as Jaeger's query API takes it."""
    assert link.startswith("http://localhost:16686/search?")
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(link).query))


def test_the_links_of_the_unjudged_alerts_open_the_runs_not_judged(tmp_path: Path) -> None:
    with ScriptedJudgeServer(judge_responder(delay_s=0.5)) as judge_server, \
            jaeger(tmp_path) as store:
        provider = TracerProvider(resource=Resource.create({"service.name": "app"}))
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(
            endpoint=store.addresses["otlp_grpc"], insecure=True), schedule_delay_millis=200))
        judge = JudgeClient(judge_server.model, api_base=judge_server.url, api_key="k")
        # 150 tokens a call: the budget lasts two judged runs
        processor = ScoringSpanProcessor(
            [ScorerSpec(RubricScorer(judge, "- x"),
                        Sampling(budget_tokens_per_hour=300, pace_budget=False))],
            tracer_provider=provider, queue_size=1, concurrency=1, cache_ttl_s=0,
            events=False)
        provider.add_span_processor(processor)
        tracer = provider.get_tracer("app")
        for index in range(12):  # a burst: the queue holds one, the rest are dropped
            with tracer.start_as_current_span("invoke_agent support-bot", attributes=(
                    genai_attributes(prompt=f"burst {index}", agent="support-bot"))):
                pass
        processor.force_flush(30_000)
        for index in range(4):  # one at a time: the budget runs out
            with tracer.start_as_current_span("invoke_agent support-bot", attributes=(
                    genai_attributes(prompt=f"later {index}", agent="support-bot"))):
                pass
            processor.force_flush(30_000)
        stats = processor.stats()["rubric"]
        assert stats.get("dropped", 0) >= 6 and stats.get("budget_exhausted", 0) >= 1, stats
        provider.shutdown()
        query = store.addresses["query"]
        for alert, decision in (("OtelScorersEvaluationsDropped", "dropped"),
                                ("OtelScorersJudgeBudgetExhausted", "budget_exhausted")):
            search = opened(shipped_link(alert))
            assert search["service"] == "app" and json.loads(search["tags"]) == {
                "otel_scorers.scorer": "rubric", "otel_scorers.decision": decision}
            found: list[dict[str, Any]] = eventually(
                lambda s=search: get_json(f"{query}/api/traces", **s)["data"], timeout_s=30,
                what=f"the runs {decision} in Jaeger")
            for trace in found:
                spans = {span["spanID"]: span for span in trace["spans"]}
                names = sorted(span["operationName"] for span in spans.values())
                # the run and its marker; never an evaluation: it was not judged
                assert names == ["invoke_agent support-bot", "otel_scorers.unjudged rubric"], \
                    names
                (mark,) = [s for s in spans.values() if s["operationName"].startswith(
                    "otel_scorers.unjudged")]
                assert tags(mark)["otel_scorers.decision"] == decision
                assert spans[parent_of(mark) or ""]["operationName"] == \
                    "invoke_agent support-bot"
                run = spans[parent_of(mark) or ""]
                assert ("burst" if decision == "dropped" else "later") in \
                    tags(run)["gen_ai.input.messages"]
