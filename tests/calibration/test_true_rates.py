"""True rates with their error (issue 36.2): ``calibrate`` reports each scorer's true positive
and true negative rate with Wilson intervals and the pass/fail confusion matrix, saves them
(``--save``), and the live pipeline exports them as gauges for the corrected pass rate, only for
a scorer judged by the model they were measured with. The correction against hand-computed
values, the undefined case included (the recording rules' own: collector-config's promtool
test)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from otel_scorers import RubricScorer
from otel_scorers.calibration import bundled_cases
from otel_scorers.calibration.metrics import Confusion, true_rates, wilson
from otel_scorers.calibration.rates import FORMAT, corrected_pass_rate, load_rates
from otel_scorers.cli import main
from otel_scorers.errors import ConfigError
from otel_scorers.judge.client import JudgeClient
from otel_scorers.testing import ScriptedJudgeServer, judge_responder
from tests.calibration.labelled_judge import labelled_responder
from tests.support import Telemetry

pytestmark = pytest.mark.timeout(300)

CASES = bundled_cases()
RUBRIC_CASES = [case for case in CASES if case.scorer == "rubric"]


def test_wilson_is_the_hand_computation() -> None:
    # 8 of 10, z = 1.96: centre (0.8 + 0.19208) / 1.38416 = 0.71677, half-width
    # 1.96 * sqrt(0.016 + 0.0096040) / 1.38416 = 0.22653 -> [0.4902, 0.9433]
    low, high = wilson(8, 10) or (0, 0)
    assert low == pytest.approx(0.4902, abs=1e-4) and high == pytest.approx(0.9433, abs=1e-4)
    assert wilson(0, 10) == (0.0, pytest.approx(0.2775, abs=1e-4))
    assert wilson(10, 10) == (pytest.approx(0.7225, abs=1e-4), 1.0)
    assert wilson(0, 0) is None


def test_true_rates_of_a_confusion_matrix() -> None:
    rates = true_rates(Confusion(tp=19, fn=1, fp=8, tn=12))
    assert rates["tpr"]["value"] == 0.95 and rates["tpr"]["n"] == 20
    assert rates["tnr"]["value"] == 0.6 and rates["tnr"]["n"] == 20
    assert rates["tpr"]["low"] < 0.95 < rates["tpr"]["high"]
    assert rates["informedness"] == 0.55 and rates["correctable"] is True
    agreeable = true_rates(Confusion(tp=20, fn=0, fp=20, tn=0))  # passes everything
    assert agreeable["tnr"]["value"] == 0.0 and agreeable["correctable"] is False
    unknown = true_rates(Confusion(tp=5, fn=0))  # no failing case: TNR unknown
    assert unknown["tnr"]["value"] is None and unknown["informedness"] is None


def test_the_corrected_pass_rate_is_the_hand_computation() -> None:
    # TPR 0.95, TNR 0.6, observed 0.8: (0.8 + 0.6 - 1) / (0.95 + 0.6 - 1) = 0.4 / 0.55
    assert corrected_pass_rate(0.8, 0.95, 0.6) == pytest.approx(0.4 / 0.55)
    # a judge that passes 40% of failures: an observed 0.7 is a true 0.5
    assert corrected_pass_rate(0.7, 1.0, 0.6) == pytest.approx(0.5)
    assert corrected_pass_rate(0.1, 0.95, 0.6) == 0.0  # below the judge's floor: clamped
    assert corrected_pass_rate(1.0, 0.9, 0.9) == 1.0  # above its ceiling: clamped
    assert corrected_pass_rate(0.8, 0.5, 0.5) is None  # a coin: undefined
    assert corrected_pass_rate(0.8, 0.3, 0.6) is None  # worse than a coin: undefined


def run(server: ScriptedJudgeServer, *args: str) -> Any:
    return CliRunner().invoke(main, [
        "calibrate", "--model", server.model, "--api-base", server.url, "--api-key", "k",
        "--timeout", "10", "--scorer", "rubric", *args])


def test_calibrate_reports_and_saves_the_true_rates(judge_server: ScriptedJudgeServer,
                                                   tmp_path: Path) -> None:
    """A judge that marks every criterion satisfied passes every failing case: TNR 0, the
    correction undefined; one that answers as labelled: TPR = TNR = 1. Both in the table, the
    JSON and the saved file, equal to the confusion matrix."""
    judge_server.responder = labelled_responder(
        CASES, flip=lambda case, i: not (case.expected.verdicts or [])[i])
    saved = tmp_path / "rates.json"
    result = run(judge_server, "--json", "-", "--save", str(saved))
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    rubric = report["scorers"]["rubric"]
    confusion = rubric["pass_confusion"]
    assert confusion["fn"] == 0 and confusion["tn"] == 0 and confusion["fp"] > 0
    assert rubric["true_rates"]["tnr"]["value"] == 0.0
    assert rubric["true_rates"]["tpr"]["value"] == 1.0
    assert rubric["true_rates"]["correctable"] is False
    document = json.loads(saved.read_text())
    assert document["format"] == FORMAT and document["model"] == judge_server.model
    entry = document["scorers"]["rubric"]
    assert entry["tnr"] == 0.0 and entry["failing_cases"] == confusion["fp"]
    assert entry["passing_cases"] == confusion["tp"] and entry["correctable"] is False
    assert "saved to" in result.stderr

    judge_server.responder = labelled_responder(CASES)
    result = run(judge_server)  # the terminal table
    assert result.exit_code == 0, result.output
    assert "true rates of the pass/fail verdict" in result.output
    assert "defined" in result.output and "undefined" not in result.output


def test_a_known_error_rate_gives_rates_within_their_intervals(
        judge_server: ScriptedJudgeServer) -> None:
    """A judge that wrongly passes some failing runs: the TNR is the hand count from the
    confusion matrix, inside its own Wilson interval."""
    failing = [case.id for case in RUBRIC_CASES if case.expected.label != "pass"]
    lenient = set(failing[::2])  # every other failing case judged all satisfied

    def flip(case: Any, i: int) -> bool:
        return case.id in lenient and not (case.expected.verdicts or [])[i]

    judge_server.responder = labelled_responder(CASES, flip=flip)
    result = run(judge_server, "--json", "-")
    rubric = json.loads(result.stdout)["scorers"]["rubric"]
    tnr = rubric["true_rates"]["tnr"]
    assert tnr["n"] == len(failing)
    assert tnr["value"] == round((len(failing) - len(lenient)) / len(failing), 4)
    assert tnr["low"] <= tnr["value"] <= tnr["high"]
    assert rubric["true_rates"]["tpr"]["value"] == 1.0


def write_rates(path: Path, model: str, **scorers: tuple[float, float]) -> Path:
    path.write_text(json.dumps({"format": FORMAT, "model": model, "scorers": {
        name: {"tpr": tpr, "tnr": tnr, "passing_cases": 30, "failing_cases": 20}
        for name, (tpr, tnr) in scorers.items()}}))
    return path


def test_the_pipeline_exports_the_rates_of_its_own_judge(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, telemetry: Telemetry,
        judge: JudgeClient, judge_server: ScriptedJudgeServer, make_processor: Any,
        caplog: pytest.LogCaptureFixture) -> None:
    judge_server.responder = judge_responder()
    rates = write_rates(tmp_path / "rates.json", judge.model, rubric=(0.95, 0.6),
                        other=(0.9, 0.9))
    monkeypatch.setenv("OTEL_SCORERS_JUDGE_RATES", str(rates))
    other_judge = JudgeClient("openai/another-model", api_base=judge_server.url, api_key="k")
    with caplog.at_level("WARNING", logger="otel_scorers"):
        make_processor([RubricScorer(judge, "- is polite"),
                        RubricScorer(other_judge, "- is brief", name="other")])
    tpr = telemetry.metrics()["otel_scorers.judge.true_positive_rate"]
    tnr = telemetry.metrics()["otel_scorers.judge.true_negative_rate"]
    assert tpr == [({"scorer": "rubric", "judge_model": judge.model, "source": "calibrate"},
                    0.95)]
    assert [value for _, value in tnr] == [0.6]
    said = [r.getMessage() for r in caplog.records if "judge rates" in r.getMessage()]
    assert len(said) == 1 and "'openai/another-model'" in said[0] and "not exported" in said[0]


@pytest.mark.parametrize("content", ["{not json", '{"format": "something else"}',
                                     json.dumps({"format": FORMAT, "model": "m", "scorers": {
                                         "rubric": {"tpr": 1.5, "tnr": 0.5}}})])
def test_a_bad_rates_file_is_said_once_and_scoring_goes_on(
        content: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, telemetry: Telemetry,
        judge_server: ScriptedJudgeServer, make_processor: Any,
        caplog: pytest.LogCaptureFixture) -> None:
    judge_server.responder = judge_responder()
    bad = tmp_path / "rates.json"
    bad.write_text(content)
    with pytest.raises(ConfigError):
        load_rates(bad)
    monkeypatch.setenv("OTEL_SCORERS_JUDGE_RATES", str(bad))
    with caplog.at_level("WARNING", logger="otel_scorers"):
        processor = make_processor()
    assert not processor.disabled_because
    assert "otel_scorers.judge.true_positive_rate" not in telemetry.metrics()
    said = [r.getMessage() for r in caplog.records if "judge_rates" in r.getMessage()]
    assert len(said) == 1 and "no judge rates are exported" in said[0], said


def test_calibrate_save_refuses_fused(judge_server: ScriptedJudgeServer, tmp_path: Path) -> None:
    result = run(judge_server, "--fused", "--save", str(tmp_path / "r.json"))
    assert result.exit_code == 2 and "--save" in result.output
