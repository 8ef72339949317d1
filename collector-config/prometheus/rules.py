"""The otel-scorers Prometheus rules, generated from code: ``otel-scorers.rules.yml`` is this
script's output (a test regenerates it and compares). Edit the tables below, not the YAML.

    .venv/bin/python collector-config/prometheus/rules.py > /tmp/rules.yml \
        && mv /tmp/rules.yml collector-config/prometheus/otel-scorers.rules.yml

How a quality drop is told from noise (docs/runbook.md, "How the drop alerts decide"): every
quality signal is a share of good outcomes (runs that pass, criteria satisfied, tool calls that
succeed, canaries that agree) or a mean score in 0..1 (alignment, faithfulness, sessions). For
each series (a job, scorer, judge model and agent, summed over the fleet's processes):

- **The reference** is the 7 days that ended a day ago (so it never contains the hours it is
  compared with), with at least ``MIN_REFERENCE`` evaluations. While the series' alert fires the
  reference is *held* at the value it had when the alert opened (for at most ``HOLD_MAX``), so
  a drop that lasts does not become its own reference: the page stays open while quality stays
  down and resolves when it is back.
- **The test** is a likelihood ratio: in each window W (15 min to a day), the deviance of the
  window's share against the reference, as standard errors (signed root of
  2·n_eff·KL(p_W ‖ p_ref), n_eff = n_W·n_ref/(n_W + n_ref), with a continuity correction of half
  an evaluation). Its noise is set by the counts, so one threshold in standard errors means the
  same false-page rate at 10 and at 10,000 evaluations an hour. For a mean score the same test
  runs on quasi-binomial counts: the reference's spread (its variance over m(1 - m), read from
  the histogram's buckets) divides the counts.
- **A page opens** when some window is ``THRESHOLDS[W]`` standard errors under the reference, by
  at least ``MIN_DROP`` (a drop too small to act on never pages, however many evaluations), and
  the latest runs (the shortest window with ``RECENT_COUNT`` evaluations), where they are a
  shorter window than W, are still nearer W's level than the reference's; it **stays open**
  while a window is ``STAY`` standard errors (and half the minimum drop) under the held
  reference and the latest runs are still low; ``keep_firing_for`` bridges a few quiet minutes.
- **The budget**: the thresholds are set for at most one false page a quarter per series from 10
  to 10,000 evaluations an hour (measured with Prometheus's own engine: bench/alerts.py).

Where the judge's true rates are known (``otel_scorers:judge_informedness`` above 0.2, from
``calibrate --save`` or the canaries), a pass rate pages as its corrected rate (Rogan-Gladen):
the test is the same (a linear map does not change a count's noise), the minimum drop is the
corrected one, and the page says which rate it shows.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

#: Detection windows and their thresholds, in standard errors.
THRESHOLDS: dict[str, float] = {"15m": 4.5, "30m": 4.4, "1h": 4.3, "3h": 4.3, "6h": 4.3,
                                "1d": 4.3}
#: Every window a signal's counts are kept over (the detection windows and the ones the
#: latest runs are read from), with its length in seconds.
WINDOWS: dict[str, int] = {"5m": 300, "15m": 900, "30m": 1800, "1h": 3600, "3h": 10800,
                           "6h": 21600, "12h": 43200, "1d": 86400}
#: The longer windows are sums of shorter ones recorded a minute apart (3 h: the 1 h windows
#: ending now, 1 h and 2 h ago), so no rule reads more than 5 minutes of raw samples.
COMPOSED: dict[str, tuple[str, int]] = {"15m": ("5m", 3), "30m": ("15m", 2), "1h": ("30m", 2),
                                        "3h": ("1h", 3), "6h": ("3h", 2), "12h": ("6h", 2),
                                        "1d": ("12h", 2)}
#: The latest runs: the shortest window holding this many evaluations (else the longest).
RECENT_COUNT = 200
#: A page stays open while a window is this many standard errors (and half the minimum drop)
#: under the held reference.
STAY = 2.5
#: The smallest drop that pages (a share or a mean score, 0..1): 3 points.
MIN_DROP = 0.03
#: The smallest dispersion a mean score's counts are divided by (scores all alike).
MIN_DISPERSION = 0.02
#: A mean score is tested in a window only with this many scores in it: the quasi-binomial
#: counts stand for a binomial's only past a few scores (one low score among two is no drop).
MIN_MEAN_COUNT = 5
#: The fewest evaluations in the reference week for a series to be tested at all.
MIN_REFERENCE = 20
#: The longest a reference is held while its alert fires: after a week the low level is the
#: new normal (the page resolves; docs/runbook.md says how to look back).
HOLD_MAX_S = 7 * 86400
#: The reference: the week that ended this long ago.
REFERENCE = "7d"
REFERENCE_OFFSET = "1d"
#: How far back a reference (recorded every hour) is read.
LAST = "2h"
#: A judge whose informedness (TPR + TNR - 1) is above this has its pass rate corrected.
INFORMED = 0.2
#: The score histogram's bucket bounds (otel_scorers.names.SCORE_BUCKETS).
SCORE_BUCKETS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0)

LINKS = '{{ with query "otel_scorers:alert_links" }}{{ with first . }}{{ .Labels.%s }}{{ end }}{{ end }}'
BUDGET = ("False-page budget: at most one a quarter for this series at 10 to 10,000 "
          "evaluations an hour (docs/runbook.md).")


@dataclass(frozen=True)
class Signal:
    """One quality signal: a share of good outcomes, or a mean score (``mean``).

    ``total`` / ``good``: the counter selectors (for a mean: the histogram's base name and
    matchers); ``keys``: what a series is; ``noun``: what the share counts, for the pages."""

    name: str
    keys: tuple[str, ...]
    total: str
    good: Sequence[str] = ()
    mean: bool = False
    corrected: bool = False  # a pass rate the judge's true rates can correct
    versioned: bool = True   # the counters carry ``version``
    failures: bool = False   # a page says the failing share (1 - the good share)

    @property
    def by(self) -> str:
        return ", ".join(self.keys)

    def record(self, what: str) -> str:
        return f"otel_scorers:{self.name}:{what}"


@dataclass(frozen=True)
class Alert:
    name: str
    signals: Sequence[Signal]
    severity: str
    summary: str
    what: str       # "of runs passed the rubric", for "{{ $value }} <what>"
    runbook: str = ""
    link: str = ""  # the failing-runs search's tags (a printf format over the alert's labels)
    link_args: str = ""
    lookback: str = "2h"
    extra: str = ""  # more of the description (templates)


H = "otel_scorers_evaluation_score"
RUBRIC = Signal("rubric_pass", ("job", "scorer", "judge_model", "agent"),
                'otel_scorers_evaluations_total{scorer="rubric", passed=~"true|false"}',
                ('otel_scorers_evaluations_total{scorer="rubric", passed="true"}',),
                corrected=True)
PASS = Signal("pass", ("job", "scorer", "judge_model", "agent"),
              'otel_scorers_evaluations_total{scorer!~"rubric|prompt_alignment|faithfulness", '
              'passed=~"true|false"}',
              ('otel_scorers_evaluations_total{scorer!~"rubric|prompt_alignment|faithfulness", '
               'passed="true"}',), corrected=True)
ALIGNMENT = Signal("alignment", ("job", "scorer", "judge_model", "agent"),
                   f'{H}{{scorer="prompt_alignment"}}', mean=True)
FAITHFULNESS = Signal("faithfulness", ("job", "scorer", "judge_model", "agent"),
                      f'{H}{{scorer="faithfulness"}}', mean=True)
SESSION = Signal("session_score", ("job", "scorer", "judge_model", "agent"),
                 'otel_scorers_session_score{scorer=~".+"}', mean=True)
GOAL = Signal("goal_completion", ("job", "scorer", "judge_model", "agent"),
              'otel_scorers_criterion_verdicts_total{criterion="goal_completion"}',
              ('otel_scorers_criterion_verdicts_total{criterion="goal_completion", '
               'satisfied="true"}',))
CRITERION = Signal("criterion", ("job", "scorer", "judge_model", "agent", "criterion"),
                   'otel_scorers_criterion_verdicts_total{criterion!="goal_completion"}',
                   ('otel_scorers_criterion_verdicts_total{criterion!="goal_completion", '
                    'satisfied="true"}',), failures=True)
TOOLS = Signal("tool_ok", ("job", "agent", "tool"), "otel_scorers_agent_tool_calls_total",
               ('otel_scorers_agent_tool_calls_total{outcome="ok"}',), failures=True)
CANARY = Signal("canary_agreement", ("job", "scorer", "judge_model"),
                'otel_scorers_canary_verdicts_total{judged=~"pass|fail"}',
                ('otel_scorers_canary_verdicts_total{expected="pass", judged="pass"}',
                 'otel_scorers_canary_verdicts_total{expected="fail", judged="fail"}'),
                versioned=False)
CANARY_TNR = Signal("canary_tnr", ("job", "scorer", "judge_model"),
                    'otel_scorers_canary_verdicts_total{expected="fail", judged=~"pass|fail"}',
                    ('otel_scorers_canary_verdicts_total{expected="fail", judged="fail"}',),
                    versioned=False)
SIGNALS = (RUBRIC, PASS, ALIGNMENT, FAITHFULNESS, SESSION, GOAL, CRITERION, TOOLS, CANARY,
           CANARY_TNR)


def jaeger_link(tags: str, args: str, lookback: str) -> str:
    return (LINKS % "jaeger" + f"/search?lookback={lookback}&limit=100&service="
            "{{ $labels.job | urlquery }}&tags={{ printf " + tags + " " + args
            + " | urlquery }}")


# -- the recording rules of one signal ------------------------------------------------------
def windows_group(s: Signal, interval: str) -> dict[str, Any]:
    """The signal's counts over every window, its shares, the held reference, the tests."""
    rules: list[dict[str, Any]] = []
    total, good = s.record("total"), s.record("good")
    for window in WINDOWS:
        if window in COMPOSED:
            part, times = COMPOSED[window]
            for what in (total, good):
                rules.append(_record(what, composed(what, part, times), {"window": window}))
            continue
        rules.append(_record(total, _sum(s, _count(s), window), {"window": window}))
        rules.append(_record(good, _sum_good(s, window), {"window": window}))
    rules.append(_record(s.record("rate"), f"{good} / {total}"))
    rules += held_reference(s)
    on = f"on ({s.by})"
    base, n_ref = s.record("baseline"), s.record("baseline_total")
    half = (f"{on} group_left () (0.5 * {s.record('baseline_dispersion')})" if s.mean
            else "0.5")
    detect = "|".join(THRESHOLDS)
    # the window's share with half an evaluation's continuity correction, kept inside (0, 1)
    rules.append(_record(s.record("rate_cc"), f"""clamp(
  ({good}{{window=~"{detect}"}} + {half})
    / {total}{{window=~"{detect}"}},
  1e-9, 1 - 1e-9)"""))
    cc = s.record("rate_cc")
    n_eff = (f"({total}{{window=~\"{detect}\"}} * {on} group_left {n_ref})\n"
             f"    / ({total}{{window=~\"{detect}\"}} + {on} group_left {n_ref})")
    if s.mean:
        n_eff = f"{n_eff}\n    / {on} group_left {s.record('baseline_dispersion')}"
    enough = (f"\n  and on ({s.by}, window) ({total} >= {MIN_MEAN_COUNT})" if s.mean else "")
    rules.append(_record(s.record("drop_sigma"), f"""sqrt(clamp_min(
  2 * {n_eff}
    * ({cc} * ln({cc} / {on} group_left {base})
       + (1 - {cc}) * ln((1 - {cc}) / {on} group_left () (1 - {base}))),
  0))
  and on ({s.by}, window) ({s.record("rate")} < {on} group_left {base}){enough}"""))
    # the latest runs: the shortest window with RECENT_COUNT evaluations, else the longest
    seconds = "otel_scorers:window_seconds"
    longest = list(WINDOWS)[-2]  # 12h: a day's window is the slowest to recover
    rules.append(_record(s.record("recent"), f"""max by ({s.by}) (
  {s.record("rate")}
    and on ({s.by}, window) bottomk by ({s.by}) (1,
      ({total} >= {RECENT_COUNT}) * 0 + on (window) group_left {seconds}))
  or on ({s.by}) max by ({s.by}) ({s.record("rate")}{{window="{longest}"}})"""))
    rules.append(_record(s.record("recent_seconds"), f"""min by ({s.by}) (
  ({total} >= {RECENT_COUNT}) * 0 + on (window) group_left {seconds})
  or on ({s.by}) max by ({s.by}) ({total}{{window="{longest}"}} * 0 + {WINDOWS[longest]})"""))
    rules.append(_record(s.record("min_drop"), min_drop(s)))
    # a window that opens a page, and one that keeps it open (value: the window's share);
    # the latest runs must still be low (nearer the window's level than the reference's) where
    # they are a shorter window than the one tested: a long window still low after a recovery
    # opens nothing, and a short window's drop at low volume is not held back by hours of
    # good runs before it
    low = (f"(({s.record('rate')} + {on} group_left {base})\n"
           f"    >= {on} group_left () (2 * {s.record('recent')}))")
    low_now = f"  and on ({s.by}, window) {low}"
    rules.append(_record(s.record("drop_opens"), f"""{s.record("rate")}
  and on ({s.by}, window) ({s.record("drop_sigma")} >= on (window) group_left otel_scorers:drop_threshold)
  and on ({s.by}, window) ((0 - {s.record("rate")} + {on} group_left {base})
    >= {on} group_left {s.record("min_drop")})
  and on ({s.by}, window) (
    ({s.record("rate")} * 0 + on (window) group_left {seconds})
      <= {on} group_left {s.record("recent_seconds")}
    or {low}
  )"""))
    rules.append(_record(s.record("drop_stays"), f"""{s.record("rate")}
  and on ({s.by}, window) ({s.record("drop_sigma")} >= {STAY})
  and on ({s.by}, window) ((0 - {s.record("rate")} + {on} group_left {base})
    >= {on} group_left () (0.5 * {s.record("min_drop")}))
{low_now}"""))
    if s.versioned:
        rules += by_version(s)
    return {"name": f"otel-scorers-{s.name.replace('_', '-')}", "interval": interval,
            "rules": rules}


