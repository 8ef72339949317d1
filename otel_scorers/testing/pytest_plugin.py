"""pytest fixtures for your own tests: ``pytest_plugins = ["otel_scorers.testing.pytest_plugin"]``.

- ``scripted_judge``: a :class:`ScriptedJudgeServer` for the test, emptied afterwards; a test
  that leaves scripted answers unused fails.
- ``captured_telemetry``: :class:`CapturedTelemetry` providers, shut down afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from otel_scorers.testing.judge_server import ScriptedJudgeServer
from otel_scorers.testing.telemetry import CapturedTelemetry

__all__ = ["captured_telemetry", "scripted_judge"]


@pytest.fixture
def scripted_judge() -> Iterator[ScriptedJudgeServer]:
    with ScriptedJudgeServer() as server:
        yield server
        leftover = server.pending
    assert leftover == 0, f"{leftover} scripted judge answer(s) were never requested"


@pytest.fixture
def captured_telemetry() -> Iterator[CapturedTelemetry]:
    captured = CapturedTelemetry.create()
    yield captured
    captured.shutdown()
