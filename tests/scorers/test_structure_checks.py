"""The structured-output and tool-argument checks (``json``, ``json_schema``,
``tool_args_valid``): decided from the run, with the failing path in the reason; a schema or an
answer past a bound, a remote ``$ref`` and a validation over the regex budget are
``invalid_input`` error results naming the limit, never a pass."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from otel_scorers import ChecksScorer, ConfigError, checks
from otel_scorers.scorers import schemas
from otel_scorers.scorers.run import ScorerRun

REPORT = {"type": "object", "required": ["city", "temperature_c"],
          "properties": {"city": {"type": "string"}, "temperature_c": {"type": "integer"}},
          "additionalProperties": False}
CITY = {"type": "object", "properties": {"city": {"type": "string", "minLength": 2}},
        "required": ["city"], "additionalProperties": False}


def run_of(output: str, *, steps: list[dict[str, Any]] | None = None,
           tools: list[dict[str, Any]] | None = None, **extra: Any) -> ScorerRun:
    return ScorerRun.coerce({"input": "Weather in Paris?", "output": output,
                             "steps": steps if steps is not None else
                             [{"kind": "llm", "name": "gpt-4o-mini"}],
                             "tools": tools or [], **extra})


def decide(spec: str, run: ScorerRun) -> tuple[bool | None, str]:
    return checks.parse_check(spec)(run)


def test_json_parses_after_fences_and_says_line_and_column() -> None:
    assert decide("json", run_of('{"a": 1}'))[0] is True
    assert decide("json", run_of('Here:\n```json\n{"a": [1, 2]}\n```\nDone.'))[0] is True
    held, why = decide("json", run_of('{\n  "a": 1,\n  "b": \n}'))
    assert held is False and "line 4 column 1" in why, why
    held, why = decide("json", run_of("It is sunny."))
    assert held is False and "line 1 column 1" in why
    assert decide("json", run_of("[" * 5000 + "]" * 5000))[0] is False  # too deep: not JSON


def test_json_schema_inline_names_each_failing_path() -> None:
    spec = "json_schema " + json.dumps(REPORT)
    assert decide(spec, run_of('{"city": "Paris", "temperature_c": 21}'))[0] is True
    held, why = decide(spec, run_of('{"city": 3, "temperature_c": "21", "x": 1}'))
    assert held is False
    assert "$.city: type" in why and "$.temperature_c: type" in why
    assert "additionalProperties" in why
    held, why = decide(spec, run_of('{"city": "Paris"}'))
    assert held is False and "required 'temperature_c'" in why, why
    # the answer's values are never echoed
    held, why = decide(spec, run_of('{"city": "Paris", "temperature_c": "secret-value-123"}'))
    assert held is False and "secret-value-123" not in why


def test_json_schema_from_a_file_and_draft_7(tmp_path: Path) -> None:
    path = tmp_path / "weather_report.json"
    path.write_text(json.dumps({"$schema": "http://json-schema.org/draft-07/schema#",
                                "type": "object", "items": [{"type": "string"}],
                                "required": ["city"]}))
    check = checks.parse_check(f"json_schema {path}")
    assert check.id == "json_schema_weather_report"
    assert check(run_of('{"city": "Lima"}'))[0] is True
    assert check(run_of('{"town": "Lima"}'))[0] is False
    with pytest.raises(ConfigError, match="cannot read"):
        checks.parse_check(f"json_schema {tmp_path / 'missing.json'}")
    with pytest.raises(ConfigError, match="not a valid"):
        checks.parse_check('json_schema {"type": 12}')


def test_json_schema_declared_reads_the_runs_response_format() -> None:
    run = run_of('{"city": "Paris", "temperature_c": 21}', output_schema=REPORT)
    assert decide("json_schema declared", run)[0] is True
    wrong = run_of('{"city": "Paris"}', output_schema=REPORT)
    assert decide("json_schema declared", wrong)[0] is False
    result = ChecksScorer(["json_schema declared"]).run(run_of('{"city": "Paris"}'))
    assert result.passed is None and result.error is not None
    assert result.error.type == "invalid_input" and "declares no response schema" in \
        result.reason


def test_tool_args_valid_names_tool_step_and_path_and_says_unschemed_tools_once() -> None:
    tools = [{"name": "get_weather", "parameters": CITY}, {"name": "search"}]
    steps = [{"kind": "llm", "name": "m"},
             {"kind": "tool", "name": "get_weather", "arguments": '{"city": "Paris"}'},
             {"kind": "tool", "name": "search", "arguments": '{"q": "x"}'},
             {"kind": "tool", "name": "search", "arguments": '{"q": "y"}'},
             {"kind": "tool", "name": "get_weather", "arguments": '{"city": "P", "n": 1}'}]
    held, why = decide("tool_args_valid", run_of("ok", steps=steps, tools=tools))
    assert held is False
    assert "get_weather (step 5): " in why and "$.city: minLength 2" in why, why
    assert "$: additionalProperties" in why and "step 2" not in why, why
    assert why.count("search (2 calls, not checked)") == 1, why
    good = steps[:4]
    held, why = decide("tool_args_valid", run_of("ok", steps=good, tools=tools))
    assert held is True and "1 call(s) fit" in why and "search" in why
    # only tools with no schema: nothing checkable is an error result, not a pass
    result = ChecksScorer(["tool_args_valid"]).run(run_of("ok", steps=steps[2:4], tools=tools))
    assert result.error is not None and result.error.type == "invalid_input"
    # arguments that are not JSON fail
    bad = [{"kind": "tool", "name": "get_weather", "arguments": "Paris"}]
    assert decide("tool_args_valid", run_of("ok", steps=bad, tools=tools))[0] is False


def test_tool_args_valid_past_the_step_bound_is_not_a_pass() -> None:
    tools = [{"name": "get_weather", "parameters": CITY}]
    steps = [{"kind": "tool", "name": "get_weather", "arguments": '{"city": "Paris"}'}] * 260
    result = ChecksScorer(["tool_args_valid"]).run(run_of("ok", steps=steps, tools=tools))
    assert result.passed is None and result.skipped == "steps_truncated"


def error_of(spec: str, run: ScorerRun) -> str:
    result = ChecksScorer([spec]).run(run)
    assert result.passed is None and result.error is not None, result
    assert result.error.type == "invalid_input"
    return result.reason


@pytest.mark.parametrize(("schema", "said"), [
    ({"type": "object", "properties": {"x": {"$ref": "https://example.invalid/s.json"}}},
     "never fetched"),
    ({"$ref": "#"}, "without end"),
    ({"items": {"enum": list(range(20_000))}}, "over the limit of 64000 (MAX_SCHEMA_CHARS)"),
    (json.loads('{"a":' * 40 + "1" + "}" * 40), "MAX_SCHEMA_DEPTH"),
])
def test_a_hostile_declared_schema_is_a_counted_error(schema: Any, said: str) -> None:
    reason = error_of("json_schema declared",
                      run_of('{"x": 1}', output_schema=json.dumps(schema)))
    assert said in reason, reason


def test_a_hostile_schema_never_holds_the_worker_past_the_budget() -> None:
    """Nested repeats on a long answer, a huge enum over many items, and uniqueItems over many
    objects, each with a failure in it: each is decided as a failure or gives up within the
    budget (the library's own pattern check, Python's `re`, would backtrack for minutes; its
    uniqueItems compares every pair). A fast machine decides them in time, a slow one gives up:
    neither passes them."""
    hostile = [({"type": "string", "pattern": "^(a|aa)+$"}, json.dumps("a" * 5_000 + "b")),
               ({"items": {"enum": list(range(6_000))}}, json.dumps([-1] * 40_000)),
               ({"uniqueItems": True}, json.dumps([{"a": i} for i in range(30_000)] + [{"a": 0}]))]
    for schema, answer in hostile:
        validator, value = schemas.compiled(json.dumps(schema)), json.loads(answer)
        start = time.thread_time()  # (CPU: a busy shared machine only adds wall time)
        try:
            found = schemas.failures(validator, value)
        except schemas.SchemaBoundError as exc:
            assert "VALIDATION_BUDGET_S" in str(exc)
        else:
            assert found  # decided in time: it fails
        assert time.thread_time() - start < schemas.VALIDATION_BUDGET_S + 0.1, schema
    reason = error_of("json_schema declared", run_of(
        json.dumps("a" * 5_000 + "b"), output_schema={"pattern": "^(a|aa)+$"}))
    assert "gave up" in reason


def test_an_answer_over_the_limit_is_an_error_naming_it() -> None:
    reason = error_of("json", run_of('"' + "a" * (schemas.MAX_INSTANCE_CHARS + 1) + '"'))
    assert "MAX_INSTANCE_CHARS" in reason


def test_no_remote_ref_is_ever_retrieved(monkeypatch: pytest.MonkeyPatch) -> None:
    import urllib.request

    def refuse(*_: Any, **__: Any) -> Any:
        raise AssertionError("a remote $ref was fetched")

    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    schema = {"$ref": "http://127.0.0.1:1/schema.json"}
    reason = error_of("json_schema declared", run_of("{}", output_schema=schema))
    assert "127.0.0.1:1/schema.json" in reason and "never fetched" in reason
    # the drafts' own meta-schemas and local $defs still resolve
    local = {"$defs": {"c": {"type": "string"}}, "properties": {"city": {"$ref": "#/$defs/c"}}}
    assert decide("json_schema declared", run_of('{"city": 1}', output_schema=local))[0] is False


def test_checks_pickle_and_keep_their_ids() -> None:
    import pickle

    made = [checks.parse_check(s) for s in ("json", "json_schema declared", "tool_args_valid",
                                            "json_schema " + json.dumps(CITY))]
    assert [c.id for c in made][:3] == ["json", "json_schema_declared", "tool_args_valid"]
    assert made[3].id.startswith("json_schema_")
    assert pickle.loads(pickle.dumps(made)) == made


def test_a_check_that_cannot_decide_is_counted_and_said_once_with_its_own_fix(
        make_processor: Any, telemetry: Any, caplog: pytest.LogCaptureFixture) -> None:
    """Live: a run that declares no response schema is a counted ``invalid_input`` decision
    and one warning whose fix is about the run, not about a judge's structured output."""
    from tests.support import genai_attributes

    processor = make_processor([ChecksScorer(["json_schema declared", "json"])])
    tracer = telemetry.tracer()
    chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": 5}
    with caplog.at_level("WARNING", logger="otel_scorers"):
        for _ in range(2):
            with tracer.start_as_current_span(
                    "invoke_agent", attributes=genai_attributes(answer='{"city": "Paris"}')), \
                    tracer.start_as_current_span("chat gpt-4o-mini", attributes=chat):
                pass
        assert processor.force_flush(20_000)
    assert processor.counts.count("filtered", "invalid_input") == 2
    said = [r.getMessage() for r in caplog.records if "cannot judge" in r.getMessage()]
    assert len(said) == 1 and "declares no response schema" in said[0], said
    assert "STRUCTURED_OUTPUT" not in said[0] and "docs/agent-scorers.md" in said[0], said


