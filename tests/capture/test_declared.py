"""What a run declared, read from its spans' attributes: each tool's parameters schema in the
shapes of the GenAI conventions, OpenInference and Traceloop, and the response schema its LLM
call asked for (OpenAI Chat Completions, the Responses API, pydantic-ai, Traceloop); bounded."""

from __future__ import annotations

import json

from otel_scorers.capture.declared import output_schema_of, tools_of
from otel_scorers.scorers.steps import MAX_TOOL_SCHEMA_CHARS, SCHEMA_OVER_LIMIT

CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def test_tool_schemas_in_each_conventions_shape() -> None:
    genai = {"gen_ai.tool.definitions": json.dumps(
        [{"type": "function", "name": "a", "parameters": CITY},
         {"type": "function", "function": {"name": "b", "parameters": CITY}}])}
    openinference = {"llm.tools.0.tool.json_schema": json.dumps(
        {"type": "function", "function": {"name": "c", "parameters": CITY}})}
    traceloop = {"llm.request.functions.0.name": "d",
                 "llm.request.functions.0.parameters": json.dumps(CITY)}
    strands = {"gen_ai.agent.tools": json.dumps(["e"])}
    found = {t.name: t.parameters for t in tools_of([genai, openinference, traceloop, strands])}
    assert {name: json.loads(p) if p else None for name, p in found.items()} == {
        "a": CITY, "b": CITY, "c": CITY, "d": CITY, "e": None}
    # a later declaration fills in a schema an earlier one lacked
    late = tools_of([strands, {"gen_ai.tool.definitions": json.dumps(
        [{"name": "e", "parameters": CITY}])}])
    assert late[0].parameters is not None and json.loads(late[0].parameters) == CITY


def test_response_schema_in_each_shape_the_last_call_wins() -> None:
    chat = {"llm.invocation_parameters": json.dumps({"response_format": {
        "type": "json_schema", "json_schema": {"name": "r", "schema": CITY}}})}
    responses = {"llm.invocation_parameters": json.dumps(
        {"text": {"format": {"type": "json_schema", "name": "r", "schema_": {"type": "array"}}}})}
    pydantic_ai = {"model_request_parameters": json.dumps(
        {"output_mode": "native", "output_object": {"json_schema": {"type": "string"}}})}
    traceloop = {"gen_ai.request.structured_output_schema": json.dumps({"type": "number"})}
    for attrs, schema in ((chat, CITY), (responses, {"type": "array"}),
                          (pydantic_ai, {"type": "string"}), (traceloop, {"type": "number"})):
        assert json.loads(output_schema_of([{}, attrs]) or "null") == schema, attrs
    assert json.loads(output_schema_of([chat, responses]) or "") == {"type": "array"}
    text_mode = {"llm.invocation_parameters": json.dumps({"text": {"format": {"type": "text"}}}),
                 "model_request_parameters": json.dumps({"output_object": None})}
    assert output_schema_of([text_mode]) is None


def test_a_schema_over_the_bound_is_kept_as_its_length_only() -> None:
    huge = {"enum": list(range(MAX_TOOL_SCHEMA_CHARS // 4))}
    (tool,) = tools_of([{"gen_ai.tool.definitions": json.dumps([{"name": "a",
                                                                 "parameters": huge}])}])
    assert tool.parameters is not None and tool.parameters.startswith(SCHEMA_OVER_LIMIT)
