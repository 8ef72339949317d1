"""The pages, benchmarked: how often the drop alerts page on noise, and how soon they page on a
real drop, at 10 to 10,000 evaluations an hour, for the shipped rules and, in the same run, the
rules of another commit (by default the release before the volume-sized alerts).

    .venv/bin/python bench/alerts.py [--quick] [--replicates N] [--base REV] [--jobs N]

Synthetic streams of the raw counter the library emits (``otel_scorers_evaluations_total``,
``passed`` true or false; the score histogram for the alignment cases), one sample a minute:
Poisson arrivals, binomial passes (scores: a clipped normal around the mean), 9 days of history,
then a test week. The rules are evaluated by Prometheus's own engine: ``bench/promreplay``, a
small Go program built against the Prometheus release ``make test`` installs (v2.42), runs each
rule group minute by minute as ``promtool test rules`` does (its rules and promql packages; the
``for``, ``keep_firing_for`` and ``ALERTS`` of the real rule manager), and prints every alert
that starts or stops firing. Nothing here re-implements a rule.

Printed for each case (new rules, then the base's): false pages a week (a stable rate; pages of
the quality alerts on that stream), and for a drop: the minutes until it pages (median, then
every replicate), whether it still pages 6 hours in, the share of the drop's time it was open
after it first paged, how many times it opened during the drop (1 is one page), and the minutes
to resolve once quality is back. Drops last 3 days (past the day the reference ends before the
drop, so a reference that followed the drop would let the page go); the slow drift reaches its
10 points over a day and stays there.

Go (1.26, on the project's machines) builds the replayer once into .bench/ (about a minute,
the Prometheus modules from the module proxy). A whole run takes about an hour of CPU on one
core (--jobs splits it); --quick (one replicate a case) about a tenth of that.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
REPLAYER = ROOT / "bench" / "promreplay"
RULES = ROOT / "collector-config" / "prometheus" / "otel-scorers.rules.yml"
RULES_PATH = "collector-config/prometheus/otel-scorers.rules.yml"
#: The rules of today, before the volume-sized alerts (the release the issue measured).
BASE = "9b40247"
DAY = 1440
HISTORY_DAYS = 9
TEST_DAYS = 7
START = 1767225600  # 2026-01-01T00:00:00Z: minute 0 (any midnight)
QUALITY = ("OtelScorersRubricPassRateDrop", "OtelScorersAlignmentDrop",
           "OtelScorersAlignmentLow", "OtelScorersPassRateDrop")
VOLUMES = (10, 100, 1_000, 10_000)
STABLE = (0.6, 0.85, 0.95)
DROP_DAYS = 3


@dataclass
class Case:
    """One stream's story: a stable rate, or a drop (``drop`` points, ``drift``: over a day)."""

    kind: str  # "rubric" or "alignment"
    volume: int
    rate: float
    drop: float = 0.0
    drift: bool = False
    replicate: int = 0
    start: int = 0  # the drop's first minute
    seed: int = 0
    agent: str = field(default="")

    @property
    def name(self) -> str:
        what = "pass rate" if self.kind == "rubric" else "mean alignment"
        if not self.drop:
            return f"{what} {self.rate:.2f} stable"
        how = "drifts" if self.drift else "drops"
        return f"{what} {self.rate:.2f} {how} {round(self.drop * 100)} points"


