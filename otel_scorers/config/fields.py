"""The settings field at a path of the settings models, and a type's kinds: what the table of
settings (:mod:`otel_scorers.config.params`) reads each row's type and default from."""

from __future__ import annotations

import types
import typing
from typing import Any, Literal

from pydantic import BaseModel, SecretStr

from otel_scorers import registry
from otel_scorers.config.settings import ScorerSettings, Settings

__all__ = ["field_of", "flatten"]


def field_of(keys: tuple[str, ...]) -> tuple[Any, Any]:
    """The annotation and default of the settings field at ``keys`` (``*``: the item of a
    list or the value of a mapping)."""
    model: Any = Settings
    annotation: Any = None
    default: Any = None
    for key in keys:
        if key == "*":
            model = _item(annotation)
            continue
        if model is ScorerSettings and key not in model.model_fields:
            model = next(row.options for row in registry.scorer_types()
                         if key in row.options.model_fields)
        if model is Settings and key not in model.model_fields:
            model = registry.backend(key).settings
            annotation, default = model, model()
            continue
        field = model.model_fields[key]
        annotation, default = field.annotation, field.get_default(call_default_factory=True)
        model = _model_in(annotation)
    return annotation, default


def _item(annotation: Any) -> Any:
    for arg in typing.get_args(annotation):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return arg
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _model_in(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def flatten(annotation: Any) -> list[Any]:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return [kind for arg in typing.get_args(annotation) for kind in flatten(arg)]
    if origin is Literal or annotation is SecretStr:
        return [str]
    if origin is not None:
        return [origin]
    return [annotation]
