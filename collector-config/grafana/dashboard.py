"""The otel-scorers Grafana dashboard, generated from code with grafana-foundation-sdk (typed
builders, Apache-2.0) instead of hand-written JSON. The JSON in ``dashboards/otel-scorers.json``
is this script's output; a test regenerates it and compares, and runs every panel's query on
real Prometheus.

    .venv/bin/python collector-config/grafana/dashboard.py > /tmp/otel-scorers.json \
        && mv /tmp/otel-scorers.json collector-config/grafana/dashboards/otel-scorers.json

Edit the table below (a panel is one ``P`` row: its query, legend, unit), not the JSON.
Exemplars: the score distribution and the pass-rate panels ask for them (the score buckets and
the evaluation counter carry the trace id of a run behind a sample); the Prometheus datasource
opens them in Jaeger. Per-agent panels link each series to a Jaeger search of that agent's
failing runs; the Jaeger base URL is the dashboard's ``jaeger`` constant (Tempo: point the data
links at your Tempo's search instead).
"""

from __future__ import annotations

import json
import sys
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from grafana_foundation_sdk.builders import bargauge, common, heatmap, prometheus, timeseries
from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.common import LegendDisplayMode, LegendPlacement, TooltipDisplayMode
from grafana_foundation_sdk.models.dashboard import (
    DashboardLinkType,
    DataSourceRef,
    GridPos,
    VariableRefresh,
    VariableSort,
)

PROMETHEUS = DataSourceRef(type_val="prometheus", uid="otel-scorers-prometheus")
#: The dashboard's version marks: a version's first evaluations of an agent (recorded by the
#: rules' display group), on every panel.
VERSION_CHANGES = 'otel_scorers:version_changes{job=~"$service", agent=~"$agent"}'
JAEGER_UI = "http://127.0.0.1:16686"  # the `jaeger` constant's default: your Jaeger UI


@dataclass
class T:
    """One query: PromQL, legend, and how Grafana reads it."""

    expr: str
    legend: str
    format: str | None = None
    instant: bool = False
    exemplar: bool = False


@dataclass
class P:
    """One panel: id, type, title, description, (x, y, w, h), queries, field unit and range;
    ``failing``: the evaluation its series' agent links to (a Jaeger search of failing runs)."""

    id: int
    type: str
    title: str
    description: str
    pos: tuple[int, int, int, int]
    targets: list[T]
    unit: str | None = None
    min: float | None = None
    max: float | None = None
    table_legend: bool = False
    failing: str | None = None


@dataclass
class Row:
    id: int
    title: str
    y: int
    panels: list[P] = field(default_factory=list)


