"""The demo's table reads in an 80-column terminal: names and words are never cut."""

from __future__ import annotations

import io
import re

from rich.console import Console

from otel_scorers.demo import DEMO_TASKS, RUBRICS, DemoReport, _print


def _report() -> DemoReport:
    report = DemoReport(seconds=21.3, evaluation_spans=6, events=6,
                        destinations=["spans, events and metrics: OTLP JSON lines in x.jsonl"])
    criteria = {agent: [line[2:] for line in text.splitlines()] for agent, text in RUBRICS.items()}
    for task in DEMO_TASKS:
        unmet = criteria[task.agent] if task.quality == "bad" else []
        report.rows.append({
            "agent": task.agent, "task": task.prompt, "quality": task.quality,
            "rubric": {"score": 0.0 if unmet else 1.0, "label": "fail" if unmet else "pass",
                       "error": None, "unmet": unmet, "latency": 12.5},
            "prompt_alignment": {"score": 0.25, "label": "misaligned", "error": None,
                                 "unmet": [], "latency": 30.25},
            "waited": 18.25})
    report.stats = {"rubric": {"scored": 3, "selected": 3}}
    return report


def test_the_table_reads_in_80_columns() -> None:
    out = io.StringIO()
    _print(Console(file=out, width=80, force_terminal=False, color_system=None), _report())
    text = out.getvalue()
    table = text[:text.index("* judged after")]
    assert all(len(line) <= 80 for line in table.splitlines())
    words = set(re.findall(r"[\w'.?-]+", table))
    # every agent name, label and criterion word arrives whole (no cell wraps mid-word)
    for task in DEMO_TASKS:
        assert f"{task.agent}:" in table
    expected = {"misaligned", "pass", "fail", "18.2s"}
    for row in _report().rows:
        for criterion in row["rubric"]["unmet"]:
            expected |= set(re.findall(r"[\w'.?-]+", criterion))
    assert len(expected) > 8
    assert expected <= words, expected - words
