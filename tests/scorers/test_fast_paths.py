"""The checks scorer's fast paths (issue 55's CPU per run): each only ever says "valid" or "no
finding" where the full path would, and falls back to it otherwise: a pattern searched without
the timeout only where its search is bounded, the quick schema checker on values json.loads
does not make, the word count, the JSON scanner, a run's cached views across copies, and the
answer read once per decision only (the personal-data views: test_personal_checks.py)."""

from __future__ import annotations

import json
import random
import time
from typing import Any

import pytest
import regex

from otel_scorers import ChecksScorer, safe_json
from otel_scorers.scorers import check_rows, schemas, structure
from otel_scorers.scorers.limits import words
from otel_scorers.scorers.pattern_cost import MAX_PLAIN_TEXT_CHARS, bounded
from otel_scorers.scorers.run import ScorerRun
from otel_scorers.scorers.schema_fast import quick

PARAMETERS = {"type": "object", "additionalProperties": False, "required": ["id", "query"],
              "properties": {"id": {"type": "integer", "minimum": 0},
                             "query": {"type": "string", "maxLength": 20},
                             "tags": {"type": "array", "items": {"type": "string"}}}}


@pytest.mark.parametrize("pattern", [
    "^SKU-[0-9]{4}$", "^[a-z_]+$", r"^\d{3}-\d{4}$", r"^[A-Z]{2}\d*$", "^.*$", "^a+?b$",
    r"^\$\d+$", "^$", r"^[^\s@]{1,64}x$"])
def test_plain_anchored_patterns_are_bounded(pattern: str) -> None:
    assert bounded(pattern)


@pytest.mark.parametrize("pattern", [
    "SKU-[0-9]{4}$",  # not anchored: one attempt per position
    "^(a|aa)+$", "^(ab)*$", "^a|b$", r"^(a)\1$", "^(?=a)a$", "^a*b*$",  # two repeats
    "^a{e<=1}$", "^[[:alpha:]]+$", r"^\p{L}+$", r"^\bx$", "^a**$", "^a{2}{3}$", "^a{,5}$",
    "^[]a]+$", "^[a", "^a{99}b{9}$",  # over MAX_FIXED_WIDTH
    "^x$$", "^" + "a" * 300])
def test_everything_else_keeps_the_timeout(pattern: str) -> None:
    assert not bounded(pattern)