LAYOUT: list[P | Row] = [
    Row(1, 'Quality', y=0),
    P(2, 'timeseries', 'Mean score (normalized) by scorer and agent',
      'Scores divided by their scale: 1 is a perfect score. Scorers in the batch lane are counted when their batch comes back (up to 24 h after the run), not when the run happened: their series lag the others.',
      (0, 1, 12, 8),
      [T('sum by (job, scorer, agent) (rate(otel_scorers_evaluation_score_sum{job=~"$service",scorer=~"$scorer",agent=~"$agent"}[$__rate_interval])) / sum by (job, scorer, agent) (rate(otel_scorers_evaluation_score_count{job=~"$service",scorer=~"$scorer",agent=~"$agent"}[$__rate_interval]))', '{{scorer}} · {{agent}}')], unit='percentunit', min=0, max=1, failing='scorer'),
    P(3, 'heatmap', 'Score distribution',
      'How many evaluations landed in each score bucket (score / scale).',
      (12, 1, 12, 8),
      [T('sum by (le) (increase(otel_scorers_evaluation_score_bucket{job=~"$service",scorer=~"$scorer",agent=~"$agent"}[$__rate_interval]))', '{{le}}', format='heatmap', exemplar=True)]),
    P(4, 'timeseries', 'Rubric pass rate',
      'Share of rubric evaluations where every required criterion held (choose a rubric scorer, or All). A scorer in the batch lane is counted when its batch comes back, hours after its runs.',
      (0, 9, 12, 8),
      [T('sum by (job, agent) (rate(otel_scorers_evaluations_total{job=~"$service",scorer=~"$scorer",agent=~"$agent",passed="true"}[$__rate_interval])) / sum by (job, agent) (rate(otel_scorers_evaluations_total{job=~"$service",scorer=~"$scorer",agent=~"$agent"}[$__rate_interval]))', '{{agent}}', exemplar=True)], unit='percentunit', min=0, max=1, failing='rubric'),
    P(5, 'bargauge', 'Failure rate per criterion (dashboard time range)',
      'Which rubric criteria fail most; the reasons are on the evaluation spans (see the trace links).',
      (12, 9, 12, 8),
      [T('sum by (criterion) (increase(otel_scorers_criterion_verdicts_total{job=~"$service",scorer=~"$scorer",agent=~"$agent",satisfied="false"}[$__range])) / sum by (criterion) (increase(otel_scorers_criterion_verdicts_total{job=~"$service",scorer=~"$scorer",agent=~"$agent"}[$__range]))', '{{criterion}}', instant=True)], unit='percentunit', min=0, max=1),
    P(6, 'timeseries', 'Prompt alignment dimensions',
      'Intent, requirements, completeness and appropriateness, against the user prompt and the system prompt.',
      (0, 17, 12, 8),
      [T('sum by (side, dimension) (rate(otel_scorers_dimension_score_sum{job=~"$service",scorer=~"$scorer",agent=~"$agent"}[$__rate_interval])) / sum by (side, dimension) (rate(otel_scorers_dimension_score_count{job=~"$service",scorer=~"$scorer",agent=~"$agent"}[$__rate_interval]))', '{{side}} · {{dimension}}')], unit='percentunit', min=0, max=1),
    P(7, 'timeseries', 'Evaluations by label',
      'Scored evaluations per second by result label.',
      (12, 17, 12, 8),
      [T('sum by (scorer, label) (rate(otel_scorers_evaluations_total{job=~"$service",scorer=~"$scorer",agent=~"$agent"}[$__rate_interval]))', '{{scorer}} · {{label}}')], unit='ops'),
    Row(17, 'Agent behaviour', y=25),
    P(18, 'timeseries', 'Trajectory score',
      'Mean trajectory score (accuracy, efficiency, tool failures, blacklist; a blacklisted tool scores 0) by agent.',
      (0, 26, 8, 8),
      [T('sum by (job, agent) (rate(otel_scorers_evaluation_score_sum{job=~"$service",scorer="trajectory",agent=~"$agent"}[$__rate_interval])) / sum by (job, agent) (rate(otel_scorers_evaluation_score_count{job=~"$service",scorer="trajectory",agent=~"$agent"}[$__rate_interval]))', '{{agent}}')], unit='percentunit', min=0, max=1, failing='trajectory'),
    P(19, 'timeseries', 'Faithfulness',
      "Share of the answers' claims supported by the run's own tool results and retrieved documents, by agent.",
      (8, 26, 8, 8),
      [T('sum by (job, agent) (rate(otel_scorers_evaluation_score_sum{job=~"$service",scorer="faithfulness",agent=~"$agent"}[$__rate_interval])) / sum by (job, agent) (rate(otel_scorers_evaluation_score_count{job=~"$service",scorer="faithfulness",agent=~"$agent"}[$__rate_interval]))', '{{agent}}')], unit='percentunit', min=0, max=1, failing='faithfulness'),
    P(20, 'timeseries', 'Tool errors',
      'Share of tool calls that failed, by agent and tool (tool calls of the evaluated runs).',
      (16, 26, 8, 8),
      [T('sum by (job, agent, tool) (rate(otel_scorers_agent_tool_calls_total{job=~"$service",agent=~"$agent",outcome="error"}[$__rate_interval])) / sum by (job, agent, tool) (rate(otel_scorers_agent_tool_calls_total{job=~"$service",agent=~"$agent"}[$__rate_interval]))', '{{agent}} {{tool}}')], unit='percentunit', min=0, max=1, failing='tool'),
    Row(21, 'Sessions', y=34),
    P(22, 'timeseries', 'Session goal completion',
      'Share of judged sessions (whole conversations) whose goal_completion criterion holds, by agent: the user got what they came for.',
      (0, 35, 8, 8),
      [T('sum by (job, agent) (rate(otel_scorers_criterion_verdicts_total{job=~"$service",agent=~"$agent",criterion="goal_completion",satisfied="true"}[$__rate_interval])) / sum by (job, agent) (rate(otel_scorers_criterion_verdicts_total{job=~"$service",agent=~"$agent",criterion="goal_completion"}[$__rate_interval]))', '{{agent}}')], unit='percentunit', min=0, max=1, failing='multi_turn'),
    P(23, 'timeseries', 'Session scores',
      'Mean normalized score of the session scorers (multi-turn judge, rubric and alignment in session mode), by scorer and agent.',
      (8, 35, 8, 8),
      [T('sum by (job, scorer, agent) (rate(otel_scorers_session_score_sum{job=~"$service",agent=~"$agent",scorer=~"$scorer"}[$__rate_interval])) / sum by (job, scorer, agent) (rate(otel_scorers_session_score_count{job=~"$service",agent=~"$agent",scorer=~"$scorer"}[$__rate_interval]))', '{{scorer}} {{agent}}')], unit='percentunit', min=0, max=1, failing='scorer'),
    P(24, 'timeseries', 'Turns per session and open sessions',
      'Turns per judged session (median and 95th percentile) and sessions with turns not judged yet.',
      (16, 35, 8, 8),
      [T('histogram_quantile(0.5, sum by (le) (rate(otel_scorers_session_turns_bucket{job=~"$service",agent=~"$agent"}[$__rate_interval])))', 'turns p50'),
       T('histogram_quantile(0.95, sum by (le) (rate(otel_scorers_session_turns_bucket{job=~"$service",agent=~"$agent"}[$__rate_interval])))', 'turns p95'),
       T('sum by (job) (otel_scorers_sessions_open{job=~"$service"})', 'open sessions {{job}}')]),
    Row(8, 'Pipeline', y=43),
    P(9, 'timeseries', 'Decisions',
      'What happened to each selected run: sampled out, rate limited, filtered, dropped (queue full), budget exhausted, cached, scored, error.',
      (0, 44, 12, 8),
      [T('sum by (scorer, decision) (rate(otel_scorers_decisions_total{job=~"$service",scorer=~"$scorer",decision!="selected"}[$__rate_interval]))', '{{scorer}} · {{decision}}')], unit='ops'),
    P(10, 'timeseries', 'Judge errors by type',
      'Evaluations that ended in an error, by error.type (timeout, rate_limited, invalid_output, ...).',
      (12, 44, 12, 8),
      [T('sum by (scorer, error_type) (rate(otel_scorers_decisions_total{job=~"$service",scorer=~"$scorer",decision="error"}[$__rate_interval]))', '{{scorer}} · {{error_type}}')], unit='ops'),
    P(11, 'timeseries', 'Queue depth',
      'Runs waiting for a free evaluation slot.',
      (0, 52, 12, 8),
      [T('sum by (job) (otel_scorers_queue_depth{job=~"$service"})', '{{job}}')]),
    P(12, 'timeseries', 'Gateway requests',
      'otel-scorers serve: OTLP requests by outcome (empty without a gateway).',
      (12, 52, 12, 8),
      [T('sum by (outcome) (rate(otel_scorers_gateway_requests_total{job=~"$service"}[$__rate_interval]))', '{{outcome}}')], unit='reqps'),
    Row(13, 'Judge', y=60),
    P(14, 'timeseries', 'Judge latency',
      '',
      (0, 61, 8, 8),
      [T('histogram_quantile(0.5, sum by (le, scorer) (rate(otel_scorers_judge_duration_seconds_bucket{job=~"$service",scorer=~"$scorer",agent=~"$agent"}[$__rate_interval])))', 'p50 {{scorer}}'),
       T('histogram_quantile(0.95, sum by (le, scorer) (rate(otel_scorers_judge_duration_seconds_bucket{job=~"$service",scorer=~"$scorer",agent=~"$agent"}[$__rate_interval])))', 'p95 {{scorer}}')], unit='s'),
    P(15, 'timeseries', 'Judge tokens',
      'Tokens per second spent by the judge.',
      (8, 61, 8, 8),
      [T('sum by (scorer, token_type) (rate(otel_scorers_judge_tokens_total{job=~"$service",scorer=~"$scorer",agent=~"$agent"}[$__rate_interval]))', '{{scorer}} · {{token_type}}')], unit='short'),
    P(16, 'timeseries', 'Judge cost per hour',
      "From litellm's price table.",
      (16, 61, 8, 8),
      [T('sum by (scorer, judge_model) (rate(otel_scorers_judge_cost_total{job=~"$service",scorer=~"$scorer",agent=~"$agent"}[$__rate_interval])) * 3600', '{{scorer}} · {{judge_model}}')], unit='currencyUSD'),
    Row(25, 'Judge health', y=69),
    P(26, 'timeseries', "Pass rate: raw and corrected for the judge's true rates",
      "Raw: the share of judged runs that passed (last hour). Corrected: the Rogan-Gladen estimate (observed + TNR - 1) / (TPR + TNR - 1), clamped to 0..1, from the judge's true positive and negative rates (calibrate --save, judge_rates). No corrected line where the rates are unknown or TPR + TNR <= 1 (undefined): the judge does not tell passes from failures there.",
      (0, 70, 12, 8),
      [T('otel_scorers:pass_rate:ratio1h{job=~"$service",scorer=~"$scorer",agent=~"$agent"}', 'raw {{scorer}} {{agent}} ({{judge_model}})'),
       T('otel_scorers:pass_rate_corrected:ratio1h{job=~"$service",scorer=~"$scorer",agent=~"$agent"}', 'corrected {{scorer}} {{agent}} ({{judge_model}})')], unit='percentunit', min=0, max=1, table_legend=True, failing='scorer'),
    P(27, 'timeseries', 'Judge true rates (TPR, TNR) and informedness',
      "The judge's true positive rate (labelled passes it passed) and true negative rate (labelled failures it failed) per scorer and judge model. Informedness = TPR + TNR - 1: at or below 0 the pass rate cannot be corrected.",
      (12, 70, 12, 8),
      [T('max by (scorer, judge_model, source) (otel_scorers_judge_true_positive_rate{job=~"$service",scorer=~"$scorer"})', 'TPR {{scorer}} ({{judge_model}}, {{source}})'),
       T('max by (scorer, judge_model, source) (otel_scorers_judge_true_negative_rate{job=~"$service",scorer=~"$scorer"})', 'TNR {{scorer}} ({{judge_model}}, {{source}})'),
       T('otel_scorers:judge_informedness{job=~"$service",scorer=~"$scorer"}', 'informedness {{scorer}} ({{judge_model}})')], unit='percentunit', min=-1, max=1, table_legend=True),
    P(28, 'timeseries', 'Judge canaries: agreement and TNR (6 hours) against the week',
      "Labelled canary cases judged by the live judge on a schedule (canary settings). A drop against the judge's own week means the judge changed (model snapshot, prompt, rubric): the OtelScorersJudgeDrift alert.",
      (0, 78, 24, 8),
      [T('otel_scorers:canary_agreement:ratio6h{job=~"$service",scorer=~"$scorer"}', 'agreement 6h {{scorer}} ({{judge_model}})'),
       T('otel_scorers:canary_agreement:ratio7d{job=~"$service",scorer=~"$scorer"}', 'agreement 7d {{scorer}} ({{judge_model}})'),
       T('otel_scorers:canary_tnr:ratio6h{job=~"$service",scorer=~"$scorer"}', 'TNR 6h {{scorer}} ({{judge_model}})')], unit='percentunit', min=0, max=1, table_legend=True),
]


