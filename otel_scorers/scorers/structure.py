"""Structured output and tool arguments, as quick checks (rows of
:mod:`~otel_scorers.scorers.check_rows`):

- ``json``: the answer parses as JSON once the usual fences are removed (a fenced block
  ```` ```json ... ``` ````, or the whole answer); a failure says the parse error's line and column;
- ``json_schema FILE_OR_INLINE`` / ``json_schema declared``: the answer validates against a JSON
  Schema, given inline (``json_schema {"type": "object", ...}``), as a file (read once, when
  the check is built), or ``declared``: the schema the run's LLM call asked the answer to fit
  (:attr:`ScorerRun.output_schema <otel_scorers.scorers.run.ScorerRun.output_schema>`: OpenAI
  ``response_format`` / ``text.format``, pydantic-ai ``NativeOutput``; see
  :mod:`otel_scorers.capture.declared`). A run that declares none is an ``invalid_input``
  error result saying so, never a pass;
- ``tool_args_valid``: every tool call's arguments validate against the parameters schema the
  run declared for that tool (:attr:`ToolDefinition.parameters
  <otel_scorers.scorers.steps.ToolDefinition.parameters>`); a failure names the tool, the step
  and the failing path; a tool with no declared schema is said once in the reason, neither
  passed nor failed (no call checkable at all: an ``invalid_input`` error result).

Validation is bounded (:mod:`otel_scorers.scorers.schemas`): a schema or an answer past a
limit, a remote ``$ref``, a validation over the regex budget are ``invalid_input`` error
results naming the limit. A configured schema that is not one fails when the check is built.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from otel_scorers import safe_json
from otel_scorers.errors import ConfigError, ScorerInputError
from otel_scorers.scorers.check_rows import CheckRow, shared
from otel_scorers.scorers.checks import Check, Verdict
from otel_scorers.scorers.run import ScorerRun
from otel_scorers.scorers.schemas import (
    MAX_INSTANCE_CHARS,
    MAX_SCHEMA_CHARS,
    SchemaBoundError,
    compiled,
    failures,
)

__all__ = ["ROWS", "answer_json", "json_schema", "parses_as_json", "tool_args_valid"]

#: A fenced block: ```json ... ``` (any info word) or ``` ... ```.
_FENCE = re.compile(r"```[\w-]*[ \t]*\r?\n(.*?)\r?\n?```", re.DOTALL)


def parses_as_json() -> Check:
    """The answer is JSON (fences removed)."""
    return Check("json", "the answer is JSON", "json", uses_steps=False)


def answer_json(run: ScorerRun, check: str) -> tuple[Any, str | None]:
    """The answer's JSON value and ``None``, or ``None`` and why it is not JSON (the line and
    column of the parse error); past :data:`MAX_INSTANCE_CHARS`: ``invalid_input``."""
    text = run.response
    if len(text) > MAX_INSTANCE_CHARS:
        raise ScorerInputError(f"{check}: the answer has {len(text)} characters, over the limit "
                               f"of {MAX_INSTANCE_CHARS} (MAX_INSTANCE_CHARS)")
    return shared(run, _ANSWER, lambda: _read(text))  # (json and json_schema read it once)


_ANSWER = f"{__name__}.answer_json"


def _read(text: str) -> tuple[Any, str | None]:
    fenced = _FENCE.search(text) if "```" in text else None
    body = fenced.group(1) if fenced else text.strip()
    if not body.strip():
        return None, "the answer is empty"
    try:
        return safe_json.loads(body), None
    except json.JSONDecodeError as exc:
        where = " in the fenced block" if fenced else ""
        return None, f"not JSON{where}: {exc.msg} at line {exc.lineno} column {exc.colno}"
    except ValueError as exc:  # nested past the interpreter's limit
        return None, f"not JSON: {exc}"


def _json(run: ScorerRun) -> Verdict:
    value, why = answer_json(run, "json")
    if why is not None:
        return False, why
    return True, f"the answer is JSON ({type(value).__name__ if value is not None else 'null'})"


def json_schema(schema: str | dict[str, Any] | Path) -> Check:
    """The answer validates against ``schema``: a mapping, JSON text, a file, or
    ``"declared"`` (the schema the run's LLM call declared as its response format)."""
    if schema == "declared":
        return Check("json_schema_declared", "the answer fits the declared response schema",
                     "json_schema", (None,), uses_steps=True)
    text, source = _schema_text(schema)
    try:
        compiled(text)
    except SchemaBoundError as exc:
        raise ConfigError(f"json_schema {source}: {exc}") from None
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    slug = re.sub(r"[^\w]+", "_", Path(source).stem.lower())[:32]
    ident = f"json_schema_{slug}" if source != "inline" else f"json_schema_{digest}"
    return Check(ident, f"the answer fits the JSON schema ({source})", "json_schema", (text,),
                 uses_steps=False)


def _schema_text(schema: str | dict[str, Any] | Path) -> tuple[str, str]:
    if isinstance(schema, dict):
        return json.dumps(schema), "inline"
    if isinstance(schema, str) and schema.lstrip().startswith("{"):
        return schema, "inline"
    path = Path(schema)
    try:
        size = path.stat().st_size
        if size > MAX_SCHEMA_CHARS * 4:
            raise ConfigError(f"json_schema {path}: {size} bytes, over the limit of "
                              f"{MAX_SCHEMA_CHARS} characters (MAX_SCHEMA_CHARS)")
        return path.read_text(encoding="utf-8"), path.name
    except OSError as exc:
        raise ConfigError(f"json_schema needs a schema (inline JSON, a file or 'declared'): "
                          f"cannot read {str(schema)[:200]!r}: {exc.strerror}") from None


def _json_schema(run: ScorerRun, schema: str | None) -> Verdict:
    if schema is None:
        schema = run.output_schema
        if schema is None:
            raise ScorerInputError(
                "json_schema declared: the run declares no response schema (no LLM call "
                "records a response_format / text.format JSON schema, pydantic-ai "
                "output_object or structured_output_schema): name the schema in the check")
    value, why = answer_json(run, "json_schema")
    if why is not None:
        return False, why
    found = failures(compiled(schema), value)
    return (not found, "the answer fits the schema" if not found
            else "the answer does not fit the schema: " + "; ".join(found))


def tool_args_valid() -> Check:
    """Every tool call's arguments fit the parameters schema its tool declared."""
    return Check("tool_args_valid", "every tool call's arguments fit the tool's schema",
                 "tool_args_valid")


def _tool_args(run: ScorerRun) -> Verdict:
    schemas = {tool.name: tool.parameters for tool in run.tools if tool.parameters}
    bad: list[str] = []
    unchecked: dict[str, int] = {}
    checked = 0
    for index, step in enumerate(run.steps):
        if step.kind != "tool":
            continue
        schema = schemas.get(step.name)
        if schema is None:
            unchecked[step.name] = unchecked.get(step.name, 0) + 1
            continue
        checked += 1
        if _fits_quickly(schema, step.arguments):
            continue
        problem = _arguments_problem(schema, step.arguments, step.name, index + 1)
        if problem:
            bad.append(f"{step.name} (step {index + 1}): {problem}")
    note = ("; no schema declared for " + ", ".join(
        f"{name} ({count} call{'s' if count > 1 else ''}, not checked)"
        for name, count in list(unchecked.items())[:5])) if unchecked else ""
    if bad:
        return False, f"{len(bad)} of {checked} call(s) do not fit: " + "; ".join(bad[:3]) + note
    if run.steps_dropped:
        return None, (f"not decided: {run.steps_dropped} of the run's steps were left out past "
                      "the bound, and their arguments are unknown")
    if not checked and unchecked:
        raise ScorerInputError(f"tool_args_valid: no tool called declares a parameters schema "
                               f"({', '.join(list(unchecked)[:5])}): nothing to check")
    return True, (f"{checked} call(s) fit their tool's schema" if checked
                  else "no tool call") + note


def _fits_quickly(schema: str, arguments: str | None) -> bool:
    """Whether the arguments fit by the schema's quick checker alone, when it needs no budget
    (no ``pattern``): what :func:`_arguments_problem` would find no problem in; ``False`` is
    no verdict (that function decides)."""
    try:
        fast = compiled(schema)
        if (fast.quick is None or fast.searches or not arguments
                or arguments.endswith(" characters cut]")):
            return False
        return fast.quick(safe_json.loads(arguments))
    except (SchemaBoundError, ValueError):
        return False


def _arguments_problem(schema: str, arguments: str | None, tool: str, step: int) -> str | None:
    text = (arguments or "").strip() or "{}"
    if text.endswith(" characters cut]"):
        return "the arguments were cut at capture's bound: not checkable"
    try:
        value = safe_json.loads(text)
    except ValueError:
        return "the arguments are not JSON"
    try:
        found = failures(compiled(schema), value)
    except SchemaBoundError as exc:
        raise ScorerInputError(f"tool_args_valid: the schema of {tool} (step {step}): {exc}"
                               ) from None
    return "; ".join(found) if found else None


def _no_argument(name: str, make: Any) -> Any:
    def build(arg: str) -> Check:
        if arg:
            raise ConfigError(f"check {name} takes no argument, got {arg!r}")
        return make()  # type: ignore[no-any-return]
    return build


def _schema_argument(arg: str) -> Check:
    if not arg:
        raise ConfigError("check json_schema needs a schema: inline JSON, a file, or "
                          "'declared' (the run's own response format)")
    return json_schema(arg)


ROWS = (
    CheckRow("json", _no_argument("json", parses_as_json), _json, aliases=("is_json",)),
    CheckRow("json_schema", _schema_argument, _json_schema, aliases=("jsonschema",)),
    CheckRow("tool_args_valid", _no_argument("tool_args_valid", tool_args_valid), _tool_args,
             aliases=("toolargsvalid", "valid_tool_args")),
)