def composed(record: str, part: str, times: int) -> str:
    """``times`` consecutive ``part`` windows of ``record`` ending now (a part not recorded
    yet, at a series' start, counts as nothing)."""
    this = f'{record}{{window="{part}"}}'
    seconds = WINDOWS[part]
    terms = [this] + [f"({this} offset {_duration(seconds * k)} or {this} * 0)"
                      for k in range(1, times)]
    return "\n  + ".join(terms)


def _duration(seconds: int) -> str:
    return f"{seconds // 3600}h" if seconds % 3600 == 0 else f"{seconds // 60}m"


def held_reference(s: Signal) -> list[dict[str, Any]]:
    """The reference (the week that ended a day ago), held while the signal's alert fires."""
    alert = ALERT_OF[s.name]
    on = f"on ({s.by})"
    firing = (f'ALERTS{{alertname="{alert}", alertstate="firing"}}\n'
              f'      and {on} (time() - ALERTS_FOR_STATE{{alertname="{alert}"}} < {HOLD_MAX_S})')
    n_ref = f"last_over_time({s.record('reference_total')}[{LAST}])"
    g_ref = f"last_over_time({s.record('reference_good')}[{LAST}])"
    fresh = {
        "baseline": f"({g_ref} + 0.5) / ({n_ref} + 1)",
        "baseline_total": n_ref,
    }
    if s.mean:
        # the scores' spread over the binomial's at the same mean (quasi-binomial dispersion):
        # the variance of the buckets' midpoints (their mean and their squares' mean, never the
        # true mean: scores piled at 1.0 sit under their bucket's midpoint, and mixing the two
        # can leave no variance at all); grouping adds about a bucket's width squared over 12,
        # a little over the true variance: conservative
        q_ref = f"last_over_time({s.record('reference_squares')}[{LAST}])"
        m_ref = f"last_over_time({s.record('reference_midpoints')}[{LAST}])"
        fresh["baseline_dispersion"] = (
            f"clamp(\n  ({q_ref} / {n_ref} - ({m_ref} / {n_ref}) ^ 2)\n"
            f"    / (({g_ref} / {n_ref}) * (1 - {g_ref} / {n_ref})),\n  {MIN_DISPERSION}, 1)")
    rules = []
    for what, expr in fresh.items():
        rules.append(_record(s.record(what), f"""(
  ({expr})
    and {on} {n_ref} >= {MIN_REFERENCE}
    unless {on} ({firing})
)
or {s.record(what)}"""))
    return rules


