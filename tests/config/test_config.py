"""Settings precedence (argument > env > file > default), validation, check-config, zero-code."""

from __future__ import annotations

import json
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
from tests.support import doc

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
    assert settings.scorers[1].options.evaluation_mode == "user" and settings.scorers[1].scale == 10


def test_env_is_read_at_load_not_import(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SCORERS_QUEUE_SIZE", "17")
    assert load_settings().settings.queue_size == 17
    monkeypatch.setenv("OTEL_SCORERS_QUEUE_SIZE", "18")
    assert load_settings().settings.queue_size == 18


@pytest.mark.parametrize(("name", "value"), [
    ("OTEL_SCORERS_SAMPLE_RATIO", "abc"), ("OTEL_SCORERS_SAMPLE_RATIO", "5"),
    ("OTEL_SCORERS_EVENTS", "maybe"), ("OTEL_SCORERS_REASONS", "some"),
    ("OTEL_SCORERS_ALIGNMENT_MODE", "everything"),
    # JSON that does not parse is an error, never one criterion with brackets in it
    ("OTEL_SCORERS_RUBRIC", '[{"description": "greets the user"'),
    ("OTEL_SCORERS_RUBRIC", "[]"),
])
def test_bad_env_value_is_an_error_naming_it(name: str, value: str) -> None:
    # falling back (the SDK's way) would judge every run with no budget: an error instead
    from otel_scorers.errors import EnvConfigError

    with pytest.raises(EnvConfigError, match=name):
        load_settings(env={name: value})


def test_a_rubric_variable_is_a_checklist_or_a_json_list_of_criteria() -> None:
    rubric = load_settings(env={"OTEL_SCORERS_RUBRIC": '["greets the user", {"description": '
                                '"is polite", "required": false}]'}).settings.rubrics["*"]
    assert isinstance(rubric, list) and len(rubric) == 2
    assert rubric[0] == "greets the user" and rubric[1].required is False
    checklist = "- greets the user\n- is polite"
    assert load_settings(env={"OTEL_SCORERS_RUBRIC": checklist}).settings.rubrics["*"] == (
        checklist)


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
    assert [(s.type, s.options.evaluation_mode) for s in settings.scorers] == [
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
    reference = doc("configuration.md")
    for name in [*ENV_VARS, "OTEL_SCORERS_CONFIG"]:
        assert f"`{name}`" in reference, name


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
    assert failed.exit_code == 2 and "nonsense_key" in failed.output  # a configuration error


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


@pytest.mark.parametrize(("env", "message"), [
    ({"OTEL_SCORERS_SAMPLE_RATE": "0.1"},
     "OTEL_SCORERS_SAMPLE_RATE is not an otel-scorers setting; did you mean "
     "OTEL_SCORERS_SAMPLE_RATIO?"),
    ({"OTEL_SCORERS_SAMPLE_RATIO": "abc"}, "OTEL_SCORERS_SAMPLE_RATIO='abc'"),
    ({"OTEL_SCORERS_SAMPLE_RATIO": "1.5"}, "less than or equal to 1"),
    ({"OTEL_SCORERS_BUDGET_COST_PER_HOUR": "-2"}, "greater than 0"),
    ({"OTEL_SCORERS_ENABLED": "yes please"}, "OTEL_SCORERS_ENABLED='yes please'"),
])
def test_a_bad_environment_is_an_error_never_a_silent_fallback(
        env: dict[str, str], message: str) -> None:
    from otel_scorers.errors import EnvConfigError

    with pytest.raises(EnvConfigError) as raised:
        load_settings(env=env)
    assert message in str(raised.value)


def test_a_bad_environment_disables_the_processor_with_one_logged_error(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from otel_scorers import RubricScorer
    from otel_scorers.pipeline import ScoringSpanProcessor

    monkeypatch.setenv("OTEL_SCORERS_SAMPLE_RATIO", "abc")
    monkeypatch.setenv("OTEL_SCORERS_JUDGE_API_KEY", "sk-never-print-me-1234567890")
    monkeypatch.setenv("OTEL_SCORERS_JUDGE_TIMEOUT", "-1")
    with caplog.at_level("ERROR", logger="otel_scorers"):
        processor = ScoringSpanProcessor([RubricScorer("openai/x", "- y")])
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and "scoring is disabled" in errors[0]
    assert "OTEL_SCORERS_SAMPLE_RATIO='abc'" in errors[0]
    assert "sk-never-print-me" not in errors[0]
    provider = TracerProvider()
    exported = InMemorySpanExporter()
    provider.add_span_processor(processor)
    provider.add_span_processor(SimpleSpanProcessor(exported))
    with provider.get_tracer("app").start_as_current_span(
            "agent", attributes={"gen_ai.operation.name": "invoke_agent"}):
        pass
    assert processor.stats() == {"rubric": {}}  # nothing selected, nothing judged
    assert len(exported.get_finished_spans()) == 1  # the app's span still went out
    provider.shutdown()


def test_check_config_exits_2_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from otel_scorers.cli import main

    monkeypatch.setenv("OTEL_SCORERS_BUDGET_TOKENS_PER_HOUR", "lots")
    result = CliRunner().invoke(main, ["check-config"])
    assert result.exit_code == 2
    assert "OTEL_SCORERS_BUDGET_TOKENS_PER_HOUR='lots'" in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1


def test_scorer_names_are_accepted_in_both_spellings(tmp_path: Path) -> None:
    settings = load_settings(env={"OTEL_SCORERS_SCORERS": "prompt-alignment"}).settings
    assert [s.type for s in settings.scorers] == ["prompt_alignment"]
    path = tmp_path / "c.yaml"
    path.write_text("scorers:\n  - {type: prompt-alignment}\n  - {type: rubric}\n")
    assert [s.type for s in load_settings(config=path, env={}).settings.scorers] == [
        "prompt_alignment", "rubric"]
    path.write_text("scorers:\n  - {type: alignment}\n")
    with pytest.raises(ConfigError, match="prompt_alignment"):
        load_settings(config=path, env={})


HTTPX_APP = textwrap.dedent("""\
    import sys, httpx
    httpx.get(sys.argv[1] + "/health-of-nothing")  # traced by the httpx instrumentation
""")


@pytest.mark.slow
def test_a_bad_zero_code_configuration_leaves_the_other_instrumentations_running(
        tmp_path: Path, judge_server: ScriptedJudgeServer) -> None:
    app = tmp_path / "app.py"
    app.write_text(HTTPX_APP)
    env = {**os.environ, "OTEL_SCORERS_ENABLED": "true", "OTEL_SCORERS_SAMPLE_RATIO": "abc",
           "OTEL_TRACES_EXPORTER": "console", "OTEL_METRICS_EXPORTER": "none",
           "OTEL_LOGS_EXPORTER": "none", "OTEL_SERVICE_NAME": "bad-config-app"}
    exe = Path(sys.executable).with_name("opentelemetry-instrument")
    out = subprocess.run([str(exe), sys.executable, str(app), judge_server.url], env=env,
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    errors = [line for line in out.stderr.splitlines() if "otel-scorers" in line]
    assert len(errors) == 1 and "scoring is disabled" in errors[0], out.stderr
    assert "OTEL_SCORERS_SAMPLE_RATIO='abc'" in errors[0]
    assert '"http.request.method": "GET"' in out.stdout or '"http.method": "GET"' in out.stdout
    assert "Traceback" not in out.stderr
