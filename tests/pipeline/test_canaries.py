"""Judge canaries (issue 36.1), on a live processor and a real judge transport: labelled cases
replayed through the scorer's own judge on a schedule; a judge that changes behaviour mid-run
(it starts passing the failing cases) shows in the canary verdicts and the live true negative
rate; canaries never reach the application's spans, events, score metrics or decisions; they
stay inside the scorer's budget. (The drift alert: collector-config's promtool test.)"""

from __future__ import annotations

import time
from typing import Any

import pytest

from otel_scorers import ChecksScorer, RubricScorer
from otel_scorers.calibration import bundled_cases
from otel_scorers.judge.client import JudgeClient
from otel_scorers.pipeline import Sampling, ScorerSpec
from otel_scorers.testing import ScriptedJudgeServer
from tests.calibration.labelled_judge import labelled_responder
from tests.support import Telemetry

pytestmark = pytest.mark.timeout(300)

CASES = bundled_cases()


def wait_for(check: Any, what: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def verdicts(telemetry: Telemetry, **labels: str) -> float:
    return telemetry.metric_value("otel_scorers.canary.verdicts", **labels) or 0


def test_canaries_watch_the_judge_and_see_it_change(
        monkeypatch: pytest.MonkeyPatch, telemetry: Telemetry, judge: JudgeClient,
        judge_server: ScriptedJudgeServer, make_processor: Any) -> None:
    monkeypatch.setenv("OTEL_SCORERS_CANARY_INTERVAL_S", "0.1")
    monkeypatch.setenv("OTEL_SCORERS_CANARY_CASES", "4")
    judge_server.responder = labelled_responder(CASES)  # answers as labelled
    processor = make_processor([RubricScorer(judge), ChecksScorer(["includes hello"])])
    canaries = processor.canaries
    assert canaries is not None

    def judged() -> int:
        state = canaries.states.get("rubric")
        return len(state.window) if state is not None else 0

    wait_for(lambda: judged() >= 12, "three canary rounds")
    report = processor.health()["canaries"]
    assert set(report) == {"rubric"}  # checks is decided in code: nothing to watch
    assert report["rubric"]["true_positive_rate"] == 1.0
    assert report["rubric"]["true_negative_rate"] == 1.0
    model = judge.model
    assert verdicts(telemetry, scorer="rubric", judge_model=model, expected="fail",
                    judged="fail") >= 6  # stratified: failing and passing cases alternate
    assert verdicts(telemetry, scorer="rubric", expected="pass", judged="pass") >= 6
    assert verdicts(telemetry, scorer="rubric", expected="fail", judged="pass") == 0
    rates = {(attrs["source"], attrs["scorer"]): value for attrs, value in
             telemetry.metrics()["otel_scorers.judge.true_negative_rate"]}
    assert rates == {("canary", "rubric"): 1.0}

    # the judge changes behind the same name: every criterion satisfied, failures pass
    judge_server.responder = labelled_responder(
        CASES, flip=lambda case, i: not (case.expected.verdicts or [])[i])
    before = verdicts(telemetry, scorer="rubric", expected="fail", judged="pass")
    wait_for(lambda: verdicts(telemetry, scorer="rubric", expected="fail",
                              judged="pass") >= before + 6, "the changed judge's verdicts")
    report = processor.health()["canaries"]["rubric"]
    assert report["true_negative_rate"] < 1.0 and report["true_positive_rate"] == 1.0
    # never the application's: no evaluation span, no score, no decision; each verdict is a
    # canary span of a trace of its own, with its case, label, verdict and the judge's reasons
    assert telemetry.evaluation_spans() == []
    canary = [span for span in telemetry.spans() if span.name == "otel_scorers.canary rubric"]
    assert len(canary) >= 24 and all(span.parent is None for span in canary)
    disagreeing = [dict(span.attributes or {}) for span in canary
                   if (span.attributes or {})["otel_scorers.canary.agrees"] is False]
    assert disagreeing and all(a["otel_scorers.canary.expected"] == "fail" and
                               a["otel_scorers.canary.judged"] == "pass" and
                               a["otel_scorers.canary.case"] in {c.id for c in CASES} and
                               a["otel_scorers.scorer"] == "rubric" for a in disagreeing)
    assert len(disagreeing) >= 6  # the changed judge's verdicts above
    assert all("gen_ai.evaluation.name" not in (span.attributes or {}) for span in canary)
    assert telemetry.metric_value("otel_scorers.evaluations") is None
    assert processor.stats()["rubric"] == {}


def test_canaries_spend_only_their_share_of_the_budget(
        monkeypatch: pytest.MonkeyPatch, judge: JudgeClient,
        judge_server: ScriptedJudgeServer, make_processor: Any) -> None:
    monkeypatch.setenv("OTEL_SCORERS_CANARY_INTERVAL_S", "0.1")
    monkeypatch.setenv("OTEL_SCORERS_CANARY_BUDGET_SHARE", "0.1")
    judge_server.responder = labelled_responder(CASES)
    # 100 tokens an hour per call of the scripted judge: a share of 0.1 of 2,000 is two calls
    processor = make_processor([ScorerSpec(RubricScorer(judge),
                                           Sampling(budget_tokens_per_hour=2_000))])
    canaries = processor.canaries
    assert canaries is not None
    wait_for(lambda: processor.health().get("canaries", {}).get("rubric", {})
             .get("budget_exhausted", 0) >= 4, "canaries held to their share")
    judged = processor.health()["canaries"]["rubric"].get("judged", 0)
    assert 1 <= judged <= 3, processor.health()["canaries"]
    assert len(judge_server.requests) == judged


def test_canaries_are_off_when_asked_and_without_a_judge(
        monkeypatch: pytest.MonkeyPatch, judge: JudgeClient, make_processor: Any) -> None:
    monkeypatch.setenv("OTEL_SCORERS_CANARY", "false")
    assert make_processor([RubricScorer(judge)]).health().get("canaries") is None
    monkeypatch.delenv("OTEL_SCORERS_CANARY")
    processor = make_processor([ChecksScorer(["includes hello"])])
    assert processor.canaries is not None and processor.canaries._task is None


async def test_the_gateway_runs_the_canaries(judge_server: ScriptedJudgeServer,
                                             tmp_path: Any) -> None:
    """``serve`` builds the same processor: its canaries run, and /health shows them."""
    import asyncio

    from tests.gateway.test_gateway import _config, gateway, health
    from tests.support import Upstream

    judge_server.responder = labelled_responder(CASES)
    config = _config(tmp_path, judge_server, canary={"interval_s": 0.2, "cases_per_round": 2})
    async with Upstream() as upstream:
        with gateway(config, upstream.url) as url:
            deadline = time.monotonic() + 120
            while (health(url)["health"].get("canaries", {}).get("rubric", {})
                   .get("judged", 0) < 2):
                assert time.monotonic() < deadline, health(url)
                await asyncio.sleep(0.2)
            watched = health(url)["health"]["canaries"]
    assert watched["rubric"]["true_positive_rate"] in (None, 1.0)
    assert "prompt_alignment" in watched  # its score-banded cases watch it too


def test_canaries_from_a_backend_that_is_not_configured_say_so_once(
        monkeypatch: pytest.MonkeyPatch, judge: JudgeClient, make_processor: Any,
        caplog: pytest.LogCaptureFixture) -> None:
    """``canary.cases: phoenix`` without a Phoenix: one line with its fix, scoring as ever."""
    monkeypatch.setenv("OTEL_SCORERS_CANARY_FILE", "phoenix")
    monkeypatch.setenv("OTEL_SCORERS_CANARY_INTERVAL_S", "0.1")
    monkeypatch.delenv("OTEL_SCORERS_PHOENIX_ENDPOINT", raising=False)
    processor = make_processor([RubricScorer(judge)])
    wait_for(lambda: "could not be read" in caplog.text, "the line about the cases")
    time.sleep(0.5)  # more rounds: still said once
    lines = [r.getMessage() for r in caplog.records if "canary cases" in r.getMessage()]
    assert len(lines) == 1 and "OTEL_SCORERS_PHOENIX_ENDPOINT" in lines[0], lines
    assert processor.canaries is not None and processor.canaries.states == {}


def canary_file(tmp_path: Any, *, passing: int, failing: int) -> str:
    """A labelled file of the bundled rubric cases: ``passing`` and ``failing`` of each."""
    import json
    from pathlib import Path

    import otel_scorers.calibration

    golden = Path(otel_scorers.calibration.__file__).parent / "golden-v1.jsonl"
    rows = [json.loads(line) for line in golden.read_text().splitlines()]
    rubric = [row for row in rows if row["scorer"] == "rubric"]
    chosen = [r for r in rubric if r["expected"].get("label") == "pass"][:passing] + \
        [r for r in rubric if r["expected"].get("label") == "fail"][:failing]
    path = Path(tmp_path) / "canaries.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in chosen))
    return str(path)


@pytest.mark.parametrize(("passing", "failing", "said"), [
    (6, 0, "has 6 passing case(s) and no failing one: its true-negative rate cannot be "
           "measured, and a judge broken into always passing would agree 100%"),
    (0, 6, "has 6 failing case(s) and no passing one: its true-positive rate"),
    (2, 3, "is small (2 passing, 3 failing case(s))"),
])
def test_a_one_sided_or_small_canary_set_is_said_with_its_numbers(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Any, telemetry: Telemetry,
        judge: JudgeClient, judge_server: ScriptedJudgeServer, make_processor: Any,
        caplog: pytest.LogCaptureFixture, passing: int, failing: int, said: str) -> None:
    """A set of passing labels only lets a judge broken into "always pass" keep 100%
    agreement with no true-negative rate: said at the first round, with the numbers; the
    health report carries them."""
    monkeypatch.setenv("OTEL_SCORERS_CANARY_FILE",
                       canary_file(tmp_path, passing=passing, failing=failing))
    monkeypatch.setenv("OTEL_SCORERS_CANARY_INTERVAL_S", "0.1")
    judge_server.responder = labelled_responder(CASES)
    with caplog.at_level("WARNING", logger="otel_scorers"):
        processor = make_processor([RubricScorer(judge)])
        wait_for(lambda: "rubric" in processor.health().get("canaries", {}),
                 "the canaries loaded")
    lines = [r.getMessage() for r in caplog.records if "canary set" in r.getMessage()]
    assert len(lines) == 1 and said in lines[0], lines
    report = processor.health()["canaries"]["rubric"]
    assert (report["cases_passing"], report["cases_failing"]) == (passing, failing)


def test_a_balanced_canary_set_is_not_warned_about(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Any, telemetry: Telemetry,
        judge: JudgeClient, judge_server: ScriptedJudgeServer, make_processor: Any,
        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("OTEL_SCORERS_CANARY_FILE", canary_file(tmp_path, passing=5, failing=5))
    monkeypatch.setenv("OTEL_SCORERS_CANARY_INTERVAL_S", "0.1")
    judge_server.responder = labelled_responder(CASES)
    with caplog.at_level("WARNING", logger="otel_scorers"):
        processor = make_processor([RubricScorer(judge)])
        wait_for(lambda: "rubric" in processor.health().get("canaries", {}),
                 "the canaries loaded")
    assert not [r for r in caplog.records if "canary set" in r.getMessage()]
