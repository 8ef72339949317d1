"""How a variable's text becomes a setting's value where the field's type cannot say: a
boolean, a comma list, a rubric (a checklist, or JSON that must parse)."""

from __future__ import annotations

from typing import Any

__all__ = ["parse_bool", "parse_list", "parse_rubric_value"]


def parse_bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"not a boolean: {text!r}")


def parse_rubric_value(text: str) -> str | list[Any]:
    """A rubric from a variable: a checklist (one criterion per line), or, when it starts
    with ``[`` or ``{``, a JSON list of criteria (or one criterion): JSON that does not
    parse is an error, never criterion text."""
    from otel_scorers import safe_json

    stripped = text.strip()
    if not stripped.startswith(("[", "{")):
        return text
    try:
        value = safe_json.loads(stripped)
    except ValueError as exc:
        raise ValueError(f"it starts like JSON but is not JSON ({exc})") from None
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list) or not value:
        raise ValueError("a JSON rubric is a non-empty list of criteria")
    return value


def parse_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]