def min_drop(s: Signal) -> str:
    """The smallest drop that pages, on the signal's own scale (a corrected pass rate's drop
    is the raw drop over the judge's informedness)."""
    plain = f"{s.record('baseline')} * 0 + {MIN_DROP}"
    if not s.corrected:
        return plain
    return (f"({s.record('baseline')} * 0 + {MIN_DROP})\n"
            f"  * on (job, scorer, judge_model) group_left () (otel_scorers:judge_informedness > {INFORMED})\n"
            f"or {plain}")


def by_version(s: Signal) -> list[dict[str, Any]]:
    """The signal's counts by version over the last hour (the reference week's: in the
    reference group)."""
    return [_record(s.record("version_total"), _sum(s, _count(s), "1h", "version")),
            _record(s.record("version_good"), _sum_good(s, "1h", "version"))]


def reference_group(interval: str) -> dict[str, Any]:
    """The week that ended a day ago, of every signal, from the raw counters (evaluated every
    ``interval``: it moves slowly; a series has one from its second day on, a full one from
    its eighth)."""
    rules = bucket_weights()
    window, off = REFERENCE, REFERENCE_OFFSET
    for s in SIGNALS:
        rules.append(_record(s.record("reference_total"), _sum(s, _count(s), window, off=off)))
        rules.append(_record(s.record("reference_good"), _sum_good(s, window, off=off)))
        if s.mean:
            for what, weight in (("reference_squares", "midpoint_weight"),
                                 ("reference_midpoints", "midpoint_step")):
                rules.append(_record(s.record(what), f"""sum by ({s.by}) (
  increase({_base(s)}_bucket{_matchers(s)}[{window}] offset {off})
    * on (le) group_left otel_scorers:score_bucket:{weight}
)"""))
        if s.versioned:
            rules.append(_record(s.record("reference_version_total"),
                                 _sum(s, _count(s), window, "version", off=off)))
            rules.append(_record(s.record("reference_version_good"),
                                 _sum_good(s, window, "version", off=off)))
    return {"name": "otel-scorers-reference", "interval": interval, "rules": rules}


