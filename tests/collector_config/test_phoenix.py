"""A real tracing backend: Arize Phoenix (its own virtual environment, `.venv-phoenix`, made by
`make test`) started on 127.0.0.1 receives an application's spans over OTLP/HTTP; its REST API
returns the evaluated agent span and, linked to it as children, the evaluation spans with their
scores, labels and per-criterion attributes."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from otel_scorers import PromptAlignmentScorer, RubricScorer
from otel_scorers.judge.client import JudgeClient
from otel_scorers.pipeline import ScoringSpanProcessor
from otel_scorers.testing import ScriptedJudgeServer, judge_responder
from tests.servers import get, running_phoenix

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

@pytest.fixture(scope="module")
def phoenix() -> Iterator[str]:
    with running_phoenix() as base:
        yield base


def test_evaluations_show_up_in_phoenix(phoenix: str, judge_server: ScriptedJudgeServer,
                                        judge: JudgeClient) -> None:
    judge_server.responder = judge_responder(satisfied=lambda i, _t: i == 1,
                                             user=(0.9, 0.8, 1.0, 0.7))
    provider = TracerProvider(resource=Resource.create({"service.name": "support-app"}))
    processor = ScoringSpanProcessor(
        [RubricScorer(judge, "- greets the user\n- cites a source"), PromptAlignmentScorer(judge)],
        tracer_provider=provider, events=False)
    provider.add_span_processor(processor)
    provider.add_span_processor(BatchSpanProcessor(
        OTLPSpanExporter(endpoint=f"{phoenix}/v1/traces")))
    attributes = {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support-bot",
        "gen_ai.input.messages": json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": "Hi, reset my password?"}]}]),
        "gen_ai.output.messages": json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": "Hello! Settings."}]}]),
    }
    with provider.get_tracer("app").start_as_current_span("invoke_agent support-bot",
                                                          attributes=attributes) as agent:
        agent_id = f"{agent.get_span_context().span_id:016x}"
    assert processor.force_flush(30_000)
    provider.force_flush()
    provider.shutdown()

    deadline = time.monotonic() + 30
    spans: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        spans = get(f"{phoenix}/v1/projects/default/spans?limit=100")["data"]
        if len(spans) >= 3:
            break
        time.sleep(0.5)
    by_name = {span["name"]: span for span in spans}
    assert {"invoke_agent support-bot", "gen_ai.evaluation rubric",
            "gen_ai.evaluation prompt_alignment"} <= set(by_name), sorted(by_name)
    agent_span = by_name["invoke_agent support-bot"]
    assert agent_span["context"]["span_id"] == agent_id
    rubric = by_name["gen_ai.evaluation rubric"]
    alignment = by_name["gen_ai.evaluation prompt_alignment"]
    for evaluation in (rubric, alignment):  # linked to the evaluated span, in its trace
        assert evaluation["parent_id"] == agent_id
        assert evaluation["context"]["trace_id"] == agent_span["context"]["trace_id"]
    attrs = rubric["attributes"]
    assert attrs["gen_ai.evaluation.score.value"] == 0.0
    assert attrs["gen_ai.evaluation.score.label"] == "fail"
    assert attrs["otel_scorers.criterion.greets_the_user.satisfied"] is True
    assert attrs["otel_scorers.criterion.cites_a_source.satisfied"] is False
    assert attrs["otel_scorers.criteria.unmet"] == ["cites_a_source"]
    assert "cites a source" in attrs["gen_ai.evaluation.explanation"]
    aligned = alignment["attributes"]
    assert aligned["gen_ai.evaluation.name"] == "prompt_alignment"
    assert 0.0 < aligned["gen_ai.evaluation.score.value"] <= 1.0
    assert aligned["gen_ai.evaluation.score.label"]
