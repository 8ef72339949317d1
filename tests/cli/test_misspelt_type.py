"""A misspelt scorer type (issue 54): the closest type is named, and the types are listed once,
wherever the type was written (a config file, the environment, a command's option)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from otel_scorers.cli import main


def _said(output: str) -> None:
    assert "unknown scorer type 'rubrc'; did you mean 'rubric'?" in output, output
    assert output.count("prompt_alignment") == 1, output  # the types, once


def test_a_config_file(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("judge: {model: openai/x}\nscorers: [{type: rubrc}]\n")
    result = CliRunner().invoke(main, ["check-config", "--config", str(config)])
    assert result.exit_code == 2
    _said(result.output)


def test_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SCORERS_SCORERS", "rubrc")
    result = CliRunner().invoke(main, ["check-config"])
    assert result.exit_code == 2
    _said(result.output)


def test_an_option() -> None:
    result = CliRunner().invoke(main, ["score", "--scorer", "rubrc"])
    assert result.exit_code == 2
    _said(result.output)
    far = CliRunner().invoke(main, ["score", "--scorer", "zzz"])
    assert "did you mean" not in far.output and "unknown scorer type 'zzz'" in far.output
