"""A new user's install, in a fresh virtual environment: ``pip install "otel-scorers[instrument]"``
from this checkout, then the README's zero-code command on a small application, judged by the
scripted judge. Nothing from the development environment is visible to it.

This needs the package registry (the README's install does too); pip's cache makes repeats quick
(about 40 s on 2 cores)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import textwrap
import venv
from pathlib import Path

import pytest

from otel_scorers.testing import ScriptedJudgeServer, judge_responder

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()

APP = textwrap.dedent("""\
    import json
    from opentelemetry import trace

    tracer = trace.get_tracer("support-bot")
    with tracer.start_as_current_span("invoke_agent support-bot", attributes={
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "support-bot",
        "gen_ai.input.messages": json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": "Reset my password"}]}]),
        "gen_ai.output.messages": json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": "Use the link."}]}]),
    }):
        pass
    # no force_flush: the scores must still get out at exit
""")


def _readme_zero_code() -> tuple[str, dict[str, str], list[str]]:
    """The README's zero-code block: its install line, its variables and its command."""
    block = README.split("**Zero-code.**", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    install = next(line for line in block.splitlines() if line.startswith("pip install"))
    command = " ".join(line.rstrip("\\").strip() for line in block.splitlines()
                       if line.strip() and not line.startswith("pip install")
                       and not line.lstrip().startswith("#"))
    words = command.split()
    variables = dict(w.split("=", 1) for w in words if re.fullmatch(r"[A-Z_]+=\S+", w))
    rest = [w for w in words if not re.fullmatch(r"[A-Z_]+=\S+", w)]
    return install, variables, rest


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_fresh_venv_follows_the_readme_install_and_zero_code_steps(
        tmp_path: Path, judge_server: ScriptedJudgeServer) -> None:
    install, variables, command = _readme_zero_code()
    assert install.split("#")[0].strip() == 'pip install -e ".[instrument]"'
    assert command[:2] == ["opentelemetry-instrument", "python"], command
    assert variables["OTEL_SCORERS_ENABLED"] == "true" and "OTEL_SCORERS_JUDGE_MODEL" in variables
    assert variables["OTEL_TRACES_EXPORTER"] == "console"  # a first try shows the scores

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    bin_dir = env_dir / "bin"
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("OTEL_", "VIRTUAL_ENV", "PYTHON"))}
    clean["PATH"] = f"{bin_dir}{os.pathsep}{clean.get('PATH', '')}"
    pip = subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "--quiet",
                          "--disable-pip-version-check", f"{ROOT}[instrument]"],
                         capture_output=True, text=True, env=clean, timeout=840, check=False)
    assert pip.returncode == 0, pip.stderr[-3000:]

    judge_server.responder = judge_responder()
    (tmp_path / "app.py").write_text(APP)
    env = {**clean, **variables,
           # the README's model, pointed at the scripted judge instead of the provider
           "OTEL_SCORERS_JUDGE_MODEL": judge_server.model,
           "OTEL_SCORERS_JUDGE_API_BASE": judge_server.url, "OTEL_SCORERS_JUDGE_API_KEY": "k",
           "OTEL_SCORERS_SAMPLE_RATIO": "1",
           "OTEL_SCORERS_RUBRIC": "- Answers the question",
           "OTEL_SERVICE_NAME": "fresh-install-app"}
    out = subprocess.run([str(bin_dir / command[0]), str(bin_dir / "python"), "app.py"],
                         cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300,
                         check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    spans = [json.loads(chunk) for chunk in re.findall(r"^\{.*?^\}", out.stdout, re.S | re.M)]
    evaluations = {s["attributes"].get("gen_ai.evaluation.name"): s["attributes"]
                   for s in spans if s["name"].startswith("gen_ai.evaluation")}
    assert set(evaluations) == {"rubric", "prompt_alignment"}, out.stdout[-3000:]
    assert evaluations["rubric"]["gen_ai.evaluation.score.label"] == "pass"
    assert isinstance(evaluations["prompt_alignment"]["gen_ai.evaluation.score.value"], float)
    assert any(s["name"] == "invoke_agent support-bot" for s in spans)
    # the demo without the embedded judge says what to install, on one line, and exits 2
    demo = subprocess.run([str(bin_dir / "otel-scorers"), "demo"], cwd=tmp_path,
                          capture_output=True, text=True, env=clean, timeout=120, check=False)
    assert demo.returncode == 2, demo.stdout + demo.stderr
    assert "pip install 'otel-scorers[local]'" in demo.stderr
    assert demo.stdout == "" and len(demo.stderr.strip().splitlines()) == 1, demo.stderr
