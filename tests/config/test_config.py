"""Settings precedence (argument > env > file > default), validation, check-config, zero-code."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from otel_scorers import ConfigError
from otel_scorers.cli import main
from otel_scorers.config import ENV_VARS, load_settings
from otel_scorers.pipeline import ScoringSpanProcessor
from otel_scorers.testing import ScriptedJudgeServer, judge_responder

FILE = textwrap.dedent("""\
    judge:
      model: openai/from-file
      timeout_s: 12
    sampling:
      ratio: 0.25
      rate_limit: 3
    queue_size: 99
    concurrency: 3
    rubrics:
      billing: "- mentions the invoice"
    scorers:
      - type: rubric
        criteria: ["answers the question"]
      - type: prompt_alignment
        evaluation_mode: user
        scale: 10
""")


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "scorers.yaml"
    path.write_text(FILE)
    return path


def test_precedence(config_file: Path) -> None:
    env = {"OTEL_SCORERS_SAMPLE_RATIO": "0.5", "OTEL_SCORERS_CONCURRENCY": "5",
           "OTEL_SCORERS_CONFIG": str(config_file)}
    resolved = load_settings({"concurrency": 7}, env=env)
    settings, sources = resolved.settings, resolved.sources
    assert settings.concurrency == 7 and sources["concurrency"] == "argument"
    assert settings.sampling.ratio == 0.5
    assert sources["sampling.ratio"] == "env OTEL_SCORERS_SAMPLE_RATIO"
    assert settings.sampling.rate_limit == 3
    assert sources["sampling.rate_limit"] == f"file {config_file}"
    assert settings.queue_size == 99 and settings.judge.model == "openai/from-file"
    assert settings.cache_ttl_s == 600 and sources["cache_ttl_s"] == "default"
    assert settings.scorers[1].evaluation_mode == "user" and settings.scorers[1].scale == 10


def test_env_is_read_at_load_not_import(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SCORERS_QUEUE_SIZE", "17")
    assert load_settings().settings.queue_size == 17
    monkeypatch.setenv("OTEL_SCORERS_QUEUE_SIZE", "18")
    assert load_settings().settings.queue_size == 18


@pytest.mark.parametrize(("name", "value"), [
    ("OTEL_SCORERS_SAMPLE_RATIO", "abc"), ("OTEL_SCORERS_SAMPLE_RATIO", "5"),
    ("OTEL_SCORERS_EVENTS", "maybe"), ("OTEL_SCORERS_REASONS", "some"),
    ("OTEL_SCORERS_ALIGNMENT_MODE", "everything"),
])
def test_bad_env_value_warns_and_falls_back(name: str, value: str,
                                             caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="otel_scorers.config"):
        settings = load_settings(env={name: value}).settings
    assert settings == load_settings(env={}).settings
    assert name in caplog.text


def test_bad_file_and_bad_arguments_raise(tmp_path: Path) -> None:
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("judge:\n  modle: typo\n")
    with pytest.raises(ConfigError, match="modle"):
        load_settings(config=unknown, env={})
    bad_type = tmp_path / "type.yaml"
    bad_type.write_text("sampling:\n  ratio: lots\n")
    with pytest.raises(ConfigError, match="ratio"):
        load_settings(config=bad_type, env={})
    not_yaml = tmp_path / "x.yaml"
    not_yaml.write_text("a: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_settings(config=not_yaml, env={})
    with pytest.raises(ConfigError, match="cannot read"):
        load_settings(config=tmp_path / "missing.yaml", env={})
    with pytest.raises(ConfigError, match="queue_size"):
        load_settings({"queue_size": 0}, env={})


def test_env_scorer_list_and_mode() -> None:
    settings = load_settings(env={"OTEL_SCORERS_SCORERS": "prompt_alignment",
                                  "OTEL_SCORERS_ALIGNMENT_MODE": "system",
                                  "OTEL_SCORERS_RUBRIC": "- be kind"}).settings
    assert [(s.type, s.evaluation_mode) for s in settings.scorers] == [
        ("prompt_alignment", "system")]
    assert settings.rubrics == {"*": "- be kind"}


def test_processor_from_file(config_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SCORERS_CONFIG", str(config_file))
    processor = ScoringSpanProcessor(concurrency=2)
    try:
        names = [s.name for s in processor.scorers]
        assert names == ["rubric", "prompt_alignment"]
        rubric, alignment = processor.scorers
        assert [c.description for c in rubric.criteria] == ["answers the question"]  # type: ignore[attr-defined]
        assert alignment.scale == 10.0  # type: ignore[attr-defined]
        assert rubric.judge.model == "openai/from-file"  # type: ignore[attr-defined]
        assert processor.settings.concurrency == 2 and processor.settings.queue_size == 99
    finally:
        processor.shutdown()


def test_every_env_var_is_documented() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    for name in [*ENV_VARS, "OTEL_SCORERS_CONFIG"]:
        assert f"`{name}`" in readme, name


def test_check_config_cli(config_file: Path) -> None:
    env = {"OTEL_SCORERS_SAMPLE_RATIO": "0.5", "OTEL_SCORERS_JUDGE_API_KEY": "sk-secret-xyz",
           "COLUMNS": "200"}
    result = CliRunner(env=env).invoke(main, ["check-config", "--config", str(config_file)],
                                       terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "sampling.ratio" in result.output and "env OTEL_SCORERS_SAMPLE_RATIO" in result.output
    assert f"file {config_file}" in result.output
    assert "sk-secret-xyz" not in result.output and "****" in result.output
    as_json = CliRunner(env=env).invoke(main, ["check-config", "--config", str(config_file),
                                               "--json"])
    assert json.loads(as_json.output)["sampling"]["ratio"] == 0.5
    bad = config_file.with_name("bad.yaml")
    bad.write_text("nonsense_key: 1\n")
    failed = CliRunner().invoke(main, ["check-config", "--config", str(bad)])
    assert failed.exit_code == 1 and "nonsense_key" in failed.output


APP = textwrap.dedent("""\
    import json, time
    from opentelemetry import trace
    tracer = trace.get_tracer("app")
    with tracer.start_as_current_span("invoke_agent", attributes={
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.input.messages": json.dumps([{"role": "user", "content": "Hi"}]),
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "content": "Hello"}]),
    }):
        pass
    provider = trace.get_tracer_provider()
    provider.force_flush()
    processors = provider._active_span_processor._span_processors
    scoring = [p for p in processors if type(p).__name__ == "ScoringSpanProcessor"]
    print(json.dumps({"installed": len(scoring),
                      "stats": scoring[0].stats() if scoring else None}))
