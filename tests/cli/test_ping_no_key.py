"""``check-config --ping`` with no key says nothing was reached (issue 54): the call stops before
it is sent, so "reached, but the call FAILED (auth)" was false."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from otel_scorers.cli import main


def test_ping_with_no_key_reaches_nothing_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OTEL_SCORERS_JUDGE_API_KEY", "OTEL_SCORERS_JUDGE_API_BASE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OTEL_SCORERS_JUDGE_MODEL", "openai/gpt-5-mini")
    result = CliRunner().invoke(main, ["check-config", "--ping", "--json"])
    assert result.exit_code == 1, result.output
    assert '"reachable": false' in result.output and '"error_type": "auth"' in result.output
    text = CliRunner().invoke(main, ["check-config", "--ping"]).output
    assert "judge openai/gpt-5-mini: NOT called: its API key is missing (auth)" in text, text
    assert "reached, but" not in text
    assert "set OPENAI_API_KEY or OTEL_SCORERS_JUDGE_API_KEY" in text
