"""A scorer type and a result backend added from this file alone, as registry rows, and used
everywhere the built-in ones are: configured from ``OTEL_SCORERS_*`` variables, judged live on
a real span through the real SDK, emitted (evaluation span, event, metrics), written by the
backend, scored on the command line and calibrated. Nothing outside this file knows them."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from pydantic import StrictBool

from otel_scorers import registry
from otel_scorers.backends.base import Evaluated, metadata_of
from otel_scorers.cli import main
from otel_scorers.config.settings import StrictModel
from otel_scorers.judge.client import JudgeClient, Judgement, JudgeRequest
from otel_scorers.pipeline import ScoringSpanProcessor
from otel_scorers.policy import ContentPolicy
from otel_scorers.registry import Backend, Flag, Options, ScorerType, option
from otel_scorers.scorers.analysis import Analysis, Table
from otel_scorers.scorers.base import LLMScorer, Question
from otel_scorers.scorers.result import JudgeModel, ScoreResult, bounded_text
from otel_scorers.scorers.run import ScorerRun
from otel_scorers.testing import RecordedRequest, ScriptedJudgeServer, reply
from tests.support import Telemetry, end_agent_span


# -- the toy scorer type ----------------------------------------------------------------------
class MentionAnalysis(Analysis):
    word: str
    mentioned: bool
    reasoning: str

    def attributes(self, result: ScoreResult, policy: ContentPolicy) -> dict[str, Any]:
        out: dict[str, Any] = {"mention.word": self.word, "mention.found": self.mentioned}
        if policy.text(self.reasoning) is not None:
            out["mention.reasoning"] = policy.text(self.reasoning)
        return out

    def metadata(self, policy: ContentPolicy) -> dict[str, Any]:
        return {"mention": {"word": self.word, "found": self.mentioned}}

    def table(self, result: ScoreResult) -> Table | None:
        return Table(f"{result.scorer}: mention", ("word", "verdict"),
                     ((self.word, "satisfied" if self.mentioned else "not satisfied"),),
                     verdict_column=1)


class _Answer(JudgeModel):
    reasoning: bounded_text(200)  # type: ignore[valid-type]
    mentioned: StrictBool


class MentionScorer(LLMScorer):
    """Passes when the judge finds the word in the answer."""

    def __init__(self, judge: JudgeClient, *, word: str, scale: float, name: str) -> None:
        super().__init__(judge, name=name, scale=scale, judge_options={})
        self.word = word

    def ask(self, run: ScorerRun) -> Question:
        request = JudgeRequest(
            instructions="Say whether the agent response mentions the word.",
            fields=[("word", self.word), ("agent response", run.response)],
            answer_model=_Answer, task="Answer with the JSON object.")
        return Question(request, lambda judged: self._result(run, judged))

    def _result(self, run: ScorerRun, judged: Judgement[Any]) -> ScoreResult:
        found = bool(judged.value.mentioned)
        return ScoreResult(run_id=run.run_id, scorer=self.name,
                           score=self.scale if found else 0.0, scale=self.scale,
                           label="pass" if found else "fail", passed=found,
                           reason=f"mentions {self.word}: {found}", judge=judged.usage,
                           analysis=MentionAnalysis(word=self.word, mentioned=found,
                                                    reasoning=judged.value.reasoning))


class MentionOptions(Options):
    word: str = option("hello", "the word the answer must mention",
                       env="OTEL_SCORERS_MENTION_WORD")


MENTION = ScorerType(
    name="mention", options=MentionOptions, summary="the answer mentions a word",
    build=lambda name, scale, o, judge: MentionScorer(judge, word=o.word, scale=scale,
                                                      name=name),
    flags=(Flag("word", "Mention: the word the answer must mention."),))


# -- the toy backend ----------------------------------------------------------------------------
WRITTEN: dict[str, list[dict[str, Any]]] = {}


class NotebookSettings(StrictModel):
    page: str | None = option(None, "write every result into this notebook page",
                              env="OTEL_SCORERS_NOTEBOOK_PAGE")


class NotebookSink:
    name = "notebook"
    max_batch = 10

    def __init__(self, page: str, policy: ContentPolicy) -> None:
        self.page, self.policy = page, policy

    async def write(self, batch: Sequence[Evaluated]) -> None:
        WRITTEN.setdefault(self.page, []).extend(
            {"span_id": item.span_id, "scorer": item.result.scorer, "score": item.result.score,
             "metadata": metadata_of(item, self.policy)} for item in batch)


NOTEBOOK = Backend(name="notebook", title="Notebook", settings=NotebookSettings,
                   enabled=lambda block: bool(block.page),
                   writer=lambda block, policy: NotebookSink(block.page, policy),
                   describe=lambda block: f"notebook page {block.page}")


@pytest.fixture
def plugins() -> Iterator[None]:
    registry.register(MENTION)
    registry.register(NOTEBOOK)
    WRITTEN.clear()
    yield
    registry.unregister("mention")
    registry.unregister("notebook")


def mention_responder(request: RecordedRequest) -> Any:
    fields = request.fields
    found = fields.get("word", "?") in fields.get("agent response", "")
    return reply({"reasoning": "looked for the word", "mentioned": found})


def judge_env(monkeypatch: pytest.MonkeyPatch, server: ScriptedJudgeServer) -> None:
    monkeypatch.setenv("OTEL_SCORERS_JUDGE_MODEL", server.model)
    monkeypatch.setenv("OTEL_SCORERS_JUDGE_API_BASE", server.url)
    monkeypatch.setenv("OTEL_SCORERS_JUDGE_API_KEY", "test-key")


def test_a_scorer_type_and_a_backend_from_this_file_run_live_from_the_environment(
        plugins: None, judge_server: ScriptedJudgeServer, telemetry: Telemetry,
        monkeypatch: pytest.MonkeyPatch) -> None:
    judge_server.responder = mention_responder
    judge_env(monkeypatch, judge_server)
    monkeypatch.setenv("OTEL_SCORERS_SCORERS", "mention")
    monkeypatch.setenv("OTEL_SCORERS_MENTION_WORD", "Paris")
    monkeypatch.setenv("OTEL_SCORERS_NOTEBOOK_PAGE", "p1")
    processor = ScoringSpanProcessor(tracer_provider=telemetry.tracer_provider,
                                     meter_provider=telemetry.meter_provider,
                                     logger_provider=telemetry.logger_provider)
    assert not processor.disabled_because, processor.disabled_because
    telemetry.tracer_provider.add_span_processor(processor)
    telemetry.tracer_provider.add_span_processor(SimpleSpanProcessor(telemetry.spans_out))
    try:
        end_agent_span(telemetry, prompt="Where?", answer="In Paris, by the river.")
        end_agent_span(telemetry, prompt="Where?", answer="In Rome.")
        assert processor.force_flush(20_000)
        assert processor.stats()["mention"]["scored"] == 2
        spans = telemetry.evaluation_spans("mention")
        found = sorted(span.attributes["otel_scorers.mention.found"] for span in spans)
        assert found == [False, True]
        assert {span.attributes["otel_scorers.mention.word"] for span in spans} == {"Paris"}
        assert {span.attributes["gen_ai.evaluation.score.label"] for span in spans} == {
            "pass", "fail"}
        events = [r for r in telemetry.logs()
                  if r.log_record.attributes.get("gen_ai.evaluation.name") == "mention"]
        assert len(events) == 2
        assert telemetry.metric_value("otel_scorers.evaluations", scorer="mention") == 2
        written = WRITTEN["p1"]
        assert len(written) == 2 and {w["metadata"]["mention"]["found"] for w in written} == {
            True, False}
        assert processor.health()["sinks"]["notebook"]["written"] == 2
    finally:
        processor.shutdown()


def test_the_scorer_type_scores_on_the_command_line_and_calibrates(
        plugins: None, judge_server: ScriptedJudgeServer, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    judge_server.responder = mention_responder
    judge_env(monkeypatch, judge_server)
    # calibrate: labelled cases of the new kind, the judge's agreement measured
    cases = tmp_path / "cases.jsonl"
    lines = [{"schema": 1, "id": f"m{i}", "domain": "toys", "scorer": "mention",
              "run": {"input": "Say hi", "output": output},
              "expected": {"label": label}, "rationale": "says it or not"}
             for i, (output, label) in enumerate([("hello there", "pass"), ("bye", "fail"),
                                                  ("well, hello", "pass"),
                                                  ("hello!", "fail")])]  # one mislabelled
    cases.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = CliRunner().invoke(main, ["calibrate", "--cases", str(cases), "--scorer",
                                       "mention", "--json", "-"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["cases"] == 4 and report["errors"] == 0
    assert report["pass_agreement"] == 0.75
    # the type's own flag on `score`, and its analysis shown by itself
    result = CliRunner().invoke(main, ["score", "--scorer", "mention", "--word", "river",
                                       "--output", "by the river"])
    assert result.exit_code == 0, result.output
    assert "mention" in result.output and "river" in result.output
    assert judge_server.requests[-1].fields["word"] == "river"


def test_the_rows_reach_the_settings_table_and_the_reference(plugins: None) -> None:
    from otel_scorers.config.environment import ENV_VARS
    from otel_scorers.config.params import reference_table, scorer_types_table

    assert {"OTEL_SCORERS_MENTION_WORD", "OTEL_SCORERS_NOTEBOOK_PAGE"} <= set(ENV_VARS)
    assert "`mention`" in scorer_types_table()
    assert "`notebook.page`" in reference_table()
    with pytest.raises(ValueError, match="a row named 'mention' is registered already"):
        registry.register(MENTION.__class__(**{**MENTION.__dict__}))


def test_without_the_rows_the_names_are_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    from otel_scorers.config import ScorerSettings, Settings

    with pytest.raises(ValueError, match="unknown scorer type 'mention'"):
        ScorerSettings.model_validate({"type": "mention"})
    with pytest.raises(ValueError, match="unknown setting 'notebook'"):
        Settings.model_validate({"notebook": {"page": "p"}})


def test_rows_from_other_packages_come_through_entry_points(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    class Entry:
        def __init__(self, name: str, value: str, loaded: Any) -> None:
            self.name, self.value, self._loaded = name, value, loaded

        def load(self) -> Any:
            if isinstance(self._loaded, Exception):
                raise self._loaded
            return self._loaded

    entries = [Entry("mention", "toys:MENTION", MENTION),
               Entry("broken", "toys:BROKEN", ImportError("no module named toys"))]
    monkeypatch.setattr(registry, "_entry_points", lambda group: entries)
    try:
        with caplog.at_level("WARNING"):
            assert registry.load_group(registry.SCORER_GROUP) == 1
        assert registry.scorer_type("mention") is MENTION
        assert "toys:BROKEN" in caplog.text and "left out" in caplog.text
    finally:
        registry.unregister("mention")
