"""The settings table drives every entry point: the environment reader, the processor's
keyword arguments and the configuration reference cannot disagree with it, or with the
settings models behind it."""

from __future__ import annotations

import inspect
import typing
from typing import Any

import pytest
from pydantic import BaseModel

from otel_scorers import registry
from otel_scorers.config import Settings
from otel_scorers.config.environment import ENV_VARS
from otel_scorers.config.params import (
    ARGUMENTS,
    PipelineSettings,
    field_of,
    params,
    reference_table,
)
from otel_scorers.pipeline import ScoringSpanProcessor
from tests.support import doc

#: settings whose values are maps of the user's own keys (agents, attributes): one row each
OPEN_MAPS = {"rubrics", "selection.attributes"}


def leaves(model: type[BaseModel], prefix: str = "") -> list[str]:
    out = []
    for name, field in model.model_fields.items():
        path = f"{prefix}{name}"
        nested = next((a for a in [field.annotation, *typing.get_args(field.annotation)]
                       if isinstance(a, type) and issubclass(a, BaseModel)), None)
        item = next((a for a in typing.get_args(field.annotation)
                     for a in [a, *typing.get_args(a)]
                     if isinstance(a, type) and issubclass(a, BaseModel)), None)
        if path in OPEN_MAPS or path in ("scorers.*.sampling", "sampling.boosts"):
            out.append(path)
        elif nested is not None and typing.get_origin(field.annotation) is None:
            out.extend(leaves(nested, path + "."))
        elif item is not None and typing.get_origin(field.annotation) is list \
                and path == "scorers":
            out.append(path)
            out.extend(leaves(item, path + ".*."))
        else:
            out.append(path)
    return out


def test_every_setting_has_one_row_and_every_row_a_setting() -> None:
    rows = [param.path for param in params()]
    assert len(rows) == len(set(rows)), "a setting declared twice"
    # the type is the scorer's kind; its options are the options of every type's row
    expected = set(leaves(Settings)) - {"scorers.*.type", "scorers.*.options"}
    expected |= {f"scorers.*.{name}" for row in registry.scorer_types()
                 for name in row.options.model_fields}
    # every backend's block is a setting of its own (its row's settings model)
    expected |= {f"{row.name}.{name}" for row in registry.backends()
                 for name in row.settings.model_fields}
    assert set(rows) == expected
    for param in params():
        field_of(param.keys)  # every row names a real field


def test_the_environment_is_read_from_the_table() -> None:
    assert set(ENV_VARS) == {param.env for param in params() if param.env}


def test_the_processor_takes_exactly_the_argument_rows_with_their_types() -> None:
    assert set(PipelineSettings.__annotations__) == ARGUMENTS
    hints = typing.get_type_hints(PipelineSettings)
    for name in ARGUMENTS:
        annotation, _ = field_of((name,))
        assert hints[name] == annotation, name
    parameters = inspect.signature(ScoringSpanProcessor.__init__).parameters
    assert parameters["pipeline"].kind is inspect.Parameter.VAR_KEYWORD


def test_an_unknown_argument_is_a_type_error_naming_the_settings() -> None:
    with pytest.raises(TypeError, match=r"queue_sizes.*queue_size"):
        ScoringSpanProcessor([], queue_sizes=3)  # type: ignore[call-arg]


def test_an_argument_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from otel_scorers import RubricScorer

    monkeypatch.setenv("OTEL_SCORERS_QUEUE_SIZE", "7")
    processor: Any = ScoringSpanProcessor([RubricScorer("openai/x", "- y")], queue_size=11,
                                          concurrency=3)
    try:
        assert processor.settings.queue_size == 11 and processor.settings.concurrency == 3
    finally:
        processor.shutdown()


def test_the_reference_in_the_docs_is_the_table() -> None:
    page = doc("configuration.md")
    start = page.index("<!-- settings: generated")
    body = page[page.index("\n", start) + 1:page.index("<!-- end of the generated settings")]
    assert body.strip() == reference_table().strip(), \
        "docs/configuration.md is out of date: python -m otel_scorers.config.params"


def test_the_runtime_policies_have_the_fields_of_their_settings() -> None:
    import dataclasses

    from otel_scorers.config import SamplingSettings, SelectionSettings
    from otel_scorers.pipeline import Sampling, Selection

    assert {f.name for f in dataclasses.fields(Sampling)} == set(SamplingSettings.model_fields)
    assert {f.name for f in dataclasses.fields(Selection)} == {
        *SelectionSettings.model_fields, "predicate"}
    from otel_scorers.config.settings import SessionSettings
    from otel_scorers.pipeline.sessions import SessionPolicy

    # no mirror: the session store's policy is the settings block itself
    assert SessionPolicy is SessionSettings
    # the sampling policy's bounds are the settings model's (one place)
    from otel_scorers.errors import ConfigError

    with pytest.raises(ConfigError, match="rate_limit"):
        Sampling(rate_limit=float("inf"))
    with pytest.raises(ConfigError, match="ratio"):
        Sampling(ratio=1.5)


def test_the_scorer_types_in_the_docs_are_the_registry_rows() -> None:
    from otel_scorers.config.params import scorer_types_table

    page = doc("configuration.md")
    start = page.index("<!-- scorer types: generated")
    body = page[page.index("\n", start) + 1:page.index("<!-- end of the generated scorer types")]
    assert body.strip() == scorer_types_table().strip(), \
        "docs/configuration.md is out of date: python -m otel_scorers.config.params"
