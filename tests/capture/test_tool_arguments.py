"""A tool's arguments as the model asked for them, out of each framework's envelope; anything
that is not an envelope (or is hostile) is kept as it came."""

from __future__ import annotations

import json

import pytest

from otel_scorers.capture.steps import tool_arguments

TRACELOOP = json.dumps({"input_str": "{'city': 'Paris'}", "tags": ["seq:step:1"],
                        "metadata": {"langgraph_step": 2}, "inputs": {"city": "Paris"},
                        "kwargs": {"color": "green", "name": None, "tool_call_id": "call_1"}})


@pytest.mark.parametrize(("raw", "expected"), [
    (TRACELOOP, {"city": "Paris"}),  # LangGraph with OpenLLMetry
    (json.dumps({"input_str": "{'city': 'Lima', 'days': 2}", "tags": []}),
     {"city": "Lima", "days": 2}),  # no inputs: the Python literal, read safely
    (json.dumps({"args": [], "sanitize_inputs_outputs": True, "kwargs": {"city": "Paris"}}),
     {"city": "Paris"}),  # smolagents
    (json.dumps({"kwargs": {"city": "Paris"}}), {"city": "Paris"}),  # LlamaIndex
    (json.dumps({"args": ["Paris"], "kwargs": {}}), ["Paris"]),  # positional only
])
def test_an_envelope_gives_the_arguments_the_model_asked_for(raw: str, expected: object
                                                             ) -> None:
    out = tool_arguments(raw)
    assert out is not None and json.loads(out) == expected


@pytest.mark.parametrize("raw", [
    '{"city": "Paris"}', "Paris", "", "[1, 2]", '{"kwargs": "not a dict"}',
    json.dumps({"input_str": "__import__('os').system('id')", "tags": []}),  # never run
    json.dumps({"input_str": "{" * 5000, "tags": []}),
    json.dumps({"input_str": "[" * 30_000, "tags": []}),  # past the literal bound
    "{" + "[" * 5000,
])
def test_anything_else_is_kept_as_it_came(raw: str) -> None:
    assert tool_arguments(raw) == raw