def test_the_bounded_keywords_agree_with_the_library() -> None:
    """``enum``, ``uniqueItems``, ``pattern`` and ``patternProperties`` are this module's own
    (bounded): on values at JSON Schema's equality edges they decide as jsonschema does."""
    from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

    cases = [
        ({"enum": [1, "a", {"x": [1, 2]}, None, True, [1.5]]},
         [1, 1.0, True, False, 0, "a", "A", {"x": [1, 2.0]}, {"x": [2, 1]}, None, [1.5], []]),
        ({"uniqueItems": True},
         [[1, 1.0], [1, True], [0, False], [{"a": 1, "b": 2}, {"b": 2, "a": 1}], [[1], [1.0]],
          ["a", "b"], [], [None, None]]),
        ({"pattern": "^a+$"}, ["aaa", "ab", "", 3]),
        ({"patternProperties": {"^x": {"type": "integer"}}}, [{"x1": 1}, {"x1": "a"}, {"y": "a"}]),
    ]
    for schema, values in cases:
        ours = schemas.compiled(json.dumps(schema))
        theirs = Draft202012Validator(schema)
        for value in values:
            assert (not schemas.failures(ours, value)) == theirs.is_valid(value), (schema, value)


def test_the_quick_checker_never_passes_what_the_library_fails() -> None:
    """The quick checker (a quick yes, the library asked otherwise) on generated schemas of
    its keywords and generated values: whenever it passes a value, jsonschema does too, and
    on the common shapes it decides most values itself."""
    import random

    from jsonschema import Draft202012Validator

    from otel_scorers.scorers.schema_fast import quick

    rng = random.Random(55)
    scalars: list[Any] = [0, 1, -1, 1.0, 1.5, 2**70, True, False, None, "", "a", "ab", "abc"]

    def value(depth: int = 0) -> Any:
        pick = rng.random()
        if depth < 3 and pick < 0.2:
            return [value(depth + 1) for _ in range(rng.randint(0, 3))]
        if depth < 3 and pick < 0.4:
            return {rng.choice("abc"): value(depth + 1) for _ in range(rng.randint(0, 3))}
        return rng.choice(scalars)

    def schema(depth: int = 0) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for _ in range(rng.randint(1, 3)):
            key = rng.choice(["type", "type", "properties", "required", "additionalProperties",
                              "items", "enum", "const", "minimum", "exclusiveMaximum",
                              "minLength", "maxItems", "minProperties", "pattern", "title"])
            if key == "type":
                out[key] = rng.choice(["object", "array", "string", "integer", "number",
                                       "boolean", "null", ["integer", "string"]])
            elif key in ("properties",) and depth < 2:
                out[key] = {rng.choice("abc"): schema(depth + 1) for _ in range(2)}
            elif key == "items" and depth < 2:
                out[key] = rng.choice([schema(depth + 1), True, False])
            elif key == "additionalProperties":
                out[key] = rng.choice([False, True] + ([schema(depth + 1)] if depth < 2 else []))
            elif key == "required":
                out[key] = rng.sample("abc", rng.randint(0, 2))
            elif key in ("enum", "const"):
                out[key] = ([value() for _ in range(3)] if key == "enum" else value())
            elif key == "pattern":
                out[key] = rng.choice(["^a", "b$", "a+"])
            elif key == "title":
                out[key] = "x"
            elif key not in ("properties", "items"):
                out[key] = rng.choice([0, 1, 2, 1.5])
        return out

    passed = 0
    for _ in range(1_500):
        made = schema()
        checker = quick(made, lambda pattern, text: __import__("re").search(pattern, text)
                        is not None)
        assert checker is not None, made
        library = Draft202012Validator(made)
        for _ in range(8):
            item = value()
            if checker(item):
                passed += 1
                assert library.is_valid(item), (made, item)
    assert passed > 1_000
    # and through the bounded path: the verdicts are the library's
    for made, item in ((REPORT, {"city": "P", "temperature_c": 2.0}),
                       (REPORT, {"city": "P", "temperature_c": True})):
        assert (not schemas.failures(schemas.compiled(json.dumps(made)), item)) == \
            Draft202012Validator(made).is_valid(item)