def bucket_weights() -> list[dict[str, Any]]:
    """Weights w(le) such that the sum over the cumulative bucket counts of count x w is the
    sum of the scores' squares taken at their buckets' midpoints (``midpoint_weight``), or the
    sum of those midpoints (``midpoint_step``)."""
    bounds = (0.0, *SCORE_BUCKETS)
    mids = [(bounds[i] + bounds[i + 1]) / 2 for i in range(len(SCORE_BUCKETS))]
    out = []
    for name, power in (("midpoint_weight", 2), ("midpoint_step", 1)):
        for i, bound in enumerate(SCORE_BUCKETS):
            weight = mids[i] ** power - (mids[i + 1] ** power if i + 1 < len(mids) else 0.0)
            # "1.0" (Python's exporter) and "1" (the Collector's): both spellings of a bound
            for text in sorted({f"{bound}", f"{bound:g}"}):
                out.append(_record(f"otel_scorers:score_bucket:{name}",
                                   f"vector({weight:.6g})", {"le": text}))
    return out


# -- the alerts -----------------------------------------------------------------------------
ALERTS: list[Alert] = []
ALERT_OF: dict[str, str] = {}


def _alert(alert: Alert) -> Alert:
    ALERTS.append(alert)
    for s in alert.signals:
        ALERT_OF[s.name] = alert.name
    return alert


_alert(Alert("OtelScorersRubricPassRateDrop", (RUBRIC,), "page",
             "Rubric pass rate of {{ $labels.agent }} ({{ $labels.job }}) dropped",
             "of the latest runs pass the rubric",
             link='"{\\"gen_ai.evaluation.name\\":\\"rubric\\",\\"gen_ai.evaluation.score.label\\":\\"fail\\",\\"gen_ai.agent.name\\":\\"%s\\"%s}"',
             link_args="$labels.agent $version_tag", extra="criterion"))
_alert(Alert("OtelScorersPassRateDrop", (PASS,), "warning",
             "Pass rate of scorer {{ $labels.scorer }} for {{ $labels.agent }} ({{ $labels.job }}) dropped",
             "of the latest runs pass",
             link='"{\\"gen_ai.evaluation.name\\":\\"%s\\",\\"gen_ai.evaluation.score.label\\":\\"fail\\",\\"gen_ai.agent.name\\":\\"%s\\"%s}"',
             link_args="$labels.scorer $labels.agent $version_tag"))
_alert(Alert("OtelScorersAlignmentDrop", (ALIGNMENT,), "page",
             "Prompt alignment of {{ $labels.agent }} ({{ $labels.job }}) dropped",
             "is the latest runs' mean alignment",
             link='"{\\"gen_ai.evaluation.name\\":\\"prompt_alignment\\",\\"gen_ai.agent.name\\":\\"%s\\"%s}"',
             link_args="$labels.agent $version_tag"))
