"""The digest as markdown (a ticket, a chat message) and as a terminal table (rich)."""

from __future__ import annotations

from typing import Any

__all__ = ["markdown", "terminal"]


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _change(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:+.0f} pts"


def _one_line(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _md_cell(text: str) -> str:
    return _one_line(text).replace("|", "\\|")


def markdown(digest: dict[str, Any]) -> str:
    """The digest as GitHub-flavoured markdown."""
    window = digest["window"]
    lines = [f"### otel-scorers failure digest: {window['start']} to {window['end']}",
             "", f"{digest['evaluations']} evaluations read from {digest['source']}.", ""]
    if digest["rates"]:
        lines += ["| agent | scorer | runs | failures | pass rate | window before | change |",
                  "|---|---|---:|---:|---:|---:|---:|"]
        lines += [f"| {_md_cell(r['agent'])} | {_md_cell(r['scorer'])} | {r['runs']} | "
                  f"{r['failures']} | {_percent(r['pass_rate'])} | "
                  f"{_percent(r['previous_pass_rate'])} | {_change(r['change'])} |"
                  for r in digest["rates"]]
        lines.append("")
    for group in digest["groups"]:
        what = " · ".join(x for x in (group["agent"], group["scorer"], group["criterion"]) if x)
        lines.append(f"**{_md_cell(what)}**: {group['failures']} failure(s)")
        lines += [f"- {reason['count']}× {_md_cell(reason['text'])}"
                  for reason in group["reasons"]]
        examples = [f"[{e['trace_id'][:12]}]({e['link']})" if e["link"] else
                    f"`{e['trace_id']}`" for e in group["examples"]]
        if examples:
            lines.append(f"- traces: {', '.join(examples)}")
        lines.append("")
    if not digest["groups"]:
        lines += ["No failing evaluation in this window.", ""]
    lines += [f"> note: {_one_line(note, 300)}" for note in digest["notes"]]
    return "\n".join(lines).rstrip() + "\n"


def terminal(digest: dict[str, Any]) -> None:
    """The digest on the terminal (rich tables; no width assumed)."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    window = digest["window"]
    console.print(f"[bold]otel-scorers failure digest[/bold]: {window['start']} to "
                  f"{window['end']} ({digest['evaluations']} evaluations from "
                  f"{digest['source']})", highlight=False)
    rates = Table("agent", "scorer", "runs", "failures", "pass rate", "window before",
                  "change", title="Pass rates")
    for r in digest["rates"]:
        rates.add_row(r["agent"], r["scorer"], str(r["runs"]), str(r["failures"]),
                      _percent(r["pass_rate"]), _percent(r["previous_pass_rate"]),
                      _change(r["change"]))
    console.print(rates)
    groups = Table("agent · scorer · criterion", "failures", "most frequent reasons",
                   "example traces", title="Failures", show_lines=True)
    for g in digest["groups"]:
        groups.add_row(" · ".join(x for x in (g["agent"], g["scorer"], g["criterion"]) if x),
                       str(g["failures"]),
                       "\n".join(f"{r['count']}× {_one_line(r['text'], 120)}"
                                 for r in g["reasons"]),
                       "\n".join(e["link"] or e["trace_id"] for e in g["examples"]))
    console.print(groups if digest["groups"] else "No failing evaluation in this window.")
    for note in digest["notes"]:
        console.print(f"note: {_one_line(note, 300)}", markup=False, highlight=False)
