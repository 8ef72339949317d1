"""The judge's answer: JSON schemas built from pydantic models, and tolerant parsing of what
the model wrote (strict validation of the content, lenient reading of the JSON syntax)."""

from __future__ import annotations

import copy
import functools
import json
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from otel_scorers import safe_json

__all__ = ["answer_schema", "correction", "parse_answer", "problems", "schema_text"]

T = TypeVar("T", bound=BaseModel)


def load_object(content: str) -> Any:
    """The JSON value of an answer, read as tolerantly as :func:`parse_answer` reads it
    (``None`` when there is none)."""
    text = content.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        text = text.rsplit("```", 1)[0]
    return _tolerant_json(text)


def parse_answer(content: str, model: type[T]) -> T:
    """Parse the judge's JSON into ``model``: the object itself, in a code fence, or in prose.

    JSON syntax is read tolerantly (raw control characters inside strings, which grammar-
    constrained local models emit, and text around the object); the content is then validated
    strictly against the schema.
    """
    text = content.strip()
    if not text:
        raise ValueError("the judge answered with no content")
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        text = text.rsplit("```", 1)[0]
    try:
        return model.model_validate_json(text)
    except ValidationError as exc:
        if not _is_json_error(exc):
            raise
        loaded = _tolerant_json(text)
        if loaded is None:
            raise
        return model.model_validate_json(json.dumps(loaded))


def _tolerant_json(text: str) -> Any:
    start, end = text.find("{"), text.rfind("}")
    for candidate in (text, text[start:end + 1] if 0 <= start < end else None):
        if candidate is None:
            continue
        try:
            return safe_json.loads(candidate, strict=False)
        except (ValueError, RecursionError):
            continue
    return None


def _is_json_error(exc: ValidationError) -> bool:
    return any(error["type"] == "json_invalid" for error in exc.errors())


def problems(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        items = [f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}"
                 for e in exc.errors()[:6]]
        more = len(exc.errors()) - len(items)
        return "; ".join(items) + (f"; and {more} more" if more > 0 else "")
    return str(exc)


def correction(exc: Exception) -> str:
    return (f"Your previous answer could not be used: {problems(exc)}. Reply again with only "
            "the JSON object, following the schema exactly: every required property once, no "
            "extra properties, booleans as true/false and scores as numbers between 0 and 1.")


@functools.cache
def _schema(model: type[BaseModel], strict: bool) -> str:
    schema = _inline_refs(model.model_json_schema())
    # OpenAI strict mode rejects length keywords; constrained decoders keep them.
    _drop_keys(schema, {"title", "maxLength", "minLength"} if strict else {"title"})
    return json.dumps(schema)


def answer_schema(model: type[BaseModel], *, strict: bool = False) -> dict[str, Any]:
    """The JSON schema of an answer model with ``$ref`` inlined (providers vary on refs)."""
    loaded: dict[str, Any] = safe_json.loads(_schema(model, strict))
    return loaded


def schema_text(model: type[BaseModel]) -> str:
    """The answer schema as compact JSON for a prompt: written once per answer model (the
    answer models are themselves made once per shape), not parsed and written per call."""
    return _schema_text(model)


@functools.cache
def _schema_text(model: type[BaseModel]) -> str:
    return json.dumps(answer_schema(model), separators=(",", ":"))


def _inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    defs = schema.pop("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                target = copy.deepcopy(defs[node["$ref"].rsplit("/", 1)[-1]])
                return resolve(target)
            return {key: resolve(value) for key, value in node.items()}
        if isinstance(node, list):
            return [resolve(item) for item in node]
        return node

    resolved: dict[str, Any] = resolve(schema)
    return resolved


def _drop_keys(node: Any, keys: set[str]) -> None:
    if isinstance(node, dict):
        for key in list(node):
            # "title"/"description" inside "properties" are property names, not keywords.
            if key in keys and not isinstance(node.get(key), dict):
                del node[key]
            else:
                _drop_keys(node[key], keys)
    elif isinstance(node, list):
        for item in node:
            _drop_keys(item, keys)