_alert(Alert("OtelScorersFaithfulnessDrop", (FAITHFULNESS,), "page",
             "Faithfulness of {{ $labels.agent }} ({{ $labels.job }}) dropped",
             "is how grounded the latest answers are in their tool results and documents",
             link='"{\\"gen_ai.evaluation.name\\":\\"faithfulness\\",\\"gen_ai.evaluation.score.label\\":\\"fail\\",\\"gen_ai.agent.name\\":\\"%s\\"%s}"',
             link_args="$labels.agent $version_tag"))
_alert(Alert("OtelScorersSessionGoalCompletionDrop", (GOAL,), "page",
             "Goal completion of {{ $labels.agent }} ({{ $labels.job }}) conversations dropped",
             "of the latest judged sessions reached the user's goal",
             link='"{\\"gen_ai.evaluation.name\\":\\"%s\\",\\"gen_ai.evaluation.score.label\\":\\"fail\\",\\"gen_ai.agent.name\\":\\"%s\\"%s}"',
             link_args="$labels.scorer $labels.agent $version_tag"))
_alert(Alert("OtelScorersSessionScoreDrop", (SESSION,), "warning",
             "Session scores of {{ $labels.agent }} ({{ $labels.job }}) dropped",
             "is the latest sessions' mean score",
             link='"{\\"gen_ai.evaluation.name\\":\\"%s\\",\\"gen_ai.agent.name\\":\\"%s\\"%s}"',
             link_args="$labels.scorer $labels.agent $version_tag"))
_alert(Alert("OtelScorersCriterionFailureSpike", (CRITERION,), "warning",
             "Criterion {{ $labels.criterion }} of {{ $labels.agent }} fails more often",
             "of the latest runs fail it",
             link='"{\\"gen_ai.evaluation.name\\":\\"%s\\",\\"gen_ai.evaluation.score.label\\":\\"fail\\",\\"gen_ai.agent.name\\":\\"%s\\"%s}"',
             link_args="$labels.scorer $labels.agent $version_tag"))
_alert(Alert("OtelScorersToolErrorSpike", (TOOLS,), "warning",
             "Tool {{ $labels.tool }} of {{ $labels.agent }} ({{ $labels.job }}) fails more often",
             "of its latest calls failed",
             link='"{\\"gen_ai.tool.name\\":\\"%s\\",\\"error\\":\\"true\\"}"',
             link_args="$labels.tool"))
_alert(Alert("OtelScorersJudgeDrift", (CANARY, CANARY_TNR), "warning",
             "The judge of scorer {{ $labels.scorer }} ({{ $labels.judge_model }}, {{ $labels.job }}) drifted",
             "is its latest agreement with its labelled canary cases (or true negative rate)",
             link='"{\\"otel_scorers.scorer\\":\\"%s\\",\\"otel_scorers.canary.agrees\\":\\"false\\"}"',
             link_args="$labels.scorer", lookback="6h",
             extra="judge"))


def labels_selector(keys: Sequence[str]) -> tuple[str, str]:
    """A PromQL selector of the alert's series (a printf format and its arguments)."""
    return ("{" + ",".join(f"{k}=%q" for k in keys) + "}",
            " ".join(f"$labels.{k}" for k in keys))


def alert_rule(a: Alert, for_: str, keep: str) -> dict[str, Any]:
    exprs = []
    for s in a.signals:
        on = f"on ({s.by})"
        firing = f'ALERTS{{alertname="{a.name}", alertstate="firing"}}'
        exprs.append(f"""(
  {s.record("paging")}
    and {on} (
      {s.record("drop_opens")}
      or on ({s.by}, window) ({s.record("drop_stays")} and {on} {firing})
    )
)""")
    description = describe(a)
    annotations = {"summary": a.summary, "description": description,
                   "runbook_url": LINKS % "runbook" + f"#{a.name.lower()}"}
    if a.link:
        version = ""
        if a.signals[0].versioned:
            fmt, args = labels_selector(a.signals[0].keys)
            version = ('{{ $version_tag := "" }}{{ with query (printf `otel_scorers:'
                       + a.signals[0].name + ":version_new" + fmt + "` " + args + ") }}"
                       '{{ with first . }}{{ $version_tag = printf `,"otel_scorers.version":"%s"` .Labels.version }}'
                       '{{ end }}{{ end }}')
        else:
            version = '{{ $version_tag := "" }}'
        annotations["failing_runs"] = version + jaeger_link(a.link, a.link_args, a.lookback)
    return {"alert": a.name, "expr": "\nor\n".join(exprs), "for": for_,
            "keep_firing_for": keep, "labels": {"severity": a.severity},
            "annotations": annotations}