""")


@pytest.mark.slow
@pytest.mark.parametrize("enabled", [True, False])
def test_zero_code_with_opentelemetry_instrument(tmp_path: Path,
                                                 judge_server: ScriptedJudgeServer,
                                                 enabled: bool) -> None:
    judge_server.responder = judge_responder()
    app = tmp_path / "app.py"
    app.write_text(APP)
    env = {**os.environ, "OTEL_SCORERS_ENABLED": str(enabled).lower(),
           "OTEL_SCORERS_JUDGE_MODEL": judge_server.model,
           "OTEL_SCORERS_JUDGE_API_BASE": judge_server.url, "OTEL_SCORERS_JUDGE_API_KEY": "k",
           "OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none",
           "OTEL_LOGS_EXPORTER": "none", "OTEL_SERVICE_NAME": "zero-code-test"}
    exe = Path(sys.executable).with_name("opentelemetry-instrument")
    out = subprocess.run([str(exe), sys.executable, str(app)], capture_output=True, text=True,
                         env=env, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    if enabled:
        assert report["installed"] == 1
        assert report["stats"] == {"rubric": {"selected": 1, "filtered": 1},  # no rubric given
                                   "prompt_alignment": {"selected": 1, "scored": 1}}
    else:
        assert report["installed"] == 0
        assert judge_server.requests == []
