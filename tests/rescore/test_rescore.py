"""``otel-scorers rescore``: spans exported by the real OTLP encoder, re-scored from files, give
the results live scoring gave; dry runs call no judge; interrupted runs resume."""

from __future__ import annotations

import gzip
import json
import struct
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_scorers.cli import main
from otel_scorers.otlp import OTLPDecodeError, decode_request, read_requests, request_to_json
from otel_scorers.pipeline import ScoringSpanProcessor
from otel_scorers.testing import ScriptedJudgeServer, judge_responder
from tests.support import genai_attributes

pytestmark = pytest.mark.timeout(180)

RUBRIC = "- greets the user\n- answers the question"


def _config(tmp_path: Path, server: ScriptedJudgeServer) -> Path:
    path = tmp_path / "scorers.yaml"
    path.write_text(json.dumps({
        "judge": {"model": server.model, "api_base": server.url, "api_key": "k",
                  "timeout_s": 5},
        "scorers": [{"type": "rubric", "criteria": RUBRIC.splitlines()},
                    {"type": "prompt_alignment"}],
        "cache_ttl_s": 0,
    }))
    return path


def _trace_agents(tracer: Any, count: int) -> None:
    """Agent runs, half carrying their conversation on LLM child spans only."""
    for i in range(count):
        good = i % 3 != 0
        answer = "Hello! Open Settings > Security." if good else "no."
        if i % 2:
            with tracer.start_as_current_span("invoke_agent", attributes=genai_attributes(
                    prompt=f"question {i}", answer=answer)), \
                    tracer.start_as_current_span("tool"):
                pass
        else:
            with tracer.start_as_current_span("invoke_agent", attributes={
                    "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "nested"}):
                chat = genai_attributes(prompt=f"question {i}", answer=answer)
                chat["gen_ai.operation.name"] = "chat"
                with tracer.start_as_current_span("chat", attributes=chat):
                    pass


@pytest.fixture
def live(judge_server: ScriptedJudgeServer, tmp_path: Path) -> dict[str, Any]:
    """Live scoring of 12 runs; every app span is kept for the files."""
    judge_server.responder = judge_responder(
        satisfied=lambda i, text: True, user=(0.9, 0.8, 1.0, 0.7))
    config = _config(tmp_path, judge_server)
    provider = TracerProvider()
    exported = InMemorySpanExporter()
    processor = ScoringSpanProcessor(config=config, tracer_provider=provider, events=False)
    provider.add_span_processor(processor)
    provider.add_span_processor(SimpleSpanProcessor(exported))
    _trace_agents(provider.get_tracer("app"), 12)
    assert processor.force_flush(60_000)
    processor.shutdown()
    spans = list(exported.get_finished_spans())
    app = [s for s in spans if s.instrumentation_scope.name != "otel_scorers"]
    evaluations = [s for s in spans if s.name.startswith("gen_ai.evaluation")]
    assert len(evaluations) == 24, processor.stats()
    provider.shutdown()
    return {"config": config, "app": app, "all": spans, "evaluations": evaluations}


def _write_files(tmp_path: Path, spans: list[ReadableSpan]) -> tuple[Path, Path]:
    """The same spans as OTLP JSON lines (3 requests) and length-prefixed protobuf, gzipped."""
    chunks = [spans[i::3] for i in range(3)]  # a trace's spans land in different requests
    requests = [encode_spans(chunk) for chunk in chunks]
    json_path = tmp_path / "traces.jsonl"
    json_path.write_text("".join(request_to_json(r) + "\n" for r in requests))
    proto_path = tmp_path / "traces.pb.gz"
    raw = b"".join(struct.pack(">I", len(b)) + b for b in (r.SerializeToString()
                                                          for r in requests))
    proto_path.write_bytes(gzip.compress(raw))
    return json_path, proto_path


def _live_by_key(evaluations: list[ReadableSpan]) -> dict[tuple[str, str, str], Any]:
    out = {}
    for span in evaluations:
        attrs = span.attributes
        assert span.parent is not None
        key = (f"{span.context.trace_id:032x}", f"{span.parent.span_id:016x}",
               attrs["gen_ai.evaluation.name"])
        out[key] = (attrs["otel_scorers.score"], attrs.get("otel_scorers.label"),
                    attrs["otel_scorers.reason"])
    return out


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("fmt", ["json", "protobuf"])
def test_rescore_matches_live_scoring(live: dict[str, Any], tmp_path: Path,
                                      judge_server: ScriptedJudgeServer, fmt: str) -> None:
    json_path, proto_path = _write_files(tmp_path, live["all"])  # evaluation spans included
    before = len(judge_server.requests)
    out = tmp_path / "results.jsonl"
    result = CliRunner().invoke(main, [
        "rescore", str(json_path if fmt == "json" else proto_path), "--config",
        str(live["config"]), "-o", str(out), "--concurrency", "4", "--progress"])
    assert result.exit_code == 0, result.output
    records = _records(out)
    # the evaluation spans in the file are this library's own: never selected again
    assert len(records) == 24
    assert len(judge_server.requests) - before == 24
    offline = {(r["trace_id"], r["span_id"], r["scorer"]): (r["score"], r["label"], r["reason"])
               for r in records}
    assert offline == _live_by_key(live["evaluations"])
    rubric = [r for r in records if r["scorer"] == "rubric"]
    assert all(r["passed"] for r in rubric)
    assert {r["agent"] for r in records} == {"support-bot", "nested"}
    assert all(r["analyzeStepResult"] for r in records)
    assert "24 scored" in result.output
    assert "rescoring" in result.output and "12/12" in result.output  # the progress bar


def test_dry_run_calls_no_judge(live: dict[str, Any], tmp_path: Path,
                                judge_server: ScriptedJudgeServer) -> None:
    json_path, _ = _write_files(tmp_path, live["app"])
    before = len(judge_server.requests)
    result = CliRunner().invoke(main, ["rescore", str(json_path), "--config",
                                       str(live["config"]), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert len(judge_server.requests) == before
    estimate = json.loads(result.stdout)
    assert estimate["runs"] == 12 and estimate["judge_calls"] == 24, estimate
    assert estimate["estimated_input_tokens"] > 24 * 100
    assert estimate["estimated_output_tokens"] > 0
    assert estimate["models"] == [judge_server.model]
    assert estimate["runs_by_agent"] == {"support-bot": 6, "nested": 6}
    assert len(estimate["first_runs"]) == 12 and all(
        len(r["trace_id"]) == 32 and len(r["span_id"]) == 16 for r in estimate["first_runs"])


def test_resume_skips_what_is_done_and_retries_errors(
        live: dict[str, Any], tmp_path: Path, judge_server: ScriptedJudgeServer) -> None:
    json_path, _ = _write_files(tmp_path, live["app"])
    out = tmp_path / "results.jsonl"
    args = ["rescore", str(json_path), "--config", str(live["config"]), "-o", str(out)]
    first = CliRunner().invoke(main, [*args, "--limit", "5"])
    assert first.exit_code == 0, first.output
    assert len(_records(out)) == 10
    # an interrupted write leaves a torn last line; one result became an error
    records = _records(out)
    broken = dict(records[0], score=None, error={"type": "timeout", "message": "x"})
    with out.open("a") as stream:
        stream.write(json.dumps(broken) + "\n" + '{"trace_id": "ab')
    before = len(judge_server.requests)
    second = CliRunner().invoke(main, args)
    assert second.exit_code == 0, second.output
    assert "4 already in" in second.output  # 5 done, one of them now an error: judged again
    # resume is per (span, scorer): 7 untouched runs x 2 scorers, and only the failed scorer
    # of the broken run (its other scorer's result stands and is not written twice)
    assert len(judge_server.requests) - before == 15
    final: dict[tuple[str, str, str], dict[str, Any]] = {}
    lines: dict[tuple[str, str, str], int] = {}
    for line in out.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        key = (record["trace_id"], record["span_id"], record["scorer"])
        final[key] = record
        lines[key] = lines.get(key, 0) + 1
    assert len(final) == 24
    assert all("error" not in r and r["score"] is not None for r in final.values())
    broken_key = (broken["trace_id"], broken["span_id"], broken["scorer"])
    assert lines[broken_key] == 3  # scored, the error line, scored again
    assert sum(lines.values()) == 24 + 2  # no successful pair written twice


def test_an_output_naming_an_input_file_is_refused_and_the_input_kept(
        tmp_path: Path, live: dict[str, Any]) -> None:
    """``-o`` naming an input file (through another path to it too): exit 2, one line, the
    input untouched (it was truncated with --restart, or read as results)."""
    json_path, _ = _write_files(tmp_path, live["app"])
    before = json_path.read_bytes()
    other = tmp_path / "sub"
    other.mkdir()
    for output in (str(json_path), str(other / ".." / json_path.name)):
        result = CliRunner().invoke(main, ["rescore", str(json_path), "--config",
                                           str(live["config"]), "-o", output, "--restart"])
        assert result.exit_code == 2, result.output
        assert "is one of the input files" in result.output
    assert json_path.read_bytes() == before


def test_unreadable_input_is_a_clear_error(tmp_path: Path, live: dict[str, Any]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}\n')
    result = CliRunner().invoke(main, ["rescore", str(bad), "--config", str(live["config"])])
    assert result.exit_code == 2
    assert "bad.jsonl, line 1" in result.output and "not hex" in result.output
    with pytest.raises(OTLPDecodeError, match="not an OTLP"):
        decode_request(b"\xff\xff\xff", content_type="application/x-protobuf")
    with pytest.raises(OTLPDecodeError, match="Content-Type"):
        decode_request(b"", content_type="text/plain")
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(b"\x00\x00\x00\x05abc")
    with pytest.raises(OTLPDecodeError, match=r"garbage\.bin"):
        list(read_requests(garbage))


@pytest.mark.slow
async def test_emit_sends_evaluation_telemetry_over_otlp(
        live: dict[str, Any], tmp_path: Path, judge_server: ScriptedJudgeServer) -> None:
    import asyncio

    from tests.support import Upstream

    json_path, _ = _write_files(tmp_path, live["app"])
    async with Upstream() as upstream:
        result = await asyncio.to_thread(CliRunner().invoke, main, [
            "rescore", str(json_path), "--config", str(live["config"]), "--emit",
            "--otlp-endpoint", upstream.url, "-o", str(tmp_path / "out.jsonl")])
        await upstream.wait_for(lambda spans: len(spans) >= 24 and len(upstream.logs) >= 24
                                and upstream.metrics, timeout=20)
    assert result.exit_code == 0, result.output
    agents = {s.context.span_id.to_bytes(8, "big"): s for s in live["app"]
              if s.name == "invoke_agent"}
    evaluations = [s for s in upstream.spans if s.name.startswith("gen_ai.evaluation")]
    assert len(evaluations) == 24
    for evaluation in evaluations:  # children of the original agent spans, in their traces
        agent = agents[evaluation.parent_span_id]
        assert evaluation.trace_id == agent.context.trace_id.to_bytes(16, "big")
    assert len(upstream.logs) == 24  # gen_ai.evaluation.result events
    assert all(log.event_name == "gen_ai.evaluation.result" for log in upstream.logs)
    assert "otel_scorers.evaluations" in {m.name for m in upstream.metrics}
    assert "telemetry sent to" in result.output


def test_dry_run_says_why_an_llm_level_trace_has_nothing_to_judge(
        tmp_path: Path, judge_server: ScriptedJudgeServer) -> None:
    provider = TracerProvider()
    exported = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exported))
    for i in range(4):  # LLM calls with content, no agent span
        chat = genai_attributes(prompt=f"question {i}")
        chat["gen_ai.operation.name"] = "chat"
        with provider.get_tracer("app").start_as_current_span("chat", attributes=chat):
            pass
    json_path, _ = _write_files(tmp_path, list(exported.get_finished_spans()))
    result = CliRunner().invoke(main, ["rescore", str(json_path), "--config",
                                       str(_config(tmp_path, judge_server)), "--dry-run"])
    assert result.exit_code == 0, result.output
    estimate = json.loads(result.stdout)
    assert estimate["runs"] == 0
    assert estimate["not_judged"] == {"content_spans_not_selected": 4}
    assert "include_llm_spans" in estimate["hint"]
    assert "note: 4 spans carry GenAI content" in result.stderr
    assert judge_server.requests == []


def test_dry_run_says_the_rubric_scorer_would_skip_runs_without_a_rubric(
        live: dict[str, Any], tmp_path: Path, judge_server: ScriptedJudgeServer) -> None:
    json_path, _ = _write_files(tmp_path, live["app"])
    config = tmp_path / "no-rubric.yaml"
    config.write_text(json.dumps({
        "judge": {"model": judge_server.model, "api_base": judge_server.url, "api_key": "k"},
        "scorers": [{"type": "rubric"}, {"type": "prompt_alignment"}]}))
    result = CliRunner().invoke(main, ["rescore", str(json_path), "--config", str(config),
                                       "--dry-run"])
    assert result.exit_code == 0, result.output
    estimate = json.loads(result.stdout)
    assert estimate["runs"] == 12
    assert estimate["not_judged"] == {"rubric: no_rubric": 12}, estimate
    assert estimate["judge_calls"] == 12  # prompt alignment only
    assert "'rubric' has no rubric for agent(s) nested, support-bot" in estimate["hint"]
    assert "note: rubric scorer 'rubric' has no rubric" in result.stderr
    assert "OTEL_SCORERS_RUBRIC" in result.stderr


def test_a_run_skipped_for_a_cause_since_fixed_is_judged_on_resume(
        live: dict[str, Any], tmp_path: Path, judge_server: ScriptedJudgeServer) -> None:
    """``rescore -o`` after giving the rubric that was missing: the pairs skipped for
    ``no_rubric`` (no judge call was made) are judged now, not counted as done."""
    json_path, _ = _write_files(tmp_path, live["app"])
    out = tmp_path / "results.jsonl"
    no_rubric = tmp_path / "no-rubric.yaml"
    no_rubric.write_text(json.dumps({
        "judge": {"model": judge_server.model, "api_base": judge_server.url, "api_key": "k"},
        "scorers": [{"type": "rubric"}]}))
    first = CliRunner().invoke(main, ["rescore", str(json_path), "--config", str(no_rubric),
                                      "-o", str(out)])
    assert first.exit_code == 0, first.output
    skipped = _records(out)
    assert {r["skipped"] for r in skipped} == {"no_rubric"}
    # a skipped line claims nothing: no score, no verdict, and a reason that says so
    assert all(r["score"] is None and r["passed"] is None for r in skipped)
    assert all("no verdict" in r["reason"] and "by default" not in r["reason"]
               for r in skipped)
    fixed = tmp_path / "fixed.yaml"
    fixed.write_text(json.dumps({
        "judge": {"model": judge_server.model, "api_base": judge_server.url, "api_key": "k"},
        "scorers": [{"type": "rubric", "criteria": RUBRIC.splitlines()}]}))
    before = len(judge_server.requests)
    second = CliRunner().invoke(main, ["rescore", str(json_path), "--config", str(fixed),
                                       "-o", str(out)])
    assert second.exit_code == 0, second.output
    assert "judging 12" in second.output and "already in" not in second.output
    assert len(judge_server.requests) - before == 12
    last = {(r["trace_id"], r["span_id"]): r for r in _records(out)}
    assert len(last) == 12 and all(r["score"] is not None for r in last.values())


def _deep_json(depth: int) -> str:
    return '{"resourceSpans": [' + '{"a": [' * depth + "]}" * depth + "]}"


@pytest.mark.parametrize(("kind", "where", "reason"), [
    ("truncated_gz", "line", "cannot read the file"),
    ("corrupt_gz", "", "cannot read the file"),
    ("deep_json", "line 2", "nested too deeply"),
    ("bad_record", "record 2", "truncated"),
])
def test_broken_inputs_are_one_line_and_exit_2_keeping_results(
        live: dict[str, Any], tmp_path: Path, kind: str, where: str, reason: str) -> None:
    json_path, proto_path = _write_files(tmp_path, live["app"])
    good = json_path.read_bytes()
    path = tmp_path / f"{kind}.input"
    if kind == "truncated_gz":
        path.write_bytes(gzip.compress(good)[:-200])
    elif kind == "corrupt_gz":
        blob = bytearray(gzip.compress(good))
        blob[40:60] = b"\xff" * 20
        path.write_bytes(bytes(blob))
    elif kind == "deep_json":
        path.write_bytes(good.splitlines(keepends=True)[0] + _deep_json(100_000).encode())
    else:
        first = gzip.decompress(proto_path.read_bytes())
        size = struct.unpack(">I", first[:4])[0]
        path.write_bytes(first[:4 + size] + struct.pack(">I", 1000) + b"\x0a\x01")
    out = tmp_path / "results.jsonl"
    out.write_text('{"trace_id": "kept", "span_id": "kept", "scorer": "rubric"}\n')
    result = CliRunner().invoke(main, ["rescore", str(path), "--config", str(live["config"]),
                                       "-o", str(out)])
    assert result.exit_code == 2, result.output
    message = result.output.strip().splitlines()[-1]
    assert message.startswith("Error: ") and path.name in message and reason in message
    assert where in message
    assert "Traceback" not in result.output and "Aborted" not in result.output
    assert out.read_text() == '{"trace_id": "kept", "span_id": "kept", "scorer": "rubric"}\n'


def test_a_closed_output_stops_the_run_quietly(tmp_path: Path,
                                              judge_server: ScriptedJudgeServer) -> None:
    """`rescore ... | head -1`: the first failed write stops judging; one line, exit 1."""
    import os
    import subprocess
    import sys

    judge_server.responder = judge_responder(satisfied=lambda i, text: True, delay_s=0.05)
    provider = TracerProvider()
    exported = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exported))
    _trace_agents(provider.get_tracer("app"), 60)
    json_path, _ = _write_files(tmp_path, list(exported.get_finished_spans()))
    config = _config(tmp_path, judge_server)
    command = (f"{sys.executable} -m otel_scorers rescore {json_path} --config {config} "
               "--concurrency 2 --no-progress | head -1; exit ${PIPESTATUS[0]}")
    out = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONUNBUFFERED": "1"}, check=False)
    assert out.returncode == 1, out.stderr
    assert len(out.stdout.splitlines()) == 1 and json.loads(out.stdout)["scorer"]
    assert "Traceback" not in out.stderr and "Exception ignored" not in out.stderr
    assert "stopped: cannot write the results (Broken pipe)" in out.stderr
    assert len(judge_server.requests) <= 12, len(judge_server.requests)  # of 120