def _jaeger_search(panel: P) -> str:
    """The Jaeger search of the failing runs behind one series of ``panel`` (its job, agent):
    the JSON of the tag map percent-encoded around Grafana's own (encoded) label values."""
    assert panel.failing is not None
    agent = "${__field.labels.agent:percentencode}"
    if panel.failing == "tool":
        tags = (_q('{"gen_ai.tool.name":"') + "${__field.labels.tool:percentencode}"
                + _q('","error":"true"}'))
    else:
        name = ("${__field.labels.scorer:percentencode}" if panel.failing == "scorer"
                else _q(panel.failing))
        tags = (_q('{"gen_ai.evaluation.name":"') + name
                + _q('","gen_ai.evaluation.score.label":"fail","gen_ai.agent.name":"') + agent
                + _q('"}'))
    return ("${jaeger}/search?service=${__field.labels.job:percentencode}&lookback=6h"
            "&limit=50&tags=" + tags)


def _q(text: str) -> str:
    return urllib.parse.quote(text, safe="")


def _target(ref: str, query: T) -> prometheus.Dataquery:
    target = (prometheus.Dataquery().ref_id(ref).datasource(PROMETHEUS).expr(query.expr)
              .legend_format(query.legend))
    if query.format:
        target = target.format(query.format)  # type: ignore[arg-type]
    if query.instant:
        target = target.instant()
    if query.exemplar:
        target = target.exemplar(True)
    return target


