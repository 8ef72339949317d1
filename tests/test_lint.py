"""The code stays ruff- and mypy --strict-clean: checked in the suite so CI enforces it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.parametrize("command", [
    ["ruff", "check", "otel_scorers", "tests", "examples", "bench"],
    ["mypy"],
], ids=["ruff", "mypy"])
def test_static_checks(command: list[str]) -> None:
    tool = Path(sys.executable).with_name(command[0])
    out = subprocess.run([str(tool), *command[1:]], cwd=ROOT, capture_output=True, text=True,
                         timeout=600, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
