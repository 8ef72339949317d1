"""Installed dependencies are at or above the floors pyproject.toml sets for advisories."""

from __future__ import annotations

from importlib.metadata import version

import pytest
from packaging.version import Version

FLOORS = {"aiohttp": "3.14.1", "protobuf": "5.29.6", "requests": "2.32.4",
          "urllib3": "2.7.0", "h11": "0.16.0"}


@pytest.mark.parametrize(("package", "floor"), sorted(FLOORS.items()))
def test_no_dependency_below_its_advisory_floor(package: str, floor: str) -> None:
    assert Version(version(package)) >= Version(floor)


def test_the_floors_are_declared() -> None:
    from pathlib import Path

    declared = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    for package, floor in FLOORS.items():
        assert f'"{package}>={floor}"' in declared, package
