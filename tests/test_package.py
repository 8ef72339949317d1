"""The package as users get it: ``python -m build`` makes an sdist and, from it, a wheel; each
installs in a fresh virtual environment and runs ``demo --help``, ``serve --help`` and a
scoring example against the scripted judge, imported from that environment, not this checkout.

The fresh environments take their dependencies from the test environment (on ``PYTHONPATH``,
whose ``.pth`` files Python does not run, so the editable install of this checkout stays out);
what is checked is the artifacts: their modules, package data and entry points. The README's
own install line is followed from scratch in tests/test_install.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

from otel_scorers.testing import ScriptedJudgeServer, judge_responder

ROOT = Path(__file__).resolve().parents[1]


def _source(into: Path) -> Path:
    """The checkout's files as a clean clone has them (tracked and new, nothing ignored)."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            target = into / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return into


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_sdist_and_the_wheel_install_and_run(tmp_path: Path,
                                                 judge_server: ScriptedJudgeServer) -> None:
    dist = tmp_path / "dist"
    built = subprocess.run([sys.executable, "-m", "build", "--outdir", str(dist),
                            str(_source(tmp_path / "src"))],
                           capture_output=True, text=True, timeout=600, check=False)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-3000:]
    (wheel,) = dist.glob("otel_scorers-*.whl")
    (sdist,) = dist.glob("otel_scorers-*.tar.gz")
    names = zipfile.ZipFile(wheel).namelist()
    for needed in ("otel_scorers/py.typed", "otel_scorers/cli/__init__.py",
                   "otel_scorers/backends/phoenix.py"):
        assert needed in names, needed
    assert any(n.startswith("otel_scorers/calibration/") and n.endswith(".jsonl")
               for n in names)
    assert any(n.endswith("entry_points.txt") for n in names)
    assert not any(n.startswith("tests/") for n in names)
    with tarfile.open(sdist) as archive:
        members = archive.getnames()
    assert any(m.endswith("/pyproject.toml") for m in members)
    assert any(m.endswith("/README.md") for m in members)

    judge_server.responder = judge_responder(satisfied=True)
    deps = sysconfig.get_paths()["purelib"]
    for artifact in (wheel, sdist):
        home = tmp_path / f"venv-{artifact.suffix.strip('.')}"
        venv.EnvBuilder(with_pip=True).create(home)
        clean = {k: v for k, v in os.environ.items()
                 if not k.startswith(("OTEL_", "VIRTUAL_ENV", "PYTHON"))}
        pip = subprocess.run([str(home / "bin" / "python"), "-m", "pip", "install", "--quiet",
                              "--disable-pip-version-check", "--no-deps", str(artifact)],
                             capture_output=True, text=True, env=clean, timeout=600,
                             check=False)
        assert pip.returncode == 0, pip.stderr[-3000:]
        env = {**clean, "PYTHONPATH": deps}
        cli = str(home / "bin" / "otel-scorers")
        where = subprocess.run([str(home / "bin" / "python"), "-c",
                                "import otel_scorers; print(otel_scorers.__file__)"],
                               cwd=tmp_path, capture_output=True, text=True, env=env,
                               timeout=120, check=True).stdout
        assert where.startswith(str(home)), where  # the installed copy, not the checkout
        for command in (["demo", "--help"], ["serve", "--help"]):
            shown = subprocess.run([cli, *command], cwd=tmp_path, capture_output=True,
                                   text=True, env=env, timeout=120, check=False)
            assert shown.returncode == 0 and "Usage:" in shown.stdout, shown.stderr[-2000:]
        scored = subprocess.run(
            [cli, "score", "--criteria", "- greets the user", "--input", "Hi!", "--output",
             "Hello, how can I help?", "--model", judge_server.model, "--api-base",
             judge_server.url, "--api-key", "k", "--json"], cwd=tmp_path,
            capture_output=True, text=True, env=env, timeout=120, check=False)
        assert scored.returncode == 0, scored.stderr[-2000:]
        result = json.loads(scored.stdout)
        assert (result["score"], result["label"]) == (1.0, "pass"), result
