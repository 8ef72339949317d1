"""What a live alert test needs before its application starts: the shipped rules with timings
a test can wait for, and a reference week of history in Prometheus's storage.

The drop alerts compare the latest runs with the week that ended a day ago, so a test cannot
make that week live: it is written as OpenMetrics and turned into TSDB blocks by ``promtool
tsdb create-blocks-from openmetrics`` in the data directory Prometheus then starts on, as a
user backfills history. The rules are the generator's (``collector-config/prometheus/
rules.py``) with only ``for``, ``keep_firing_for`` and the group intervals shortened, and the two
link settings set as a user sets them: the statistics are the shipped ones."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from tests.binaries import CONFIG

#: Minutes between two history samples.
STEP_S = 300


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "otel_scorers_rules", CONFIG / "prometheus" / "rules.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["otel_scorers_rules"] = module  # (dataclasses look their module up)
    spec.loader.exec_module(module)
    return module


def short_rules(work: Path, jaeger_ui: str, runbook: str | None = None, *,
                interval: str = "2s") -> Path:
    """The shipped rules, notifying at once (``for: 0s``), evaluated every ``interval``."""
    rules = generator()
    text = rules.HEADER + yaml.dump(
        rules.rules(for_="0s", keep="1m", interval=interval, reference_interval=interval),
        Dumper=rules._Dumper, sort_keys=False, width=1000)
    shipped = (CONFIG / "prometheus" / "otel-scorers.rules.yml").read_text()
    assert yaml.safe_load(shipped) == rules.rules(), "the shipped rules are not the generator's"
    links = [('jaeger: http://localhost:16686', f"jaeger: {jaeger_ui}")]
    if runbook is not None:
        links.append(("runbook: http://localhost:8080/docs/runbook.md", f"runbook: {runbook}"))
    for long, short in links:
        assert long in text, long
        text = text.replace(long, short)
    path = work / "rules.yml"
    path.write_text(text)
    return path


def backfill(work: Path, series: list[tuple[str, dict[str, str], float]], *,
             days: float = 8.0) -> Path:
    """Counters (name, labels, increase every 5 minutes) from ``days`` ago to 23 hours ago,
    written into ``work / "prom-data"`` (the directory ``tests.binaries.prometheus`` uses)."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool is missing: `make test` installs it (apt-get install prometheus)")
    end = int(time.time()) - 23 * 3600
    start = end - int(days * 86400)
    lines: list[str] = []
    families: dict[str, list[tuple[str, dict[str, str], float]]] = {}
    for name, labels, per_step in series:  # a family's series together, under one TYPE
        families.setdefault(name.removesuffix("_total"), []).append((name, labels, per_step))
    for base, members in families.items():
        lines.append(f"# TYPE {base} counter")
        for name, labels, per_step in members:
            lines += _samples(name, labels, per_step, start, end)
    lines.append("# EOF")
    source = work / "history.om"
    source.write_text("\n".join(lines) + "\n")
    data = work / "prom-data"
    data.mkdir(exist_ok=True)
    result = subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics",
                             str(source), str(data)], capture_output=True, text=True,
                            timeout=300, check=False)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return data


def _samples(name: str, labels: dict[str, str], per_step: float, start: int,
             end: int) -> list[str]:
    inner = ",".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
    out, value = [], 0.0
    for stamp in range(start, end + 1, STEP_S):
        out.append(f"{name}{{{inner}}} {value:.10g} {stamp}")
        value += per_step
    return out
