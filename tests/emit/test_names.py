"""Names are defined once (emit/names.py) and the README tables match what is really emitted."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from otel_scorers.emit import names
from otel_scorers.testing import ScriptedJudgeServer, judge_responder
from tests.support import Telemetry, end_agent_span

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def documented(name: str) -> bool:
    return f"`{name}`" in README


def test_every_metric_name_is_documented() -> None:
    for key, value in vars(names).items():
        if key.startswith("METRIC_"):
            assert documented(value), value


def test_every_decision_and_reason_is_documented() -> None:
    for decision in names.Decision.TERMINAL:
        assert decision in README, decision
    for key, value in vars(names.Reason).items():
        if key.isupper():
            assert f"`{value}`" in README, value


def _pattern(key: str) -> str:
    """An emitted attribute key as the README writes it (placeholders for ids and sides)."""
    key = re.sub(r"^otel_scorers\.criterion\.[^.]+\.", "otel_scorers.criterion.<id>.", key)
    key = re.sub(r"^otel_scorers\.dimension\.(user|system)\.", "otel_scorers.dimension.<side>.",
                 key)
    return re.sub(r"^otel_scorers\.dimension\.<side>\.(intent|requirements|completeness|"
                  r"appropriateness)\.(score|reasoning)$",
                  r"otel_scorers.dimension.<side>.<dimension>.\2", key)


def test_emitted_attributes_are_all_in_the_readme_table(
        telemetry: Telemetry, make_processor: Any, judge_server: ScriptedJudgeServer) -> None:
    judge_server.responder = judge_responder(satisfied=False, user=(0.5, 0.5, 0.5, 0.5))
    processor = make_processor()
    end_agent_span(telemetry)
    processor.force_flush(10_000)
    keys = {_pattern(k) for span in telemetry.evaluation_spans() for k in span.attributes}
    table = README.split("### Attributes", 1)[1].split("### Metrics", 1)[0]
    missing = sorted(k for k in keys if f"`{k}`" not in table)
    assert missing == [], missing


def test_metric_attribute_keys_are_documented() -> None:
    table = README.split("### Metrics", 1)[1].split("### Configuration", 1)[0]
    for key, value in vars(names).items():
        if key.startswith("M_"):
            assert value in table, value
