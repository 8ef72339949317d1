"""Labelled cases from ``rescore`` output plus a ``corrected`` column.

``otel-scorers rescore traces.jsonl --include-run -o judged.jsonl`` writes each judged run with
the judge's verdicts. Add a ``corrected`` key to the lines you have checked (any editor, or
``jq``) and pass the file to ``otel-scorers calibrate --cases judged.jsonl``:

- rubric lines: ``true`` (the judge was right), a list of booleans (one per criterion, in order),
  or an object of criterion id or description -> boolean (criteria not named keep the judge's
  verdict);
- prompt-alignment lines: ``true``, a number (the right score divided by the scale, 0..1), or
  ``{"score": number}``.

Lines without ``corrected`` are left out (counted); a line without ``run`` (``rescore`` without
``--include-run``) or with an unreadable correction is a :class:`ConfigError` naming the line.
The case id is ``<trace_id>:<span_id>:<scorer>``, the domain the agent name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from otel_scorers import safe_json
from otel_scorers.errors import ConfigError
from otel_scorers.scorers.cases import LabelledCase, band_of, case_from_record

__all__ = ["case_from_rescore", "is_rescore_line", "read_case_file"]


def is_rescore_line(record: Mapping[str, Any]) -> bool:
    return "span_id" in record and "trace_id" in record and "scorer" in record


def case_from_rescore(record: Mapping[str, Any], *, where: str) -> LabelledCase | None:
    """The labelled case a corrected rescore line stands for (``None`` without a correction)."""
    if "corrected" not in record:
        return None
    run = record.get("run")
    if not isinstance(run, Mapping):
        raise ConfigError(f"{where}: no 'run' on this line: re-run rescore with --include-run")
    analysis = record.get("analyzeStepResult") or {}
    if record.get("error") or record.get("score") is None:
        raise ConfigError(f"{where}: the judge did not score this run; correct a scored line")
    base: dict[str, Any] = {
        "schema": 1, "id": f"{record['trace_id']}:{record['span_id']}:{record['scorer']}",
        "domain": record.get("agent") or "production",
        "run": {key: run.get(key) or ("" if key != "context" else [])
                for key in ("input", "system", "context", "output")},
        "rationale": str(record.get("note") or "corrected from rescore output"),
        "source": "rescore"}
    corrected = record["corrected"]
    try:
        if "criteria" in analysis:
            return LabelledCase.model_validate({**base, **_rubric(analysis["criteria"],
                                                                  corrected)})
        if "intentAlignment" in analysis:
            scale = float(record.get("scale") or 1.0)
            return LabelledCase.model_validate({**base, **_alignment(
                float(record["score"]) / scale, corrected, record.get("evaluationMode"))})
    except (ValueError, TypeError, KeyError) as exc:
        raise ConfigError(f"{where}: unreadable correction {corrected!r}: {exc}") from None
    raise ConfigError(f"{where}: not a rubric or prompt-alignment result")


def _rubric(criteria: Sequence[Mapping[str, Any]], corrected: Any) -> dict[str, Any]:
    verdicts = [bool(c["satisfied"]) for c in criteria]
    if corrected is True:
        pass
    elif isinstance(corrected, list):
        if len(corrected) != len(verdicts) or not all(isinstance(v, bool) for v in corrected):
            raise ValueError(f"a list of {len(verdicts)} booleans, one per criterion")
        verdicts = list(corrected)
    elif isinstance(corrected, Mapping):
        for key, value in corrected.items():
            matches = [i for i, c in enumerate(criteria) if key in (c.get("id"), c["description"])]
            if not matches or not isinstance(value, bool):
                raise ValueError(f"{key!r} is not a criterion of this line, or not a boolean")
            for index in matches:
                verdicts[index] = value
    else:
        raise ValueError("true, a list of booleans, or {criterion: boolean}")
    gating = [v for v, c in zip(verdicts, criteria, strict=True) if c.get("required", True)]
    label = "pass" if all(gating or verdicts) else "fail"
    return {"scorer": "rubric",
            "options": {"criteria": [{"description": c["description"],
                                      "required": bool(c.get("required", True)),
                                      "id": c.get("id")} for c in criteria]},
            "expected": {"verdicts": verdicts, "label": label}}


def _alignment(judged: float, corrected: Any, mode: Any) -> dict[str, Any]:
    if corrected is True:
        score = judged
    elif isinstance(corrected, Mapping):
        score = float(corrected["score"])
    elif isinstance(corrected, (int, float)) and not isinstance(corrected, bool):
        score = float(corrected)
    else:
        raise ValueError("true, a number 0..1, or {\"score\": number}")
    return {"scorer": "prompt_alignment",
            "options": {"evaluation_mode": mode if mode in ("user", "system", "both")
                        else "both"},
            "expected": {"score": score, "band": band_of(score)}}


def read_case_file(path: str) -> tuple[list[LabelledCase], int]:
    """The cases of a file of labelled cases or of corrected ``rescore`` lines (told apart
    line by line), and how many rescore lines had no correction."""
    from pathlib import Path


    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read cases from {path}: {exc}") from None
    cases: list[LabelledCase] = []
    uncorrected = 0
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}, line {number}"
        try:
            record = safe_json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise ConfigError(f"{where}: not JSON ({exc})") from None
        if isinstance(record, dict) and is_rescore_line(record):
            case = case_from_rescore(record, where=where)
            if case is None:
                uncorrected += 1
            else:
                cases.append(case)
        else:
            cases.append(case_from_record(record, where=where))
    seen: set[str] = set()
    for case in cases:
        if case.id in seen:
            raise ConfigError(f"{path}: case id {case.id!r} appears twice")
        seen.add(case.id)
    return cases, uncorrected
