"""What a run declared before it acted: the tools offered to the model, each with the JSON
schema of its parameters, and the JSON schema its answer was asked to fit (a response format).

Read from the attributes of the interaction's span and its LLM calls, in each convention's
shape as the frameworks tested here record it:

- tools: GenAI ``gen_ai.tool.definitions`` (a JSON list of ``{"name", "parameters"}`` or
  ``{"function": {...}}``; pydantic-ai, the OTel GenAI instrumentations), OpenInference
  ``llm.tools.N.tool.json_schema`` (``{"function": {"name", "parameters"}}``: the Agents SDK,
  LangChain, LlamaIndex), Traceloop ``llm.request.functions.N.{name,description,parameters}``,
  strands ``gen_ai.agent.tools`` (names only: no schema);
- the answer's schema: pydantic-ai ``model_request_parameters.output_object.json_schema``
  (``NativeOutput``), OpenInference ``llm.invocation_parameters`` (Chat Completions'
  ``response_format.json_schema.schema``, the Responses API's ``text.format.schema``, which the
  Agents SDK's dump spells ``schema_``), Traceloop ``gen_ai.request.structured_output_schema``.

Each value is parsed at most once, bounded (:data:`MAX_DEFINITIONS_CHARS`); what cannot be read
is left out, never guessed. A schema longer than ``MAX_TOOL_SCHEMA_CHARS`` is not kept, only
its length (``schema_text``): the checks say it is over the limit rather than check half of it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from otel_scorers import safe_json
from otel_scorers.scorers.steps import (
    MAX_TOOL_DESCRIPTION_CHARS,
    MAX_TOOLS,
    ToolDefinition,
    schema_text,
)

__all__ = ["MAX_DEFINITIONS_CHARS", "output_schema_of", "tools_of"]

#: The longest tool-definitions value parsed (a definition list is a few KB; more is not one).
MAX_DEFINITIONS_CHARS = 256_000


def tools_of(attribute_sets: Sequence[Mapping[str, Any]]) -> tuple[ToolDefinition, ...]:
    """The tools offered to the model, by name (each once, at most ``MAX_TOOLS``), with their
    parameters schema where one is declared (a later declaration fills a missing one)."""
    found: dict[str, ToolDefinition] = {}
    for attrs in attribute_sets:
        for definition in _definitions(attrs):
            name, description, parameters = _named(definition)
            if not name:
                continue
            known = found.get(name)
            if known is None and len(found) < MAX_TOOLS:
                found[name] = ToolDefinition(
                    name=name[:200], description=description[:MAX_TOOL_DESCRIPTION_CHARS],
                    parameters=schema_text(parameters))
            elif known is not None and known.parameters is None and parameters is not None:
                found[name] = known.model_copy(update={"parameters": schema_text(parameters)})
    return tuple(found.values())


def output_schema_of(attribute_sets: Sequence[Mapping[str, Any]]) -> str | None:
    """The JSON schema the answer was asked to fit, as JSON text: the last LLM call's that
    declares one (the call that gave the answer), else ``None``."""
    for attrs in reversed(attribute_sets):  # the last one listed that declares one
        schema = _declared_output(attrs)
        if schema is not None:
            return schema_text(schema)
    return None


def _declared_output(attrs: Mapping[str, Any]) -> Any:
    traceloop = _json(attrs.get("gen_ai.request.structured_output_schema"))
    if isinstance(traceloop, Mapping):
        return traceloop
    pydantic_ai = _json(_holding(attrs.get("model_request_parameters"), '"output_object"'))
    if isinstance(pydantic_ai, Mapping):
        output = pydantic_ai.get("output_object")
        if isinstance(output, Mapping) and isinstance(output.get("json_schema"), Mapping):
            return output["json_schema"]
    parameters = _json(_holding(attrs.get("llm.invocation_parameters"), '"schema'))
    if isinstance(parameters, Mapping):
        return _response_format(parameters)
    return None


def _holding(value: Any, marker: str) -> Any:
    """``value`` when it may declare a schema (a text holding ``marker``, or a mapping): most
    calls declare none, and their parameters are not parsed for it."""
    return value if not isinstance(value, str) or marker in value else None


def _response_format(parameters: Mapping[str, Any]) -> Any:
    """Chat Completions' ``response_format`` or the Responses API's ``text.format``, when it
    asks for a JSON schema."""
    chat = parameters.get("response_format")
    if isinstance(chat, Mapping) and chat.get("type") == "json_schema":
        inner = chat.get("json_schema")
        if isinstance(inner, Mapping):
            return _schema_key(inner)
    text = parameters.get("text")
    formats = text.get("format") if isinstance(text, Mapping) else None
    if isinstance(formats, Mapping) and formats.get("type", "json_schema") == "json_schema":
        return _schema_key(formats)
    return None


def _schema_key(holder: Mapping[str, Any]) -> Any:
    for key in ("schema", "schema_"):
        if isinstance(holder.get(key), Mapping):
            return holder[key]
    return None


def _definitions(attrs: Mapping[str, Any]) -> list[Any]:
    out: list[Any] = []
    listed = _json(attrs.get("gen_ai.tool.definitions"))
    if isinstance(listed, list):
        out.extend(listed)
    names = _json(attrs.get("gen_ai.agent.tools"))  # strands: the agent's tool names
    if isinstance(names, list | tuple):
        out.extend({"name": name} for name in names if isinstance(name, str))
    for index in range(MAX_TOOLS):
        schema = attrs.get(f"llm.tools.{index}.tool.json_schema")
        name = attrs.get(f"llm.request.functions.{index}.name")
        if schema is None and name is None:
            break
        if schema is not None:
            out.append(_json(schema))
        if isinstance(name, str):
            prefix = f"llm.request.functions.{index}"
            out.append({"name": name, "description": attrs.get(f"{prefix}.description"),
                        "parameters": _json(attrs.get(f"{prefix}.parameters"))})
    return out


def _json(value: Any) -> Any:
    if isinstance(value, str) and len(value) <= MAX_DEFINITIONS_CHARS:
        try:
            return safe_json.loads(value)
        except ValueError:
            return None
    return value


def _named(definition: Any) -> tuple[str, str, Any]:
    """A definition's name, description and parameters schema (``{"name", "parameters"}``
    or ``{"function": {"name", "parameters"}}``; pydantic-ai's ``parameters_json_schema``)."""
    if not isinstance(definition, Mapping):
        return "", "", None
    function = definition.get("function")
    source = function if isinstance(function, Mapping) else definition
    name, description = source.get("name"), source.get("description")
    parameters = source.get("parameters", source.get("parameters_json_schema"))
    return (name if isinstance(name, str) else "",
            description if isinstance(description, str) else "",
            parameters if isinstance(parameters, Mapping) else None)
