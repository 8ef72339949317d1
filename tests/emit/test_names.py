"""Names are defined once (names.py) and the documented tables (docs/telemetry.md, the
README's troubleshooting table) match what is really emitted."""

from __future__ import annotations

import re
from typing import Any

from otel_scorers import names
from otel_scorers.testing import ScriptedJudgeServer, judge_responder
from tests.support import Telemetry, doc, end_agent_span, section

TELEMETRY = doc("telemetry.md")
TROUBLESHOOTING = section(doc("README.md"), "## Why was nothing scored?", "\n## ")


def documented(name: str) -> bool:
    return f"`{name}`" in TELEMETRY


def test_every_metric_name_is_documented() -> None:
    for key, value in vars(names).items():
        if key.startswith("METRIC_"):
            assert documented(value), value


def test_every_decision_and_reason_is_documented() -> None:
    for decision in names.Decision.TERMINAL:
        assert f"`{decision}`" in TROUBLESHOOTING, decision
    for key, value in vars(names.Reason).items():
        if key.isupper():
            assert f"`{value}`" in TROUBLESHOOTING + TELEMETRY, value


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
    table = section(TELEMETRY, "## Attributes", "## Metrics")
    missing = sorted(k for k in keys if f"`{k}`" not in table)
    assert missing == [], missing


def test_metric_attribute_keys_are_documented() -> None:
    table = section(TELEMETRY, "## Metrics")
    for key, value in vars(names).items():
        if key.startswith("M_"):
            assert value in table, value