def _panel(panel: P) -> Any:
    x, y, w, h = panel.pos
    kind = {"timeseries": timeseries.Panel, "heatmap": heatmap.Panel,
            "bargauge": bargauge.Panel}[panel.type]
    built = (kind().id(panel.id).title(panel.title).description(panel.description)
             .datasource(PROMETHEUS).grid_pos(GridPos(x=x, y=y, w=w, h=h)))
    for index, query in enumerate(panel.targets):
        built = built.with_target(_target("ABCDEFGH"[index], query))
    if panel.unit is not None:
        built = built.unit(panel.unit)
    if panel.min is not None:
        built = built.min(panel.min)
    if panel.max is not None:
        built = built.max(panel.max)
    if panel.type == "heatmap":
        built = (built.calculate(False).cell_gap(1)
                 .color(heatmap.HeatmapColorOptions().scheme("RdYlGn").mode("scheme")  # type: ignore[arg-type]
                        .fill("dark-orange").exponent(0.5).steps(64))
                 .show_tooltip().show_legend()
                 .y_axis(heatmap.YAxisConfig().unit("percentunit")))
    if panel.type == "bargauge":
        built = (built.orientation("horizontal").display_mode("gradient")  # type: ignore[arg-type]
                 .reduce_options(common.ReduceDataOptions().calcs(["lastNotNull"])))
    if panel.table_legend:
        built = (built.legend(common.VizLegendOptions().display_mode(LegendDisplayMode.TABLE)
                              .placement(LegendPlacement.BOTTOM).show_legend(True))
                 .tooltip(common.VizTooltipOptions().mode(TooltipDisplayMode.MULTI)))
    if panel.failing is not None:
        built = built.data_links([
            dash.DashboardLink("Failing runs of ${__field.labels.agent} in Jaeger")
            .url(_jaeger_search(panel)).target_blank(True)])
    return built