def describe(a: Alert) -> str:
    """The page's text: the level now against the reference, the test, the version a drop
    started with and the one before, the criterion that moved most, the budget."""
    s = a.signals[0]
    fmt, args = labels_selector(s.keys)

    def shown(expr: str) -> str:  # a share as the page says it (failures, for a spike)
        return f"1 - ({expr})" if s.failures else expr

    def query(expr: str, body: str, otherwise: str = "") -> str:
        text = "{{ with query (printf `" + expr + "` " + args + ") }}{{ with first . }}"
        text += body + "{{ end }}"
        return text + ("{{ else }}" + otherwise if otherwise else "") + "{{ end }}"

    record = f"otel_scorers:{s.name}"
    parts = ["{{ $value | humanizePercentage }} " + a.what + "."]
    parts.append(query(shown(f"{record}:baseline{fmt}"),
                       " The reference, the week that ended a day before (held while this "
                       "page is open): {{ .Value | humanizePercentage }}"))
    parts.append(query(f"{record}:baseline_total{fmt}",
                       " over {{ .Value | humanize }} evaluations."))
    parts.append(query(f"topk(1, {record}:drop_sigma{fmt})",
                       " The deepest drop: {{ .Value | printf \"%.1f\" }} standard errors "
                       "over the last {{ .Labels.window }}."))
    if s.corrected:
        parts.append(
            "{{ with query (printf `otel_scorers:judge_informedness{job=%q,scorer=%q,"
            "judge_model=%q} > " + str(INFORMED) + "` $labels.job $labels.scorer "
            "$labels.judge_model) }}{{ with first . }} Corrected for the judge's known true "
            "rates (informedness {{ .Value | printf \"%.2f\" }}): the rates shown are the "
            "corrected pass rate.{{ end }}{{ else }} Raw pass rate: the judge's true rates "
            "are not known (otel-scorers calibrate --save, or canaries).{{ end }}")
    if s.versioned:
        parts.append(query(shown(f"{record}:version_new{fmt}"),
                           " Started with version {{ .Labels.version }} (new since the "
                           "reference week): {{ .Value | humanizePercentage }} in its last "
                           "hour.", " No new version since the reference week: not a deploy "
                           "of what is evaluated."))
        parts.append(query(shown(f"{record}:version_before{fmt}"),
                           " The version before, {{ .Labels.version }}: "
                           "{{ .Value | humanizePercentage }} in the reference week."))
    if a.extra == "criterion":
        parts.append(query(
            f"topk(1, otel_scorers:criterion:baseline{fmt} - on (job, scorer, judge_model, "
            f"agent, criterion) otel_scorers:criterion:recent{fmt})",
            " The criterion that moved most: {{ .Labels.criterion }} ({{ .Value | "
            "humanizePercentage }} more of the runs fail it than in the reference week)."
            ).replace("` " + args + ")", "` " + args + " " + args + ")", 1))
    if a.extra == "judge":
        parts.append(" The model behind the name, its prompt or its rubric changed: scores "
                     "and pass rates since are not comparable with before; run otel-scorers "
                     "calibrate and compare.")
    parts.append(" " + BUDGET)
    return "".join(parts)


def paging_rules(s: Signal) -> list[dict[str, Any]]:
    """What a page shows: the latest runs' share, corrected where the judge's true rates are
    known; and the versions new since the reference week, and the one before."""
    out = []
    recent = s.record("recent")
    if s.corrected:
        out.append(_record(s.record("paging"), f"""clamp(
  ({recent} + on (job, scorer, judge_model) group_left max by (job, scorer, judge_model) (otel_scorers_judge_true_negative_rate) - 1)
    / on (job, scorer, judge_model) group_left () (otel_scorers:judge_informedness > {INFORMED}),
  0, 1)
or {recent}"""))
    else:
        out.append(_record(s.record("paging"), f"1 - {recent}" if s.failures else recent))
    if s.versioned:
        vt, vg = s.record("version_total"), s.record("version_good")
        rt = s.record("reference_version_total")
        out.append(_record(s.record("version_new"), f"""({vg} / {vt})
  and ({vt} > 0)
  unless on ({s.by}, version) (last_over_time({rt}[{LAST}]) > 0)"""))
        out.append(_record(s.record("version_before"), f"""(last_over_time({s.record("reference_version_good")}[{LAST}]) / last_over_time({rt}[{LAST}]))
  and on ({s.by}, version) topk by ({s.by}) (1, last_over_time({rt}[{LAST}]))"""))
    return out


#: The level under which the mean alignment is low (the seed's "good" band starts at 0.7).
LOW_ALIGNMENT = 0.7


def alignment_low(for_: str, keep: str) -> list[dict[str, Any]]:
    """OtelScorersAlignmentLow: the mean alignment significantly under a fixed level (the same
    test against a number instead of a reference: no reference noise, nothing to hold)."""
    s, on = ALIGNMENT, f"on ({ALIGNMENT.by})"
    detect = "|".join(THRESHOLDS)
    total, rate = s.record("total"), s.record("rate")
    dispersion = (f"({s.record('baseline_dispersion')} or {on} "
                  f"max by ({s.by}) ({rate} * 0 + 1))")
    cc = f"({s.record('rate_cc')})"
    level = LOW_ALIGNMENT
    sigma = f"""sqrt(clamp_min(
  2 * {total}{{window=~"{detect}"}} / {on} group_left () {dispersion}
    * ({cc} * ln({cc} / {level}) + (1 - {cc}) * ln((1 - {cc}) / {1 - level:.6g})),
  0))
  and on ({s.by}, window) ({rate} < {level})"""
    rules = [_record(s.record("low_sigma"), sigma), {
        "alert": "OtelScorersAlignmentLow",
        "expr": f"""{s.record("recent")} < {level}
  and {on} ({s.record("low_sigma")} >= on (window) group_left otel_scorers:drop_threshold)""",
        "for": for_, "keep_firing_for": keep, "labels": {"severity": "warning"},
        "annotations": {
            "summary": "Prompt alignment of {{ $labels.agent }} ({{ $labels.job }}) is low",
            "description": "{{ $value | humanizePercentage }} is the latest runs' mean "
                           f"alignment: under {level:.0%} beyond noise ("
                           "{{ with query (printf `topk(1, otel_scorers:alignment:low_sigma"
                           + labels_selector(s.keys)[0] + ")` " + labels_selector(s.keys)[1]
                           + ") }}{{ with first . }}{{ .Value | printf \"%.1f\" }} standard "
                           "errors over the last {{ .Labels.window }}{{ end }}{{ end }}). "
                           + BUDGET,
            "runbook_url": LINKS % "runbook" + "#otelscorersalignmentlow",
            "failing_runs": jaeger_link(
                '"{\\"gen_ai.evaluation.name\\":\\"prompt_alignment\\",'
                '\\"gen_ai.agent.name\\":\\"%s\\"}"', "$labels.agent", "2h")}}]
    return rules