def test_the_worst_bounded_shapes_stay_cheap() -> None:
    """One variable repeat before the most fixed width allowed, on the longest plain text, with
    a mismatch at the end: the backtracking the bound allows, timed."""
    for pattern, text in ((r"^\w*\d{63}!", "1" * MAX_PLAIN_TEXT_CHARS),
                          ("^[ab]*[ab]{63}c", "ab" * (MAX_PLAIN_TEXT_CHARS // 2)),
                          ("^a*a{63}b$", "a" * (MAX_PLAIN_TEXT_CHARS - 2) + "cb")):
        assert bounded(pattern)
        compiled = regex.compile(pattern, flags=regex.VERSION0)
        start = time.thread_time()
        for _ in range(10):
            assert compiled.search(text) is None
        assert (time.thread_time() - start) / 10 < 0.005, pattern


def test_a_pattern_decides_alike_with_or_without_the_timeout() -> None:
    rng = random.Random(55)
    patterns = ["^SKU-[0-9]{4}$", "^[a-c]+$", r"^\w{2}\d?$", "^a.b$", "^[^a]*$"]
    for _ in range(3_000):
        pattern = rng.choice(patterns)
        text = "".join(rng.choice("abcSKU-0123 \n") for _ in range(rng.randint(0, 12)))
        token = schemas._STATE.set([time.monotonic() + 60, 0.0])
        try:
            found = schemas._search(pattern, text)
        finally:
            schemas._STATE.reset(token)
        expected = regex.compile(pattern, flags=regex.VERSION0).search(text, timeout=1)
        assert found == (expected is not None), (pattern, text)


def test_the_quick_checker_leaves_values_json_does_not_make_to_the_library() -> None:
    class Mapping(dict[str, Any]):
        pass

    checker = quick(PARAMETERS, lambda pattern, text: True)
    assert checker is not None
    assert checker({"id": 1, "query": "q"})
    assert checker({"id": 2.0, "query": "q", "tags": []})  # JSON Schema: 2.0 is an integer
    for value in (Mapping(id=1, query="q"), {"id": 1, "query": "q", "tags": ("a",)},
                  {"id": True, "query": "q"}, {"id": 1.5, "query": "q"}, {"id": 1}):
        assert not checker(value), value
    number = quick({"type": "number", "minimum": 1}, lambda pattern, text: True)
    assert number is not None and number(1.5) and number(2) and not number(True)


def test_tool_arguments_decide_alike_on_the_quick_path_and_the_full_one() -> None:
    rng = random.Random(55)
    schema = json.dumps(PARAMETERS)
    pieces: list[Any] = [1, -1, 2.0, 2.5, True, None, "q", "x" * 30, ["a"], [1], {}]
    for _ in range(2_000):
        value = {key: rng.choice(pieces) for key in rng.sample(["id", "query", "tags", "more"],
                                                              rng.randint(0, 4))}
        text = rng.choice([json.dumps(value), " " + json.dumps(value), json.dumps(value)[:-1],
                           json.dumps(value) + " [... 9 characters cut]", ""])
        problem = structure._arguments_problem(schema, text, "t", 1)
        if structure._fits_quickly(schema, text):
            assert problem is None, text


def test_the_json_scanner_reads_as_json_loads_does() -> None:
    texts = ['{"a": 1}', ' {"a": 1}', '{"a": 1} ', "1", "0123", "1 2", "", "nul", "NaN",
             '"\\ud800"', "\ufeff{}", '{"a": 1}x', "[" * 50_000, '{"a": 1, "a": 2}', "-0",
             '"a\nb"', "[1,]"]
    def read(loads: Any, text: str) -> tuple[str, Any]:
        try:
            return "value", json.dumps(loads(text))
        except RecursionError:
            return "ValueError", "deep"
        except ValueError as exc:
            return "ValueError", "deep" if "nested too deeply" in str(exc) else str(exc)

    for text in texts:
        assert read(safe_json.loads, text) == read(json.loads, text), text


def test_words_are_what_split_counts() -> None:
    rng = random.Random(55)
    alphabet = ["a", "b", " ", "\t", "\n", "\x0b", "\x0c", "\r", "\x1c", "\x1f", "\x85", "\u3000",
                "é", "."]
    for _ in range(3_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 16)))
        assert words(text) == len(text.split()), repr(text)


def test_a_copy_of_a_run_keeps_no_cached_view() -> None:
    run = ScorerRun.coerce({"input": "q", "output": "old",
                            "steps": [{"kind": "tool", "name": "search"},
                                      {"kind": "llm", "name": "m"}]})
    assert run.tool_steps and run.llm_steps and run.response == "old"
    copied = run.model_copy(update={"steps": ()})
    assert copied.tool_steps == () and copied.tool_names == () and copied.llm_steps == ()
    assert run.model_copy(deep=True).tool_steps == run.tool_steps


def test_the_answer_is_read_once_per_decision_and_not_kept(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``json`` and ``json_schema`` share the answer read as JSON while one decision lasts;
    after it, nothing of it stays (a queued run holds no parsed answer)."""
    reads: list[str] = []
    original = structure._read

    def counted(text: str) -> tuple[Any, str | None]:
        reads.append(text)
        return original(text)

    monkeypatch.setattr(structure, "_read", counted)
    run = ScorerRun.coerce({"input": "q", "output": '{"a": 1}', "output_schema": {"type": "object"},
                            "steps": [{"kind": "llm", "name": "m"}]})
    assert ChecksScorer(["json", "json_schema declared"]).decide(run).passed
    assert len(reads) == 1
    structure.answer_json(run, "json")  # outside a decision: read again
    assert len(reads) == 2
    assert check_rows._SHARED.get() is None
    assert set(run.__dict__) - set(ScorerRun.model_fields) <= {"response", "llm_steps"}
