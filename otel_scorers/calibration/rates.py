"""A judge's known true rates: saved by ``calibrate --save``, read by the live pipeline.

LLM judges are agreeable: they pass most good runs (a high true positive rate, TPR) and many
bad ones too (a low true negative rate, TNR). The raw pass rate a dashboard plots is then
``TPR * p + (1 - TNR) * (1 - p)`` for a true pass rate ``p``: above the truth, and a drop in it
damped. With TPR and TNR known, the Rogan-Gladen estimator inverts it::

    corrected = (observed + TNR - 1) / (TPR + TNR - 1), clamped to [0, 1]

defined only when ``TPR + TNR > 1`` (the judge tells passes from failures better than a coin;
at or below 1 no correction exists and none is given). The shipped recording rules compute it
in Prometheus from the gauges the pipeline exports (``otel_scorers.judge.true_positive_rate``,
``otel_scorers.judge.true_negative_rate``) beside the raw pass rate.

The file (JSON, ``format: otel-scorers-judge-rates/1``) holds, per scorer type, the rates
measured on labelled cases, their 95% Wilson intervals, the case counts, and the judge model
they were measured with: the pipeline exports a scorer's rates only when its judge is that
model (rates of another judge would correct with the wrong numbers) and says once when not.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from otel_scorers.errors import ConfigError

__all__ = ["FORMAT", "KnownRates", "corrected_pass_rate", "load_rates", "rates_document",
           "save_rates"]

FORMAT = "otel-scorers-judge-rates/1"
#: A rates file is small (a few lines per scorer); anything bigger is not one.
MAX_FILE_BYTES = 1 << 20


@dataclass(frozen=True)
class KnownRates:
    """One scorer's measured rates (values in [0, 1]) and what they were measured on."""

    scorer: str
    model: str
    tpr: float
    tnr: float
    passing: int
    failing: int
    source: str = "calibrate"

    @property
    def correctable(self) -> bool:
        return self.tpr + self.tnr > 1


def corrected_pass_rate(observed: float, tpr: float, tnr: float) -> float | None:
    """The Rogan-Gladen corrected pass rate, clamped to [0, 1]; ``None`` when
    ``tpr + tnr <= 1`` (undefined: the judge does not tell passes from failures)."""
    informedness = tpr + tnr - 1
    if informedness <= 0:
        return None
    return min(1.0, max(0.0, (observed + tnr - 1) / informedness))


def rates_document(report: Mapping[str, Any]) -> dict[str, Any]:
    """The file's content for a ``calibrate`` report: every scorer type whose cases had both
    passing and failing labels judged (the others are listed under ``not_measured``)."""
    scorers: dict[str, Any] = {}
    missing: dict[str, str] = {}
    for kind, figures in (report.get("scorers") or {}).items():
        rates = figures["true_rates"]
        tpr, tnr = rates["tpr"], rates["tnr"]
        if tpr["value"] is None or tnr["value"] is None:
            missing[kind] = ("no labelled-passing case judged" if tpr["value"] is None
                             else "no labelled-failing case judged")
            continue
        scorers[kind] = {"tpr": tpr["value"], "tnr": tnr["value"],
                         "tpr_interval": [tpr["low"], tpr["high"]],
                         "tnr_interval": [tnr["low"], tnr["high"]],
                         "passing_cases": tpr["n"], "failing_cases": tnr["n"],
                         "correctable": rates["correctable"]}
    return {"format": FORMAT, "model": report.get("model"),
            "measured_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "cases": report.get("cases"), "scorers": scorers, "not_measured": missing}


def save_rates(report: Mapping[str, Any], path: str | Path) -> dict[str, Any]:
    """Write :func:`rates_document` of ``report`` to ``path``; returns it."""
    document = rates_document(report)
    Path(path).write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n",
                          encoding="utf-8")
    return document


def load_rates(path: str | Path) -> dict[str, KnownRates]:
    """The rates in the file at ``path``, by scorer type; a :class:`ConfigError` saying what
    is wrong with a file that is not one."""
    file = Path(path)
    try:
        if file.stat().st_size > MAX_FILE_BYTES:
            raise ConfigError(f"judge_rates {file}: larger than a rates file can be")
        document = json.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"judge_rates {file}: cannot be read ({exc.strerror})") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"judge_rates {file}: not JSON ({exc})") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ConfigError(f"judge_rates {file}: not a rates file (format {FORMAT!r}); write "
                          "one with otel-scorers calibrate --save FILE")
    model = document.get("model")
    scorers = document.get("scorers")
    if not isinstance(model, str) or not model or not isinstance(scorers, dict):
        raise ConfigError(f"judge_rates {file}: no judge model or no scorers")
    known: dict[str, KnownRates] = {}
    for kind, entry in scorers.items():
        if not isinstance(kind, str) or not isinstance(entry, dict):
            raise ConfigError(f"judge_rates {file}: scorer entries are objects by name")
        values: list[Any] = [entry.get(key) for key in ("tpr", "tnr")]
        counts = [entry.get(key, 0) for key in ("passing_cases", "failing_cases")]
        if not all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
                   and 0 <= v <= 1 for v in values) \
                or not all(isinstance(c, int) and c >= 0 for c in counts):
            raise ConfigError(f"judge_rates {file}: scorer {kind[:64]!r} needs tpr and tnr "
                              "between 0 and 1 and case counts")
        known[kind] = KnownRates(kind[:128], model[:256], float(values[0]), float(values[1]),
                                 counts[0], counts[1])
    return known