# -- the rest: links, display series, pipeline alerts ---------------------------------------
def constants() -> dict[str, Any]:
    rules: list[dict[str, Any]] = [
        {"record": "otel_scorers:alert_links", "expr": "vector(1)",
         "labels": {"jaeger": "http://localhost:16686",
                    "runbook": "http://localhost:8080/docs/runbook.md"}}]
    for window, seconds in WINDOWS.items():
        rules.append(_record("otel_scorers:window_seconds", f"vector({seconds})",
                             {"window": window}))
    for window, threshold in THRESHOLDS.items():
        rules.append(_record("otel_scorers:drop_threshold", f"vector({threshold})",
                             {"window": window}))
    return {"name": "otel-scorers-links", "rules": rules}


#: Alerts whose rules go in the group of another's (the criteria in the rubric's).
TOGETHER = {"OtelScorersCriterionFailureSpike": "OtelScorersRubricPassRateDrop"}


def rules(*, for_: str = "2m", keep: str = "20m", interval: str = "1m",
          reference_interval: str = "1h") -> dict[str, Any]:
    """The whole rules file; the arguments only shorten timings for tests that cannot wait
    (the statistics are the same)."""
    groups = [constants(), reference_group(reference_interval)]
    # one group an alert, its signals' rules first (a group's rules run in order, so a page
    # reads its own series fresh); the criteria share the rubric's group, whose page names
    # the criterion that moved most
    signal_rules: dict[str, list[dict[str, Any]]] = {}
    alert_rules: dict[str, list[dict[str, Any]]] = {}
    for a in ALERTS:
        rules_of: list[dict[str, Any]] = []
        for s in a.signals:
            rules_of += windows_group(s, interval)["rules"] + paging_rules(s)
        signal_rules[a.name] = rules_of
        alert_rules[a.name] = [alert_rule(a, for_, keep)]
        if a.name == "OtelScorersAlignmentDrop":
            alert_rules[a.name] += alignment_low(for_, keep)
    for a in ALERTS:
        if a.name in TOGETHER:
            continue
        names = [a.name, *(k for k, v in TOGETHER.items() if v == a.name)]
        body = [r for n in reversed(names) for r in signal_rules[n]]
        body += [r for n in names for r in alert_rules[n]]
        groups.append({"name": f"otel-scorers-{a.signals[0].name.replace('_', '-')}",
                       "interval": interval, "rules": body})
    groups.append(display_group())
    groups.append(pipeline_group())
    return {"groups": groups}


def display_group() -> dict[str, Any]:
    """Series the dashboard reads (not the alerts)."""
    def r(name: str, expr: str) -> dict[str, Any]:
        return _record(name, expr)
    return {"name": "otel-scorers-display", "rules": [
        r("otel_scorers:evaluation_score:mean5m", """sum by (job, scorer, judge_model, agent) (rate(otel_scorers_evaluation_score_sum[5m]))
  / sum by (job, scorer, judge_model, agent) (rate(otel_scorers_evaluation_score_count[5m]))"""),
        r("otel_scorers:pass_rate:ratio1h", """sum by (job, scorer, judge_model, agent) (increase(otel_scorers_evaluations_total{passed="true"}[1h]))
  / sum by (job, scorer, judge_model, agent) (increase(otel_scorers_evaluations_total{passed=~"true|false"}[1h]))"""),
        r("otel_scorers:judge_informedness", """max by (job, scorer, judge_model) (otel_scorers_judge_true_positive_rate)
  + on (job, scorer, judge_model) max by (job, scorer, judge_model) (otel_scorers_judge_true_negative_rate)
  - 1"""),
        r("otel_scorers:pass_rate_corrected:ratio1h", """clamp(
  (otel_scorers:pass_rate:ratio1h
    + on (job, scorer, judge_model) group_left max by (job, scorer, judge_model) (otel_scorers_judge_true_negative_rate)
    - 1)
  / on (job, scorer, judge_model) group_left () (otel_scorers:judge_informedness > 0),
  0, 1)"""),
        r("otel_scorers:canary_agreement:ratio6h", "otel_scorers:canary_agreement:rate{window=\"6h\"}"),
        r("otel_scorers:canary_agreement:ratio7d", f"last_over_time(otel_scorers:canary_agreement:reference_good[{LAST}]) / last_over_time(otel_scorers:canary_agreement:reference_total[{LAST}])"),
        r("otel_scorers:canary_tnr:ratio6h", "otel_scorers:canary_tnr:rate{window=\"6h\"}"),
        r("otel_scorers:version_changes", """count by (job, agent, version) (increase(otel_scorers_evaluations_total[15m]) > 0)
  unless on (job, agent, version) count by (job, agent, version) (increase(otel_scorers_evaluations_total[15m] offset 15m) > 0)"""),
    ]}


