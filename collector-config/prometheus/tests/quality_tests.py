"""The promtool unit tests of the quality alerts, generated: ``quality.rules.test.yml`` is this
script's output (tests/collector_config/test_configs.py regenerates it and compares).

    .venv/bin/python collector-config/prometheus/tests/quality_tests.py > /tmp/q.yml \
        && mv /tmp/q.yml collector-config/prometheus/tests/quality.rules.test.yml

One story for every quality signal, at one sample every 5 minutes (the rules' own 1-minute
groups are evaluated every 5 minutes here: promtool evaluates every group at the file's
``evaluation_interval``): two days of history (quiet from 24 h to 40 h, see ``QUIET_FROM``),
then six hours of a drop, then six hours back to normal. Agent ``checkout`` drops (its rubric and checks with a deploy of version 1.5.0,
rolled back to 1.4.0 at the recovery); every signal also has series that must never page:
``steady`` (no change), ``busy`` (10,000 evaluations an hour, 2 points down: beyond noise,
under the 3-point minimum), ``quiet`` (10 an hour, one hour of 6 passes in 10: noise at that
volume) and ``chronic`` (alignment low all along: AlignmentLow, never a drop).

Checked at four times: 47h55m (history: nothing fires), 49h30m (90 minutes into the drop: the
drops page), 53h55m (near the drop's end: still open, the reference held) and 59h55m (six hours
after the recovery: resolved). The expected texts are in ``PAGES`` (read once from promtool's
answer, checked by hand against the series below, and kept in ``quality_pages.json``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

STEP_MIN = 5
HISTORY, DROP, RECOVERY = 576, 72, 72  # steps: 48 h, 6 h, 6 h
TIMES = {"history": "47h55m", "drop": "49h30m", "late": "53h55m", "recovered": "59h55m"}
BUCKETS = ("0.1", "0.2", "0.3", "0.4", "0.5", "0.6", "0.7", "0.8", "0.9", "0.95", "1", "+Inf")
APP = {"job": "app", "judge_model": "m1"}


#: The history's quiet hours (no evaluations at all): 24 h to 40 h. The reference (the week
#: that ended a day ago) then holds the first day only at every time checked, so it is the
#: same whichever group promtool evaluates first (it evaluates the groups of a step in no
#: fixed order: a page reading another group's series may see it a step late).
QUIET_FROM, QUIET_STEPS = 288, 192


def counter(phases: Sequence[tuple[int, float]]) -> str:
    """A counter's values, from (steps, increase a step) phases: promtool's ``a+bxn``; the
    first phase (the history) is quiet from ``QUIET_FROM`` for ``QUIET_STEPS``."""
    (steps, inc), rest = phases[0], list(phases[1:])
    phases = [(QUIET_FROM, inc), (QUIET_STEPS, 0.0), (steps - QUIET_FROM - QUIET_STEPS, inc),
              *rest]
    # each value as promtool makes it (adding the step to the one before, in floats), so a
    # phase never starts a hair under where the last one ended (a counter reset to promtool)
    parts, value = [], 0.0
    for i, (steps, inc) in enumerate(phases):
        start = 0.0 if i == 0 else value + inc
        count = steps if i == 0 else steps - 1
        parts.append(f"{start!r}+{inc!r}x{count}")
        value = start
        for _ in range(count):
            value += inc
    return " ".join(parts)


def story(before: float, during: float, after: float | None = None) -> list[tuple[int, float]]:
    return [(HISTORY, before), (DROP, during), (RECOVERY, before if after is None else after)]


def series(name: str, labels: dict[str, str], values: str) -> dict[str, str]:
    inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{name}{{{inner}}}", "values": values}


def binomial(name: str, labels: dict[str, str], good: tuple[str, str], bad: tuple[str, str],
             total: list[float], share: list[float]) -> list[dict[str, str]]:
    """A pass/fail counter pair: ``total`` a step and the good ``share`` in each phase."""
    key, yes = good
    _, no = bad
    steps = (HISTORY, DROP, RECOVERY)
    return [series(name, {**labels, key: yes},
                   counter([(n, t * p) for n, t, p in zip(steps, total, share)])),
            series(name, {**labels, key: no},
                   counter([(n, t * (1 - p)) for n, t, p in zip(steps, total, share)]))]


def versioned(labels: dict[str, str], per_step: float, before: float,
              during: float) -> list[dict[str, str]]:
    """A pass/fail pair by version: 1.4.0 before and after, 1.5.0 during the drop."""
    out = []
    for version, totals in (("1.4.0", [per_step, 0.0, per_step]),
                            ("1.5.0", [0.0, per_step, 0.0])):
        out += binomial("otel_scorers_evaluations_total", {**labels, "version": version},
                        ("passed", "true"), ("passed", "false"), totals,
                        [before, during, before])
    return out


def scores(name: str, labels: dict[str, str], phases: Sequence[Sequence[float]]
           ) -> list[dict[str, str]]:
    """A score histogram, from each phase's scores of one step (the same every step)."""
    steps = (HISTORY, DROP, RECOVERY)
    out = [series(f"{name}_count", labels, counter([(n, len(p)) for n, p in zip(steps, phases)])),
           series(f"{name}_sum", labels, counter([(n, sum(p)) for n, p in zip(steps, phases)]))]
    for le in BUCKETS:
        bound = float("inf") if le == "+Inf" else float(le)
        out.append(series(f"{name}_bucket", {**labels, "le": le}, counter(
            [(n, sum(1 for v in p if v <= bound)) for n, p in zip(steps, phases)])))
    return out