def test_rescore_in_a_batch_matches_live_scoring_at_the_batch_price(
        live: dict[str, Any], tmp_path: Path, judge_server: ScriptedJudgeServer) -> None:
    """``--lane batch`` (issue 38.1): every request in one provider batch, the same results as
    live scoring, each priced as a batch result; stopped while the batch runs (the timeout),
    the same command picks the same batch up instead of paying for another."""
    json_path, _ = _write_files(tmp_path, live["all"])
    config = json.loads(live["config"].read_text())
    config["judge"]["model"] = "openai/gpt-4o-mini"  # priced, with batch rates
    config["batch"] = {"interval_s": 0.2}
    config_path = tmp_path / "batch.yaml"
    config_path.write_text(json.dumps(config))
    out = tmp_path / "results.jsonl"
    judge_server.batches.polls = 10_000  # in progress until the first command gives up
    live_requests = len(judge_server.requests)
    command = ["rescore", str(json_path), "--config", str(config_path), "-o", str(out),
               "--lane", "batch"]
    waited = CliRunner().invoke(main, [*command, "--batch-timeout", "1"])
    assert waited.exit_code == 1 and "run the same command again" in waited.output, \
        waited.output
    assert (tmp_path / "results.jsonl.batch.json").exists()
    judge_server.batches.polls = 1
    result = CliRunner().invoke(main, command)
    assert result.exit_code == 0, result.output
    assert len(judge_server.batches.batches) == 1  # the same batch, picked up
    assert len(judge_server.requests) - live_requests == 24  # each request answered once
    assert all("batch" in r.headers for r in judge_server.requests[live_requests:])
    records = _records(out)
    offline = {(r["trace_id"], r["span_id"], r["scorer"]): (r["score"], r["label"], r["reason"])
               for r in records}
    assert offline == _live_by_key(live["evaluations"])
    assert all(r["judge"]["serviceTier"] == "batch" for r in records)
    assert all(r["judge"]["costUsd"] == pytest.approx(100 * 7.5e-08 + 50 * 3e-07)
               for r in records)
    assert not (tmp_path / "results.jsonl.batch.json").exists()


