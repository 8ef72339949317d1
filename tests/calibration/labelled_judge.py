"""A scripted judge that answers the labelled cases as labelled (or wrong on purpose), for the
calibration tests: it finds the case a request is about (its response text, scorer kind, mode
and criteria) and answers with the case's labels, optionally flipped or inverted."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

from otel_scorers.calibration.paired import COMPANION_CRITERIA
from otel_scorers.scorers.alignment import BOTH_SPLIT, MODE_WEIGHTS
from otel_scorers.scorers.cases import BANDS, LabelledCase
from otel_scorers.scorers.dimensions import DIMENSIONS
from otel_scorers.testing import (
    Answer,
    RecordedRequest,
    alignment_answer,
    reply,
    rubric_answer,
)

Flip = Callable[[LabelledCase, int], bool]


_PART = re.compile(r'^PART \d+ \(answer under "part(\d+)"\)$', re.MULTILINE)


def case_of(request: RecordedRequest, cases: Sequence[LabelledCase]) -> LabelledCase:
    text = str(request.messages[-1]["content"])
    found = _cases_in(cases, text, task=text, rubric="BEGIN rubric criteria>>>" in text)
    assert len(found) == 1, [c.id for c in found]
    return found[0]


def fields_of(request: RecordedRequest) -> str:
    """The first user message: the fields (a corrective re-ask comes after it)."""
    return str(next(m["content"] for m in request.messages if m["role"] == "user"))


def parts_of(request: RecordedRequest) -> list[str] | None:
    """A fused call's part blocks (its system prompt, split), or ``None``."""
    pieces = _PART.split(str(request.messages[0]["content"]))
    return pieces[2::2] if len(pieces) > 1 else None


def _cases_in(cases: Sequence[LabelledCase], text: str, *, task: str,
              rubric: bool) -> list[LabelledCase]:
    sides = {side for side, key in (("user", "userAlignment"), ("system", "systemCompliance"))
             if f'"{key}"' in task}
    found = []
    for case in cases:
        if case.run.output not in text or (case.scorer == "rubric") != rubric:
            continue
        if rubric and not all(c.description in text for c in case.options.criteria):
            continue
        if not rubric and sides != set(_sides(case.mode)):
            continue
        found.append(case)
    return found


def _sides(mode: str) -> tuple[str, ...]:
    return {"user": ("user",), "system": ("system",), "both": ("user", "system")}[mode]


def dimension_values(case: LabelledCase, target: float) -> dict[str, list[float]]:
    """Dimension scores inside the case's bands whose weighted sum is ``target`` (the case's
    consistency check guarantees one exists)."""
    mode = case.mode
    bands = case.expected.dimensions or {}
    slots: list[tuple[str, int, float, float, Decimal]] = []  # side, index, lo, hi, weight
    for side in _sides(mode):
        share = BOTH_SPLIT[side] if mode == "both" else Decimal(1)
        for index, name in enumerate(DIMENSIONS):
            lo, hi = BANDS[getattr(bands[side], name)] if side in bands else (0.0, 1.0)
            hi = hi if hi == 1.0 else hi - 0.001  # bands are half-open but for 1.0
            slots.append((side, index, lo, hi, share * MODE_WEIGHTS[side][name]))
    values = {(side, index): (lo + hi) / 2 for side, index, lo, hi, _ in slots}
    for _ in range(50):
        weighted = sum(float(w) * values[(s, i)] for s, i, _, _, w in slots)
        delta = target - weighted
        if abs(delta) < 1e-6:
            break
        movable = [(s, i, lo, hi, w) for s, i, lo, hi, w in slots
                   if (delta > 0 and values[(s, i)] < hi) or (delta < 0 and values[(s, i)] > lo)]
        total = sum(float(w) for *_, w in movable)
        for s, i, lo, hi, _ in movable:
            values[(s, i)] = min(hi, max(lo, values[(s, i)] + delta / total))
    return {side: [round(values[(side, i)], 6) for i in range(4)] for side in _sides(mode)}


def labelled_responder(cases: Sequence[LabelledCase], *, flip: Flip | None = None,
                       invert_alignment: bool = False,
                       fused_flip: Flip | None = None) -> Callable[[RecordedRequest], Answer]:
    """Answers each case with its labels; ``flip(case, i)`` inverts rubric verdict ``i``;
    ``invert_alignment`` answers ``1 - score`` on every dimension instead.

    A fused call (a case beside its companion, :mod:`otel_scorers.calibration.paired`) gets
    the labelled answer in the labelled part (``fused_flip`` inverting its rubric verdicts
    too: a judge that does worse when fused) and an all-satisfied, top-score companion part."""
    def labelled(case: LabelledCase, flip: Flip | None) -> dict[str, Any]:
        if case.scorer == "rubric":
            verdicts = [v != (flip is not None and flip(case, i))
                        for i, v in enumerate(case.expected.verdicts or ())]
            return rubric_answer(verdicts)
        assert case.expected.score is not None
        if invert_alignment:
            value = 1.0 - case.expected.score
            dims = {side: [value] * 4 for side in _sides(case.mode)}
        else:
            dims = dimension_values(case, case.expected.score)
        return alignment_answer(user=dims.get("user"), system=dims.get("system"))

    def fused(request: RecordedRequest, parts: list[str]) -> dict[str, Any]:
        text = fields_of(request)
        companion_rubric = COMPANION_CRITERIA[0].description in text
        content: dict[str, Any] = {}
        for index, block in enumerate(parts, start=1):
            rubric = "rubric of criteria" in block
            if rubric == companion_rubric:  # the companion's part
                content[f"part{index}"] = companion(rubric, block)
                continue
            (case,) = _cases_in(cases, text, task=block, rubric=rubric)
            content[f"part{index}"] = labelled(case, _either(flip, fused_flip))
        return content

    def respond(request: RecordedRequest) -> Answer:
        parts = parts_of(request)
        if parts is not None:
            return reply(fused(request, parts), prompt_tokens=200, completion_tokens=100)
        text = str(request.messages[-1]["content"])
        rubric = "BEGIN rubric criteria>>>" in text
        found = _cases_in(cases, text, task=text, rubric=rubric)
        if not found and (not rubric or COMPANION_CRITERIA[0].description in text):
            # a companion judged alone: any valid answer (only the labelled half is compared)
            return reply(companion(rubric, text), prompt_tokens=120, completion_tokens=60)
        assert len(found) == 1, [c.id for c in found]
        return reply(labelled(found[0], flip), prompt_tokens=120, completion_tokens=60)
    return respond


def companion(rubric: bool, task: str) -> dict[str, Any]:
    """An all-satisfied, top-score answer for a companion's question."""
    if rubric:
        return rubric_answer([True] * len(COMPANION_CRITERIA))
    return alignment_answer(user=[1.0] * 4,
                            system=[1.0] * 4 if '"systemCompliance"' in task else None)


def _either(first: Flip | None, second: Flip | None) -> Flip | None:
    if first is None or second is None:
        return first or second
    return lambda case, i: first(case, i) != second(case, i)