GOOD = [0.75] * 5 + [0.95] * 5   # mean 0.85
BAD = [0.45] * 5 + [0.85] * 5    # mean 0.65
LOW = [0.45] * 5 + [0.75] * 5    # mean 0.60


def inputs() -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    rubric = {**APP, "scorer": "rubric"}
    out += versioned({**rubric, "agent": "checkout"}, 10, 0.85, 0.65)
    for agent, total, share in (("steady", 10, [0.85] * 3), ("busy", 833.3, [0.85, 0.83, 0.85])):
        out += binomial("otel_scorers_evaluations_total",
                        {**rubric, "agent": agent, "version": "1.4.0"},
                        ("passed", "true"), ("passed", "false"), [total] * 3, share)
    # quiet: 10 an hour; in the hour before the drop's end, 6 of 10 pass
    quiet = {**rubric, "agent": "quiet", "version": "1.4.0"}
    dip = [(HISTORY + DROP - 12, 10 / 12 * 0.85), (12, 10 / 12 * 0.6), (RECOVERY, 10 / 12 * 0.85)]
    out.append(series("otel_scorers_evaluations_total", {**quiet, "passed": "true"}, counter(dip)))
    out.append(series("otel_scorers_evaluations_total", {**quiet, "passed": "false"},
                      counter([(n, 10 / 12 - inc) for n, inc in dip])))
    checks = {**APP, "scorer": "checks"}
    out += versioned({**checks, "agent": "checkout"}, 10, 0.95, 0.75)
    out += binomial("otel_scorers_evaluations_total", {**checks, "agent": "steady",
                                                        "version": "1.4.0"},
                    ("passed", "true"), ("passed", "false"), [10] * 3, [0.95] * 3)
    for scorer, name in (("prompt_alignment", "otel_scorers_evaluation_score"),
                         ("faithfulness", "otel_scorers_evaluation_score"),
                         ("session", "otel_scorers_session_score")):
        labels = {**APP, "scorer": scorer, "version": "1.4.0"}
        out += scores(name, {**labels, "agent": "checkout"}, (GOOD, BAD, GOOD))
        out += scores(name, {**labels, "agent": "steady"}, (GOOD, GOOD, GOOD))
        if scorer == "prompt_alignment":
            out += scores(name, {**labels, "agent": "chronic"}, (LOW, LOW, LOW))
    verdicts = "otel_scorers_criterion_verdicts_total"
    for agent, scorer, criterion, share in (
            ("checkout", "session", "goal_completion", [0.85, 0.65, 0.85]),
            ("steady", "session", "goal_completion", [0.85] * 3),
            ("checkout", "rubric", "cites_sources", [0.95, 0.75, 0.95]),
            ("checkout", "rubric", "polite", [0.95, 0.93, 0.95])):
        out += binomial(verdicts, {**APP, "scorer": scorer, "agent": agent,
                                   "criterion": criterion, "version": "1.4.0"},
                        ("satisfied", "true"), ("satisfied", "false"), [10] * 3, share)
    for tool, share in (("search", [0.98, 0.7, 0.98]), ("lookup", [0.98] * 3)):
        out += binomial("otel_scorers_agent_tool_calls_total",
                        {"job": "app", "agent": "checkout", "tool": tool, "version": "1.4.0"},
                        ("outcome", "ok"), ("outcome", "error"), [10] * 3, share)
    canary = "otel_scorers_canary_verdicts_total"
    for model, fail_share in (("m3", [1.0, 0.0, 1.0]), ("m1", [1.0] * 3)):
        labels = {"job": "app", "scorer": "rubric", "judge_model": model}
        out.append(series(canary, {**labels, "expected": "pass", "judged": "pass"},
                          counter(story(8, 8))))
        out += binomial(canary, {**labels, "expected": "fail"}, ("judged", "fail"),
                        ("judged", "pass"), [8] * 3, fail_share)
    return out