def test_rescore_in_a_batch_needs_a_judge_with_a_batch_api(
        live: dict[str, Any], tmp_path: Path) -> None:
    config = json.loads(live["config"].read_text())
    config["judge"] = {"model": "anthropic/claude-3-5-haiku-latest", "api_key": "k"}
    config_path = tmp_path / "anthropic.yaml"
    config_path.write_text(json.dumps(config))
    json_path, _ = _write_files(tmp_path, live["all"])
    result = CliRunner().invoke(main, ["rescore", str(json_path), "--config", str(config_path),
                                       "--lane", "batch"])
    assert result.exit_code == 2 and "openai/<model>" in result.output, result.output
    assert "Traceback" not in result.output


def test_rescore_in_a_batch_refuses_more_than_one_batch_carries(
        live: dict[str, Any], tmp_path: Path, judge_server: ScriptedJudgeServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A history larger than one provider batch (50,000 requests, 100 MB here; OpenAI takes
    200 MB) is refused before anything is uploaded, with the way to split it."""
    monkeypatch.setattr("otel_scorers.rescore.batch.MAX_BATCH_LINES", 5)
    json_path, _ = _write_files(tmp_path, live["all"])
    config = json.loads(live["config"].read_text())
    config["judge"]["model"] = "openai/gpt-4o-mini"
    config_path = tmp_path / "batch.yaml"
    config_path.write_text(json.dumps(config))
    result = CliRunner().invoke(main, ["rescore", str(json_path), "--config", str(config_path),
                                       "-o", str(tmp_path / "out.jsonl"), "--lane", "batch"])
    assert result.exit_code == 2 and "more than one batch carries" in result.output, \
        result.output
    assert "--limit" in result.output and "Traceback" not in result.output
    assert judge_server.batches.files == {}  # nothing uploaded