def cases(replicates: int, seed: int) -> list[Case]:
    out: list[Case] = []
    rng = random.Random(seed)
    test = HISTORY_DAYS * DAY

    def add(case: Case, reps: int) -> None:
        for r in range(reps):
            c = Case(**{**case.__dict__, "replicate": r, "seed": rng.randrange(1 << 62)})
            c.agent = f"a{len(out)}"
            if c.drop:  # at a random minute of the test week's second day
                c.start = test + DAY + rng.randrange(DAY)
            out.append(c)

    for volume in VOLUMES:
        for rate in STABLE:
            add(Case("rubric", volume, rate), replicates)
    drop_reps = max(1, min(replicates, 3))
    for volume in VOLUMES:
        for drop in (0.05, 0.10, 0.20):
            add(Case("rubric", volume, 0.85, drop), drop_reps)
        add(Case("rubric", volume, 0.85, 0.10, drift=True), drop_reps)
        for rate in (0.6, 0.95):
            add(Case("rubric", volume, rate, 0.10), drop_reps)
    for volume in VOLUMES:  # the mean scores: the same test on the scores' spread
        add(Case("alignment", volume, 0.85), max(1, replicates // 2))
        add(Case("alignment", volume, 0.85, 0.10), drop_reps)
    return out


def stream(case: Case) -> dict[str, Any]:
    minutes = (HISTORY_DAYS + TEST_DAYS) * DAY
    if case.drift:
        p = [[0, case.rate], [case.start, case.rate], [case.start + DAY, case.rate - case.drop],
             [case.start + DROP_DAYS * DAY, case.rate - case.drop],
             [case.start + DROP_DAYS * DAY + 0.001, case.rate]]
    elif case.drop:
        p = [[0, case.rate], [case.start - 0.001, case.rate], [case.start, case.rate - case.drop],
             [case.start + DROP_DAYS * DAY - 0.001, case.rate - case.drop],
             [case.start + DROP_DAYS * DAY, case.rate]]
    else:
        p = [[0, case.rate], [minutes, case.rate]]
    labels = {"job": "bench", "agent": case.agent, "judge_model": "openai/gpt-5-mini",
              "version": "1.0.0", "label": "none", "judge_fingerprint": "f"}
    if case.kind == "alignment":
        return {"kind": "score", "base": "otel_scorers_evaluation_score",
                "labels": {**labels, "scorer": "prompt_alignment"},
                "buckets": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0],
                "rate": [[0, case.volume]], "p": p, "sd": 0.15, "seed": case.seed}
    base = {"__name__": "otel_scorers_evaluations_total", **labels, "scorer": "rubric",
            "truncated": "false"}
    return {"kind": "binomial", "good": {**base, "passed": "true"},
            "bad": {**base, "passed": "false"}, "rate": [[0, case.volume]], "p": p,
            "seed": case.seed}


def build_replayer() -> Path:
    """``bench/promreplay`` built once into .bench/ (rebuilt when its source changes)."""
    digest = hashlib.sha256()
    for name in ("main.go", "labels.go", "go.mod", "go.sum"):
        digest.update((REPLAYER / name).read_bytes())
    binary = ROOT / ".bench" / f"promreplay-{digest.hexdigest()[:12]}"
    if not binary.exists():
        binary.parent.mkdir(exist_ok=True)
        print(f">>> building {binary.relative_to(ROOT)} (Go, once)", file=sys.stderr)
        subprocess.run(["go", "build", "-o", str(binary), "."], cwd=REPLAYER, check=True)
    return binary


def base_rules(rev: str, work: Path) -> Path:
    commit = subprocess.run(["git", "rev-parse", "--verify", "--end-of-options",
                             f"{rev}^{{commit}}"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.strip()
    text = subprocess.run(["git", "show", f"{commit}:{RULES_PATH}"], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout
    path = work / f"base-{commit[:10]}.rules.yml"
    path.write_text(text)
    return path


def replay(binary: Path, shard: list[Case], files: list[Path], work: Path,
           index: int) -> list[dict[str, Any]]:
    spec = {"start": START, "minutes": (HISTORY_DAYS + TEST_DAYS) * DAY,
            "eval_from": (HISTORY_DAYS - 1) * DAY, "slow_from": DAY,
            "streams": [stream(c) for c in shard]}
    path = work / f"spec-{index}.json"
    path.write_text(json.dumps(spec))
    args = [str(binary), "-spec", str(path)]
    for file in files:
        args += ["-rules", str(file)]
    result = subprocess.run(args, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"promreplay failed: {result.stderr[-2000:]}")
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def episodes(events: list[dict[str, Any]], agent: str, rules: str,
             alerts: tuple[str, ...]) -> list[tuple[int, int | None]]:
    """(opened, closed) minutes of the quality alerts on ``agent``'s stream."""
    spans: list[tuple[int, int | None]] = []
    open_at: dict[str, int] = {}
    for e in events:
        if e["rules"] != rules or e["labels"].get("agent") != agent or e["alert"] not in alerts:
            continue
        key = e["alert"]
        if e["state"] == "firing":
            open_at[key] = e["m"]
        elif key in open_at:
            spans.append((open_at.pop(key), e["m"]))
    spans += [(start, None) for start in open_at.values()]
    return sorted(spans)


def summarize(case_list: list[Case], events: list[dict[str, Any]], files: list[Path]) -> str:
    test, end = HISTORY_DAYS * DAY, (HISTORY_DAYS + TEST_DAYS) * DAY
    lines = []
    groups: dict[tuple[str, int], list[Case]] = {}
    for c in case_list:
        groups.setdefault((c.name, c.volume), []).append(c)
    for file, label in zip(files, ("new", "base"), strict=True):
        lines.append(f"\n== {label} rules: {file.name} ==")
        lines.append(f"{'case':44} {'evals/h':>8}  result")
        for (name, volume), group in groups.items():
            spans = [episodes(events, c.agent, str(file), QUALITY) for c in group]
            if not group[0].drop:
                pages = sum(1 for s in spans for start, _ in s if start >= test)
                weeks = len(group) * TEST_DAYS / 7
                lines.append(f"{name:44} {volume:>8}  false pages a week: "
                             f"{pages / weeks:.3f} ({pages} in {weeks:.0f} weeks; "
                             f"{pages / weeks * 13:.2f} a quarter)")
                continue
            firsts, six, opens, flaps, resolves, early = [], [], [], [], [], 0
            for c, s in zip(group, spans, strict=True):
                early += sum(1 for start, _ in s if test <= start < c.start)
                during = [(a, b) for a, b in s if c.start <= a < c.start + DROP_DAYS * DAY]
                if not during:
                    firsts.append(None)
                    continue
                first = during[0][0]
                firsts.append(first - c.start)
                stop = c.start + DROP_DAYS * DAY
                covered = sum(min(b if b is not None else end, stop) - max(a, first)
                              for a, b in s if a < stop and (b is None or b > first))
                opens.append(covered / max(1, stop - first))
                six.append(any(a <= c.start + 360 and (b is None or b > c.start + 360)
                               for a, b in s))
                flaps.append(len(during))
                after = [b for a, b in s if a < stop and (b is None or b >= stop)]
                resolves.append(None if not after or after[-1] is None else after[-1] - stop)
            found = [f for f in firsts if f is not None]
            median = f"{statistics.median(found):.0f}" if found else "never"
            lines.append(
                f"{name:44} {volume:>8}  minutes to page: {median} "
                f"({', '.join('never' if f is None else str(f) for f in firsts)}); "
                f"paging 6 h in: {sum(six)}/{len(group)}; open after paging: "
                f"{min(opens) if opens else 0:.0%} (least); pages during it: "
                f"{', '.join(map(str, flaps)) or '0'}; resolved after: "
                f"{', '.join('open' if r is None else f'{r} min' for r in resolves) or '-'}"
                + (f"; false pages before it: {early}" if early else ""))
    return "\n".join(lines)


def sensitivity() -> str:
    """The smallest drop each kind of alert sees, from the shipped rules' own thresholds: at
    the expected counts, the drop whose test reaches a window's threshold (a page half the
    time), the best window within an hour and within a day, and never under the minimum drop.
    The table of docs/runbook.md."""
    import importlib.util
    import math

    spec = importlib.util.spec_from_file_location(
        "otel_rules", ROOT / "collector-config" / "prometheus" / "rules.py")
    assert spec is not None and spec.loader is not None
    rules = importlib.util.module_from_spec(spec)
    sys.modules["otel_rules"] = rules  # (dataclasses look their module up)
    spec.loader.exec_module(rules)

    def kl(a: float, b: float) -> float:
        return a * math.log(a / b) + (1 - a) * math.log((1 - a) / (1 - b))

    def seen(volume: float, p0: float, dispersion: float, within_s: int) -> float:
        best = 1.0
        for window, threshold in rules.THRESHOLDS.items():
            seconds = rules.WINDOWS[window]
            if seconds > within_s:
                continue
            if dispersion < 1 and volume * seconds / 3600 < rules.MIN_MEAN_COUNT:
                continue  # a mean is tested only past a few scores in the window
            n = volume * seconds / 3600 / dispersion
            n_ref = volume * 7 * 24 / dispersion
            n_eff = n * n_ref / (n + n_ref)
            low, high = 0.0, p0 - 1e-6
            for _ in range(60):  # the smallest drop d whose test reaches the threshold
                d = (low + high) / 2
                p = min(1 - 1e-9, max(1e-9, p0 - d + 0.5 / n))
                sigma = math.sqrt(max(0.0, 2 * n_eff * kl(p, p0))) if p < p0 else 0.0
                low, high = (low, d) if sigma >= threshold else (d, high)
            best = min(best, high)
        return max(best, rules.MIN_DROP)

    rows = [("pass rate at 85% (rubric, pass rate, goal completion)", 0.85, 1.0),
            ("pass rate at 95%; a criterion or tool failing 5% of the time", 0.95, 1.0),
            ("pass rate at 60%", 0.60, 1.0),
            ("mean score 0.85, spread 0.15 (alignment, faithfulness, sessions)", 0.85,
             0.15 ** 2 / (0.85 * 0.15))]
    out = ["| signal | within | 10/h | 100/h | 1,000/h | 10,000/h |", "|---|---|---|---|---|---|"]
    for label, p0, dispersion in rows:
        for within, seconds in (("an hour", 3600), ("a day", 86400)):
            cells = []
            for volume in VOLUMES:
                d = seen(volume, p0, dispersion, seconds)
                cells.append("none" if d >= p0 - 1e-3 else f"{d * 100:.0f} points")
            out.append(f"| {label} | {within} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one replicate a case")
    parser.add_argument("--replicates", type=int, default=13,
                        help="stable streams a case (13: a quarter of weeks)")
    parser.add_argument("--base", default=BASE, help="the commit whose rules to compare with")
    parser.add_argument("--jobs", type=int, default=2, help="replayer processes")
    parser.add_argument("--seed", type=int, default=52)
    parser.add_argument("--stable-only", action="store_true",
                        help="only the stable streams (the false-page budget), no drops")
    parser.add_argument("--sensitivity", action="store_true",
                        help="print the smallest drop each alert sees (docs/runbook.md), only")
    args = parser.parse_args()
    if args.sensitivity:
        print(sensitivity())
        return
    replicates = 1 if args.quick else args.replicates
    binary = build_replayer()
    case_list = cases(replicates, args.seed)
    if args.stable_only:
        case_list = [c for c in case_list if not c.drop]
    with tempfile.TemporaryDirectory(prefix="otel-scorers-alerts-") as tmp:
        work = Path(tmp)
        files = [work / "new.rules.yml", base_rules(args.base, work)]
        files[0].write_text(RULES.read_text())
        jobs = max(1, args.jobs)
        shards = [case_list[i::jobs] for i in range(jobs)]
        print(f"alerts bench: {len(case_list)} streams, {jobs} replayers, rules "
              f"{RULES_PATH} and {args.base}'s", file=sys.stderr)
        events: list[dict[str, Any]] = []
        with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
            for found in pool.map(lambda i: replay(binary, shards[i], files, work, i),
                                  range(jobs)):
                events += found
        print(summarize(case_list, events, files))


if __name__ == "__main__":
    os.environ.setdefault("GOFLAGS", "-mod=mod")
    main()