#: alert -> the labels of the series that pages, with what the page must say.
PAGES: dict[str, dict[str, Any]] = {
    "OtelScorersRubricPassRateDrop": {"labels": {"severity": "page", "job": "app",
                                                 "scorer": "rubric", "judge_model": "m1",
                                                 "agent": "checkout"}},
    "OtelScorersPassRateDrop": {"labels": {"severity": "warning", "job": "app",
                                           "scorer": "checks", "judge_model": "m1",
                                           "agent": "checkout"}},
    "OtelScorersAlignmentDrop": {"labels": {"severity": "page", "job": "app",
                                            "scorer": "prompt_alignment", "judge_model": "m1",
                                            "agent": "checkout"}},
    "OtelScorersFaithfulnessDrop": {"labels": {"severity": "page", "job": "app",
                                               "scorer": "faithfulness", "judge_model": "m1",
                                               "agent": "checkout"}},
    "OtelScorersSessionScoreDrop": {"labels": {"severity": "warning", "job": "app",
                                               "scorer": "session", "judge_model": "m1",
                                               "agent": "checkout"}},
    "OtelScorersSessionGoalCompletionDrop": {"labels": {"severity": "page", "job": "app",
                                                        "scorer": "session",
                                                        "judge_model": "m1",
                                                        "agent": "checkout"}},
    "OtelScorersCriterionFailureSpike": {"labels": {"severity": "warning", "job": "app",
                                                    "scorer": "rubric", "judge_model": "m1",
                                                    "agent": "checkout",
                                                    "criterion": "cites_sources"}},
    "OtelScorersToolErrorSpike": {"labels": {"severity": "warning", "job": "app",
                                             "agent": "checkout", "tool": "search"}},
    "OtelScorersJudgeDrift": {"labels": {"severity": "warning", "job": "app",
                                         "scorer": "rubric", "judge_model": "m3"}},
}
#: AlignmentLow pages the chronic agent all along (not a drop: AlignmentDrop never does).
CHRONIC = {"severity": "warning", "job": "app", "scorer": "prompt_alignment", "judge_model": "m1",
       "agent": "chronic"}


def tests(annotations: dict[str, dict[str, dict[str, str]]]) -> dict[str, Any]:
    checks = []
    for alert, page in PAGES.items():
        for when, time in TIMES.items():
            firing = when in ("drop", "late")
            expected = []
            if firing:
                found = annotations.get(alert, {}).get(when, {})
                expected.append({"exp_labels": page["labels"], "exp_annotations": found})
            checks.append({"alertname": alert, "eval_time": time, "exp_alerts": expected})
    low = annotations.get("OtelScorersAlignmentLow", {})
    for when, time in TIMES.items():
        expected = [{"exp_labels": CHRONIC, "exp_annotations": low.get(when, {})}]
        if when == "late":  # checkout's alignment is under 0.7 too, late in its drop
            expected.append({"exp_labels": {**CHRONIC, "agent": "checkout"},
                             "exp_annotations": low.get("late checkout", {})})
        checks.append({"alertname": "OtelScorersAlignmentLow", "eval_time": time,
                       "exp_alerts": expected})
    return {"rule_files": ["../otel-scorers.rules.yml"], "evaluation_interval": f"{STEP_MIN}m",
            "tests": [{"interval": f"{STEP_MIN}m", "input_series": inputs(),
                       "promql_expr_test": [{"expr": RESETS, "eval_time": "60h",
                                             "exp_samples": [{"labels": "{}", "value": 0}]}],
                       "alert_rule_test": checks}]}


#: No input counter ever goes down (the stories are counters, never a reset).
RESETS = "sum(" + " or ".join(f"resets({name}[60h])" for name in (
    "otel_scorers_evaluations_total", "otel_scorers_evaluation_score_bucket",
    "otel_scorers_evaluation_score_sum", "otel_scorers_session_score_bucket",
    "otel_scorers_session_score_sum", "otel_scorers_criterion_verdicts_total",
    "otel_scorers_agent_tool_calls_total", "otel_scorers_canary_verdicts_total")) + ")"


#: The pages' texts: alert -> "drop" / "late" (AlignmentLow: every time, and "late checkout")
#: -> annotations.
ANNOTATIONS: dict[str, dict[str, dict[str, str]]] = json.loads(
    (Path(__file__).parent / "quality_pages.json").read_text())


class _Dumper(yaml.SafeDumper):
    pass


def main() -> None:
    header = ("# GENERATED by collector-config/prometheus/tests/quality_tests.py (the stories and"
              " the\n# expected pages are there). Run from collector-config/prometheus:\n"
              "#   promtool test rules tests/quality.rules.test.yml\n")
    sys.stdout.write(header + yaml.dump(tests(ANNOTATIONS), Dumper=_Dumper, sort_keys=False,
                                        width=1000, allow_unicode=True))


if __name__ == "__main__":
    main()
