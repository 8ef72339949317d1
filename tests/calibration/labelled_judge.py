"""A scripted judge that answers the labelled cases as labelled (or wrong on purpose), for the
calibration tests: it finds the case a request is about (its response text, scorer kind, mode
and criteria) and answers with the case's labels, optionally flipped or inverted."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

from otel_scorers.scorers.alignment import BOTH_SPLIT, MODE_WEIGHTS
from otel_scorers.scorers.cases import BANDS, DIMENSIONS, LabelledCase
from otel_scorers.testing import Answer, RecordedRequest, alignment_answer, reply, rubric_answer

Flip = Callable[[LabelledCase, int], bool]


def case_of(request: RecordedRequest, cases: Sequence[LabelledCase]) -> LabelledCase:
    text = str(request.messages[-1]["content"])
    rubric = "BEGIN rubric criteria>>>" in text
    sides = {side for side, key in (("user", "userAlignment"), ("system", "systemCompliance"))
             if f'"{key}"' in text}
    found = []
    for case in cases:
        if case.run.output not in text or (case.scorer == "rubric") != rubric:
            continue
        if rubric and not all(c.description in text for c in case.options.criteria):
            continue
        if not rubric and sides != set(_sides(case.mode)):
            continue
        found.append(case)
    assert len(found) == 1, [c.id for c in found]
    return found[0]


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
                       invert_alignment: bool = False) -> Callable[[RecordedRequest], Answer]:
    """Answers each case with its labels; ``flip(case, i)`` inverts rubric verdict ``i``;
    ``invert_alignment`` answers ``1 - score`` on every dimension instead."""
    def respond(request: RecordedRequest) -> Answer:
        case = case_of(request, cases)
        content: dict[str, Any]
        if case.scorer == "rubric":
            verdicts = [v != (flip is not None and flip(case, i))
                        for i, v in enumerate(case.expected.verdicts or ())]
            content = rubric_answer(verdicts)
        else:
            assert case.expected.score is not None
            if invert_alignment:
                value = 1.0 - case.expected.score
                dims = {side: [value] * 4 for side in _sides(case.mode)}
            else:
                dims = dimension_values(case, case.expected.score)
            content = alignment_answer(user=dims.get("user"), system=dims.get("system"))
        return reply(content, prompt_tokens=120, completion_tokens=60)
    return respond
