"""The README reads in ten minutes and says only what is true: its size, its links, its code
(every Python block compiles; the "Add it to your app" snippet runs and prints scores on the
console with no collector), every ``OTEL_SCORERS_*`` name in it and in docs/ is a real setting,
and every ``otel-scorers`` option it shows exists."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import click

from otel_scorers.cli import main
from otel_scorers.config.environment import ENV_VARS, OTHER_VARS
from otel_scorers.testing import ScriptedJudgeServer, judge_responder

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
DOCS = {path.name: path.read_text() for path in (ROOT / "docs").glob("*.md")}
BLOCKS = re.findall(r"```(\w+)\n(.*?)```", README, re.S)


def test_the_readme_is_short() -> None:
    assert len(README.encode()) <= 25 * 1024


def test_every_link_in_the_readme_and_docs_leads_somewhere() -> None:
    for name, text in [("README.md", README), *DOCS.items()]:
        base = ROOT if name == "README.md" else ROOT / "docs"
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if target.startswith("http"):
                continue
            assert (base / target).exists(), f"{name} links to {target}"


def test_the_docs_speak_to_users_not_to_the_team() -> None:
    """No internal reference (the team's spec sections, issue numbers) in what users read."""
    internal = re.compile(r"\bSPEC\b|§|\b[Ii]ssue \d+")
    for name, text in [("README.md", README), *DOCS.items()]:
        assert not internal.search(text), f"{name}: {internal.search(text)}"


def test_every_python_block_compiles() -> None:
    for language, code in BLOCKS:
        if language == "python":
            compile(code, "README.md", "exec")


def test_every_variable_named_is_a_setting() -> None:
    # the configuration page's example of a misspelling (and the hint it gets)
    known = {*ENV_VARS, *OTHER_VARS, "OTEL_SCORERS_SAMPLE_RATE"}
    for name, text in [("README.md", README), *DOCS.items()]:
        for variable in set(re.findall(r"OTEL_SCORERS_[A-Z_]+[A-Z]", text)):
            assert variable in known, f"{name} names {variable}, which is no setting"


def test_every_command_option_shown_exists() -> None:
    for language, code in BLOCKS:
        if language != "sh":
            continue
        for line in code.replace("\\\n", " ").splitlines():
            words = line.split("#", 1)[0].split()
            if "otel-scorers" not in words:
                continue
            rest = words[words.index("otel-scorers") + 1:]
            command = main.get_command(click.Context(main), rest[0])
            assert command is not None, line
            options = {opt for param in command.get_params(click.Context(command))
                       for opt in param.opts + getattr(param, "secondary_opts", [])}
            for word in rest[1:]:
                flag = word.strip("[]").split("=", 1)[0]
                if flag.startswith("--"):
                    assert flag in options, f"{rest[0]} has no {flag}: {line}"


def test_the_add_it_to_your_app_snippet_prints_scores_on_the_console(
        judge_server: ScriptedJudgeServer, tmp_path: Path) -> None:
    judge_server.responder = judge_responder()
    section = README.split("## Add it to your app", 1)[1]
    snippet = section.split("```python\n", 1)[1].split("```", 1)[0]
    agent = '''
import json
with trace.get_tracer("app").start_as_current_span("invoke_agent support-bot", attributes={
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support-bot",
        "gen_ai.input.messages": json.dumps([{"role": "user", "content": "Reset my password"}]),
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "content": "Use the link."}])}):
    pass
'''
    assert "# ... your agent runs" in snippet
    code = snippet.replace("# ... your agent runs, traced by its framework's instrumentation ...",
                           agent)
    (tmp_path / "app.py").write_text(code)
    env = {key: value for key, value in os.environ.items() if not key.startswith("OTEL_")}
    # the README's model string, pointed at the scripted judge instead of the provider
    env.update(OTEL_SCORERS_JUDGE_API_BASE=judge_server.url, OTEL_SCORERS_JUDGE_API_KEY="k")
    done = subprocess.run([sys.executable, "app.py"], cwd=tmp_path, env=env, text=True,
                          capture_output=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert '"name": "gen_ai.evaluation rubric"' in done.stdout, done.stdout[-3000:]
    assert '"name": "gen_ai.evaluation prompt_alignment"' in done.stdout
    assert '"gen_ai.evaluation.score.label": "pass"' in done.stdout


def test_the_documented_local_install_is_the_tuned_build() -> None:
    """The README installs the embedded judge the way make demo does (the core-only llama.cpp
    build, minutes), not with pip's default build (about 30 minutes on 2 cores)."""
    assert 'pip install -e ".[local]"' not in README
    assert "make install-local" in README
    planned = subprocess.run(["make", "-n", "install-local", "PYTHON=/x/python"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout
    assert "tools/llama-wheel.sh" in planned and "--find-links" in planned, planned