def pipeline_group() -> dict[str, Any]:
    """The pipeline's own alerts (errors, drops, budget): rates of what the library counts."""
    def link(decision: str) -> str:
        return jaeger_link(
            '"{\\"otel_scorers.scorer\\":\\"%s\\",\\"otel_scorers.decision\\":\\"' + decision
            + '\\"}"', "$labels.scorer", "1h")
    rules: list[dict[str, Any]] = [
        _record("otel_scorers:judge_attempts:increase15m", 'sum by (job, scorer) (increase(otel_scorers_decisions_total{decision=~"scored|error"}[15m]))'),
        _record("otel_scorers:judge_error_rate:ratio15m", 'sum by (job, scorer) (increase(otel_scorers_decisions_total{decision="error"}[15m]))\n  / otel_scorers:judge_attempts:increase15m'),
        _record("otel_scorers:selected:increase15m", 'sum by (job, scorer) (increase(otel_scorers_decisions_total{decision="selected"}[15m]))'),
        _record("otel_scorers:dropped:increase15m", 'sum by (job, scorer) (increase(otel_scorers_decisions_total{decision="dropped"}[15m]))'),
        _record("otel_scorers:budget_exhausted:increase15m", 'sum by (job, scorer) (increase(otel_scorers_decisions_total{decision="budget_exhausted"}[15m]))'),
        {"alert": "OtelScorersJudgeErrors",
         "expr": "otel_scorers:judge_error_rate:ratio15m > 0.1\n  and otel_scorers:judge_attempts:increase15m >= 10",
         "for": "10m", "labels": {"severity": "warning"},
         "annotations": {
             "summary": "Judge errors for scorer {{ $labels.scorer }} ({{ $labels.job }})",
             "description": "{{ $value | humanizePercentage }} of evaluations in the last 15 minutes ended in a judge error; see otel_scorers_decisions_total{decision=\"error\"} by error_type.",
             "runbook_url": LINKS % "runbook" + "#otelscorersjudgeerrors",
             "failing_runs": jaeger_link('"{\\"gen_ai.evaluation.name\\":\\"%s\\",\\"error\\":\\"true\\"}"', "$labels.scorer", "2h")}},
        {"alert": "OtelScorersEvaluationsDropped",
         "expr": "otel_scorers:dropped:increase15m / otel_scorers:selected:increase15m > 0.05\n  and otel_scorers:selected:increase15m >= 20",
         "for": "10m", "labels": {"severity": "warning"},
         "annotations": {
             "summary": "Runs of {{ $labels.job }} are dropped unjudged (scorer {{ $labels.scorer }})",
             "description": "{{ $value | humanizePercentage }} of selected runs were dropped in the last 15 minutes because the evaluation queue was full: raise queue_size or concurrency, or sample less.",
             "runbook_url": LINKS % "runbook" + "#otelscorersevaluationsdropped",
             "failing_runs": link("dropped")}},
        {"alert": "OtelScorersJudgeBudgetExhausted",
         "expr": "otel_scorers:budget_exhausted:increase15m >= 1",
         "for": "5m", "labels": {"severity": "warning"},
         "annotations": {
             "summary": "Judge budget of {{ $labels.job }} is spent (scorer {{ $labels.scorer }})",
             "description": "{{ $value }} runs were skipped in the last 15 minutes because the hourly judge budget (tokens or cost) is spent; scoring resumes next hour. Raise the budget or sample less.",
             "runbook_url": LINKS % "runbook" + "#otelscorersjudgebudgetexhausted",
             "failing_runs": link("budget_exhausted")}},
    ]
    return {"name": "otel-scorers-pipeline", "rules": rules}


# -- PromQL pieces --------------------------------------------------------------------------
def _base(s: Signal) -> str:
    return s.total.split("{")[0]


def _matchers(s: Signal) -> str:
    return s.total[len(_base(s)):]


def _count(s: Signal) -> str:
    return f"{_base(s)}_count{_matchers(s)}" if s.mean else s.total


def _range(window: str, off: str) -> str:
    return f"[{window}]" + (f" offset {off}" if off else "")


def _sum(s: Signal, selector: str, window: str, extra: str = "", *, off: str = "") -> str:
    by = s.by + (f", {extra}" if extra else "")
    return f"sum by ({by}) (increase({selector}{_range(window, off)}))"


def _sum_good(s: Signal, window: str, extra: str = "", *, off: str = "") -> str:
    """The good outcomes' count (a mean: the scores' sum), zero where there are none."""
    by = s.by + (f", {extra}" if extra else "")
    if s.mean:
        return f"sum by ({by}) (increase({_base(s)}_sum{_matchers(s)}{_range(window, off)}))"
    increases = " or ".join(f"increase({g}{_range(window, off)})" for g in s.good)
    return (f"sum by ({by}) ({increases})\n"
            f"  or {_sum(s, _count(s), window, extra, off=off)} * 0")


def _record(name: str, expr: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    rule: dict[str, Any] = {"record": name, "expr": expr}
    if labels:
        rule["labels"] = labels
    return rule


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)

HEADER = """\
# Recording and alerting rules for otel-scorers, GENERATED by collector-config/prometheus/rules.py:
# edit that file (its tables: windows, thresholds, the signals and the alerts), then
#   .venv/bin/python collector-config/prometheus/rules.py > /tmp/rules.yml && mv /tmp/rules.yml collector-config/prometheus/otel-scorers.rules.yml
# How the drop alerts decide, and what each one means: docs/runbook.md. Metric names: the
# README's "Prometheus" column. Scores are normalized to 0..1 (score / scale) in every series.
#
# Two settings to make yours: the labels of otel_scorers:alert_links below (your Jaeger UI and
# where you host docs/runbook.md).
"""


def main(argv: Sequence[str] = ()) -> None:
    del argv
    text = yaml.dump(rules(), Dumper=_Dumper, sort_keys=False, width=1000,
                     allow_unicode=True)
    sys.stdout.write(HEADER + text)


if __name__ == "__main__":
    main(sys.argv[1:])
