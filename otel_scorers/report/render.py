"""The digest as markdown (a ticket, a chat message) and as a terminal table (rich).

Everything in a digest but its numbers was read from a file or a backend: both renderers show
it as text (:mod:`otel_scorers.report.text`): no escape sequence reaches the terminal, no rich
markup is read in it, no markdown in it renders. Trace ids are printed whole, on lines of their
own, so they can be pasted into Jaeger's search whatever the terminal's width."""

from __future__ import annotations

from typing import Any

from otel_scorers.report.text import markdown_text, one_line, plain

__all__ = ["markdown", "terminal"]


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _change(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:+.0f} pts"


def _what(group: dict[str, Any]) -> str:
    return " · ".join(x for x in (group["agent"], group["scorer"], group["criterion"]) if x)


def _empty(digest: dict[str, Any]) -> str:
    if not digest["evaluations"]:
        return "No evaluation in this window (see the notes for what was read)." \
            if digest["notes"] else "No evaluation in this window."
    return "No failing evaluation in this window."


def _echoed(count: int) -> str:
    return (f"{count} reason(s) only repeat the judge's own instructions (not shown: such a "
            "judge is not judging; measure it with `otel-scorers calibrate`)")


def _example(example: dict[str, Any]) -> str:
    """A trace in markdown: a link only from a real trace id (the link is ours: built from
    it), any other id as escaped text."""
    trace_id = str(example["trace_id"])
    if example["link"]:
        return f"[{trace_id}]({example['link']})"
    return f"`{trace_id}`" if trace_id.isalnum() else markdown_text(trace_id, 80)


def markdown(digest: dict[str, Any]) -> str:
    """The digest as GitHub-flavoured markdown."""
    window = digest["window"]
    lines = [f"### otel-scorers failure digest: {window['start']} to {window['end']}",
             "", f"{digest['evaluations']} evaluations read from {digest['source']}.", ""]
    if digest["rates"]:
        lines += ["| agent | scorer | runs | failures | pass rate | window before | change |",
                  "|---|---|---:|---:|---:|---:|---:|"]
        lines += [f"| {markdown_text(r['agent'])} | {markdown_text(r['scorer'])} | "
                  f"{r['runs']} | {r['failures']} | {_percent(r['pass_rate'])} | "
                  f"{_percent(r['previous_pass_rate'])} | {_change(r['change'])} |"
                  for r in digest["rates"]]
        lines.append("")
    for group in digest["groups"]:
        lines.append(f"**{markdown_text(_what(group))}**: {group['failures']} failure(s)")
        lines += [f"- {reason['count']}× {markdown_text(reason['text'])}"
                  for reason in group["reasons"]]
        if group.get("echoed"):
            lines.append(f"- {_echoed(group['echoed'])}")
        examples = [_example(e) for e in group["examples"]]
        if examples:
            lines.append(f"- traces: {', '.join(examples)}")
        lines.append("")
    if not digest["groups"]:
        lines += [_empty(digest), ""]
    lines += [f"> note: {markdown_text(note, 300)}" for note in digest["notes"]]
    return "\n".join(lines).rstrip() + "\n"


def terminal(digest: dict[str, Any]) -> None:
    """The digest on the terminal (rich tables of plain text; no width assumed)."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console()
    window = digest["window"]
    header = Text("otel-scorers failure digest", style="bold")
    header.append(f": {window['start']} to {window['end']} ({digest['evaluations']} "
                  f"evaluations from {plain(digest['source'])})")
    console.print(header)
    rates = Table("agent", "scorer", "runs", "failures", "pass rate", "window before",
                  "change", title="Pass rates")
    for r in digest["rates"]:
        rates.add_row(Text(one_line(r["agent"], 80)), Text(one_line(r["scorer"], 80)),
                      str(r["runs"]), str(r["failures"]), _percent(r["pass_rate"]),
                      _percent(r["previous_pass_rate"]), _change(r["change"]))
    console.print(rates)
    groups = Table("#", "agent · scorer · criterion", "failures", "most frequent reasons",
                   title="Failures", show_lines=True)
    for number, g in enumerate(digest["groups"], 1):
        groups.add_row(str(number), Text(one_line(_what(g), 120)), str(g["failures"]),
                       Text("\n".join([f"{r['count']}× {one_line(r['text'], 120)}"
                                       for r in g["reasons"]]
                                      + ([_echoed(g["echoed"])] if g.get("echoed") else []))))
    if digest["groups"]:
        console.print(groups)
        console.print(Text("Example traces", style="bold"))
        for number, g in enumerate(digest["groups"], 1):
            for e in g["examples"]:  # whole, never wrapped or cut: pasteable
                console.print(Text(f"#{number} {one_line(e['link'] or e['trace_id'], 400)}"),
                              soft_wrap=True, crop=False)
    else:
        console.print(Text(_empty(digest)))
    for note in digest["notes"]:
        console.print(Text(f"note: {one_line(note, 300)}"), soft_wrap=True)