def _variable(name: str, query: str) -> dash.QueryVariable:
    return (dash.QueryVariable(name).label(name).datasource(PROMETHEUS)
            .query({"query": query, "refId": f"{name}-var"})
            .include_all(True).all_value(".*").multi(True)
            .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED).sort(VariableSort.ALPHABETICAL_ASC))


def _link(title: str, url: str, tooltip: str | None = None) -> dash.DashboardLink:
    link = (dash.DashboardLink(title).type(DashboardLinkType.LINK).url(url)
            .target_blank(True).icon("external link"))
    return link.tooltip(tooltip) if tooltip else link


def build() -> dict[str, Any]:
    """The dashboard as Grafana's JSON model."""
    board = (dash.Dashboard("otel-scorers: agent quality").uid("otel-scorers")
             .description("Live quality of AI-agent runs judged by otel-scorers (rubric, "
                          "prompt alignment and the agent scorers). Metrics are recorded when "
                          "a result is made: for the scorers in the batch lane, when their "
                          "batch comes back, hours after the runs.")
             .tags(["otel-scorers", "llm", "evaluation"]).timezone("browser").editable()
             .time("now-6h", "now").refresh("30s")
             .with_variable(_variable("service",
                                      "label_values(otel_scorers_decisions_total, job)"))
             .with_variable(_variable("agent", 'label_values(otel_scorers_evaluations_total'
                                      '{job=~"$service"}, agent)'))
             .with_variable(_variable("scorer", 'label_values(otel_scorers_decisions_total'
                                      '{job=~"$service"}, scorer)'))
             .with_variable(dash.ConstantVariable("jaeger").value(JAEGER_UI))
             .links([
                 _link("Failing runs in Jaeger", "${jaeger}/search?operation=gen_ai.evaluation"
                       "%20rubric&tags=%7B%22gen_ai.evaluation.score.label%22%3A%22fail%22%7D"
                       "&limit=50", "Evaluation spans with label fail; open one to see the "
                       "evaluated agent span and each criterion's reason"),
                 _link("Poorly aligned runs in Jaeger", "${jaeger}/search?operation="
                       "gen_ai.evaluation%20prompt_alignment&tags=%7B%22gen_ai.evaluation."
                       "score.label%22%3A%22poor%22%7D&limit=50"),
                 _link("Evaluation spans (Explore)", "/explore?left=%7B%22datasource%22%3A%22"
                       "otel-scorers-jaeger%22%2C%22queries%22%3A%5B%7B%22refId%22%3A%22A%22"
                       "%2C%22queryType%22%3A%22search%22%2C%22operation%22%3A%22"
                       "gen_ai.evaluation%20rubric%22%7D%5D%7D")]))
    board = board.annotation(dash.AnnotationQuery().name("Version changes")
                             .datasource(PROMETHEUS).enable(True).icon_color("purple")
                             .expr(VERSION_CHANGES))
    for item in LAYOUT:
        if isinstance(item, Row):
            board = board.with_row(dash.Row(item.title).id(item.id)
                                   .grid_pos(GridPos(x=0, y=item.y, w=24, h=1)))
        else:
            board = board.with_panel(_panel(item))
    model: dict[str, Any] = json.loads(json.dumps(board.build(), cls=JSONEncoder))
    for annotation in model["annotations"]["list"]:  # what the SDK has no builder for
        if annotation.get("name") == "Version changes":
            annotation.update(step="1m", titleFormat="{{agent}}: version {{version}}",
                              textFormat="First evaluations of version {{version}} of "
                              "{{agent}} ({{job}})", tagKeys="job,agent,version")
    for panel in model["panels"]:  # Grafana reads no options as {}, not null
        if panel.get("options") is None:
            panel["options"] = {}
    return model


def main() -> None:
    sys.stdout.write(json.dumps(build(), indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
