"""The batch lane on real frameworks' own telemetry (issue 38.1): recorded runs of real agent
frameworks with their real instrumentations (``recorded/``, see test_matrix.py) played into a
processor whose rubric scorer judges through the batch lane. Each interaction's request goes
out in the batch with the user's real question and the agent's real final answer, and its
result comes back on the same span live scoring reports on."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from otel_scorers import RubricScorer
from otel_scorers.judge.client import JudgeClient
from otel_scorers.pipeline import ScorerSpec
from otel_scorers.testing import ScriptedJudgeServer, judge_responder
from otel_scorers.testing.replay import replay
from tests.support import Telemetry

HERE = Path(__file__).parent
RECORDED = HERE / "recorded"
RUBRIC = "- answers the weather question in one sentence"


@pytest.mark.parametrize("case", ["agents_sdk-otel_v2-handoff", "langgraph-openinference-react",
                                  "adk-native-content"])
def test_batch_results_of_a_real_framework_land_on_their_spans(
        case: str, judge_server: ScriptedJudgeServer, telemetry: Telemetry,
        make_processor: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    recorded = json.loads((RECORDED / f"{case}.json").read_text())["expected"]
    monkeypatch.setenv("OTEL_SCORERS_BATCH_DIR", str(tmp_path / "spool"))
    monkeypatch.setenv("OTEL_SCORERS_BATCH_INTERVAL_S", "0.3")
    judge_server.responder = judge_responder()
    judge = JudgeClient("openai/gpt-4o-mini", api_base=judge_server.url, api_key="k",
                        structured_output="json_object")
    processor = make_processor([ScorerSpec(RubricScorer(judge, RUBRIC), lane="batch")],
                               install=False)
    processor.log_processor()  # the log side, as install() wires it
    telemetry.tracer_provider.add_span_processor(SimpleSpanProcessor(telemetry.spans_out))
    spans, _ = replay(processor, RECORDED / f"{case}.jsonl.gz")
    assert spans > 0 and processor.force_flush(30_000)
    n = recorded["interactions"]
    deadline = time.monotonic() + 60
    while len(telemetry.evaluation_spans()) < n:
        assert time.monotonic() < deadline, processor.health()
        time.sleep(0.1)
    assert processor.stats()["rubric"] == {"selected": n, "scored": n}
    asked = [r for r in judge_server.requests if "batch" in r.headers]
    assert len(asked) == n == len(judge_server.requests)  # nothing asked live
    assert sorted(r.fields["user request"] for r in asked) == sorted(recorded["questions"])
    assert sorted(r.fields["agent response"].strip() for r in asked) == \
        sorted(recorded["answers"])
    row = next(line for line in (HERE.parents[1] / "docs" / "frameworks.md").read_text()
               .splitlines() if line.startswith(f"| `{case}` |"))
    for evaluation in telemetry.evaluation_spans():
        attributes = evaluation.attributes or {}
        assert f"`{attributes['otel_scorers.evaluated.span_name']}`" in row, row
        assert attributes["otel_scorers.judge.service_tier"] == "batch"
