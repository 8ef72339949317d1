"""The ``calibrate`` report as tables: headline, confusion, domains, criteria, worst cases."""

from __future__ import annotations

from typing import Any

__all__ = ["print_report"]


def _cost(report: dict[str, Any]) -> str:
    """The judging's cost as it is known: a failed call has no price to miss."""
    if report["cost_usd"] is not None:
        return f"${report['cost_usd']:.4f}"
    if report["errors"] >= report["cases"]:
        return "none known (no judgement succeeded)"
    return "unknown (the judge model is not in the price table)"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _num(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _head_rows(report: dict[str, Any]) -> list[tuple[str, str]]:
    rows = [
        ("verdict agreement", f"{_pct(report['verdict_agreement'])} of {report['verdicts']} "
                              "criterion verdicts"),
        ("Cohen's kappa", _num(report["kappa"])),
        ("pass/fail agreement", _pct(report["pass_agreement"])),
        ("alignment MAE (0..1)", f"{_num(report['alignment_mae'])} over "
                                 f"{report['alignment_cases']} cases"),
        ("alignment band hit rate", _pct(report["band_hit_rate"])),
        ("dimension band hit rate", _pct(report["dimension_band_hit_rate"])),
        ("errors", f"{report['errors']}" + _types(report["error_types"])),
        ("judge calls", str(report["calls"])),
        ("tokens in / out", f"{report['tokens']['prompt']} / {report['tokens']['completion']}"),
        ("cost", _cost(report)),
        ("latency p50 / p95", f"{_num(report['latency_s']['p50'], 2)} s / "
                              f"{_num(report['latency_s']['p95'], 2)} s"),
    ]
    if report.get("held_apart"):
        rows.append(("held apart (examples)", str(report["held_apart"])))
    return rows


def print_report(report: dict[str, Any], console: Any) -> None:
    from rich.table import Table

    head = Table(title=f"judge {report.get('model')}: {report['cases']} cases")
    head.add_column("measure")
    head.add_column("value", justify="right")
    for row in _head_rows(report):
        head.add_row(*row)
    console.print(head)

    _print_true_rates(report.get("scorers") or {}, console)

    confusion = report["confusion"]
    if confusion["agreement"] is not None:
        table = Table(title="criterion verdicts: labelled (rows) vs judged (columns)")
        for column in ("", "judged satisfied", "judged not satisfied"):
            table.add_column(column, justify="right")
        table.add_row("labelled satisfied", str(confusion["tp"]), str(confusion["fn"]))
        table.add_row("labelled not satisfied", str(confusion["fp"]), str(confusion["tn"]))
        console.print(table)

    domains = Table(title="by domain")
    for column in ("domain", "cases", "errors", "verdict agreement", "kappa", "alignment MAE",
                   "band hits"):
        domains.add_column(column, justify="right" if column != "domain" else "left")
    for name, figures in report["domains"].items():
        domains.add_row(name, str(figures["cases"]), str(figures["errors"]),
                        _pct(figures["verdict_agreement"]), _num(figures["kappa"]),
                        _num(figures["alignment_mae"]), _pct(figures["band_hit_rate"]))
    console.print(domains)

    repeated = {k: v for k, v in report["per_criterion"].items()
                if v["tp"] + v["fn"] + v["fp"] + v["tn"] > 1}
    if repeated:
        criteria = Table(title="criteria judged more than once")
        for column in ("criterion", "tp", "fn", "fp", "tn", "agreement"):
            criteria.add_column(column, justify="right" if column != "criterion" else "left")
        ranked = sorted(repeated.items(), key=lambda item: item[1]["agreement"] or 0)[:15]
        for ident, c in ranked:
            criteria.add_row(ident, str(c["tp"]), str(c["fn"]), str(c["fp"]), str(c["tn"]),
                             _pct(c["agreement"]))
        console.print(criteria)

    if report["worst"]:
        worst = Table(title="worst cases", show_lines=True)
        for column in ("case", "labelled", "judged", "judge's reason", "label rationale"):
            worst.add_column(column, overflow="fold")
        for line in report["worst"]:
            if "error" in line:
                judged = f"error: {line['error']['type']}"
                labelled = "-"
            elif line["scorer"] in ("rubric", "tool_use"):
                labelled = f"{line['expected_label']} {_marks(line['expected'])}"
                judged = f"{line['label']} {_marks(line['judged'])}"
            else:
                labelled = f"{line['expected']:.2f} ({line['expected_band']})"
                judged = "-" if line["judged"] is None else f"{line['judged']:.2f} ({line['band']})"
            worst.add_row(f"{line['id']}\n{line['domain']}", labelled, judged,
                          line["reason"][:240], line["rationale"])
        console.print(worst)

    compare = report.get("compare")
    if compare:
        table = Table(title=f"few-shot examples: before / after ({compare['held_apart']} cases "
                            "held apart)")
        for column in ("measure", "without", "with", "change"):
            table.add_column(column, justify="right" if column != "measure" else "left")
        for key in ("verdict_agreement", "kappa", "alignment_mae", "band_hit_rate"):
            table.add_row(key.replace("_", " "), _num(compare["before"][key]),
                          _num(compare["after"][key]), _num(compare["delta"][key]))
        console.print(table)

    fused = report.get("fused")
    if fused:
        _print_fused(fused, console)


def _interval(rate: dict[str, Any]) -> str:
    if rate["value"] is None:
        return "(no case)"
    return f"{_pct(rate['value'])} [{_pct(rate['low'])}, {_pct(rate['high'])}] of {rate['n']}"


def _print_true_rates(scorers: dict[str, Any], console: Any) -> None:
    """Per scorer: the pass/fail confusion matrix, TPR and TNR with their 95% Wilson
    intervals, and whether the pass rate can be corrected."""
    from rich.table import Table

    if not any(f["pass_confusion"]["agreement"] is not None for f in scorers.values()):
        return
    table = Table(title="true rates of the pass/fail verdict (95% Wilson interval)")
    for column in ("scorer", "labelled pass: judged pass / fail",
                   "labelled fail: judged pass / fail", "TPR", "TNR", "corrected pass rate"):
        table.add_column(column, justify="right")
    for kind, figures in scorers.items():
        confusion, rates = figures["pass_confusion"], figures["true_rates"]
        if confusion["agreement"] is None:
            continue
        correction = ("defined" if rates["correctable"] else
                      "undefined (TPR + TNR <= 1)" if rates["informedness"] is not None
                      else "unknown (needs passing and failing cases)")
        table.add_row(kind, f"{confusion['tp']} / {confusion['fn']}",
                      f"{confusion['fp']} / {confusion['tn']}", _interval(rates["tpr"]),
                      _interval(rates["tnr"]), correction)
    console.print(table)


def _print_fused(fused: dict[str, Any], console: Any) -> None:
    from rich.table import Table

    apart, together, delta = fused["apart"], fused["fused"], fused["delta"]
    table = Table(title="fused judge calls: a call per scorer (apart) / one call (fused)")
    for column in ("measure", "apart", "fused", "change"):
        table.add_column(column, justify="right" if column != "measure" else "left")
    for key in ("verdict_agreement", "kappa", "pass_agreement", "alignment_mae",
                "band_hit_rate", "dimension_band_hit_rate"):
        table.add_row(key.replace("_", " "), _num(apart[key]), _num(together[key]),
                      _num(delta[key]))
    for label, key in (("errors", "errors"), ("companion errors", "companion_errors"),
                       ("judge calls", "calls")):
        table.add_row(label, str(apart[key]), str(together[key]), f"{delta[key]:+d}")
    table.add_row("prompt tokens", str(apart["tokens"]["prompt"]),
                  str(together["tokens"]["prompt"]), f"{delta['prompt_tokens']:+d}")
    table.add_row("cases judged differently", "", str(len(fused["changed"])), "")
    console.print(table)
    if fused["no_loss"]:
        console.print("Fused calls lost nothing on these cases with this judge: "
                      "fuse_judge_calls can be on.")
    else:
        console.print(f"Fused calls did worse on these cases ({', '.join(fused['worse'])}): "
                      "keep fuse_judge_calls off for this judge.")


def _types(error_types: dict[str, int]) -> str:
    if not error_types:
        return ""
    return " (" + ", ".join(f"{kind} {count}" for kind, count in error_types.items()) + ")"


def _marks(verdicts: list[bool]) -> str:
    return "".join("✓" if v else "✗" for v in verdicts)
