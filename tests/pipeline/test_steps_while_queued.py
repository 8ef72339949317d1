"""A run's steps stay buffered while its evaluation waits in the queue (issue 54).

Under a slow judge (the embedded model, a loaded provider) an evaluation can wait in the queue
longer than the trace buffer keeps a trace (``max_age_s``, two minutes by default). The steps
were read when the evaluation started, so a run that waited past that age lost its tool spans
to the buffer's sweep and the checks decided it ``no_steps``, with the fix "trace the
framework's tools" for a run whose tool span was traced. A queued evaluation now holds its
trace; a run whose trace had to be let go anyway (the buffer's bounds) is counted as lost, never
judged as a run without steps."""

from __future__ import annotations

import json
import time
from typing import Any

from opentelemetry.trace import StatusCode

from otel_scorers import RubricScorer
from otel_scorers.judge.client import JudgeClient
from otel_scorers.scorers.checks_scorer import ChecksScorer
from otel_scorers.testing import ScriptedJudgeServer, judge_responder
from tests.support import Telemetry, genai_attributes


def _run_with_tool(telemetry: Telemetry, prompt: str, *, failed: bool) -> None:
    tracer = telemetry.tracer()
    agent = genai_attributes(prompt=prompt, answer="Here is the answer you asked for, in full.")
    step = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
            "gen_ai.tool.call.arguments": json.dumps({"q": prompt})}
    with tracer.start_as_current_span("invoke_agent", attributes=agent), \
            tracer.start_as_current_span("execute_tool lookup", attributes=step) as tool:
        if failed:
            tool.set_attribute("error.type", "503")
            tool.set_status(StatusCode.ERROR, "lookup is down")


def _checks_results(telemetry: Telemetry) -> list[dict[str, Any]]:
    return [dict(span.attributes or {}) for span in telemetry.evaluation_spans()
            if (span.attributes or {}).get("gen_ai.evaluation.name") == "checks"]


def test_steps_outlive_the_buffer_age_while_the_run_waits(
        telemetry: Telemetry, make_processor: Any, judge: JudgeClient,
        judge_server: ScriptedJudgeServer) -> None:
    """Four runs with a traced tool each; a judge that takes 1.5 s a call, one worker: the
    last runs wait about 4.5 s in the queue, far past a buffer age of 0.3 s (the sweep runs
    every quarter second). Every run's checks see its tool call: the failed one fails, the
    others pass; none is ``no_steps``."""
    judge_server.responder = judge_responder(delay_s=1.5)
    processor = make_processor(
        [RubricScorer(judge, "- answers the question"), ChecksScorer(["no_tool_errors",
                                                                      "called_tool lookup"])],
        concurrency=1, cache_ttl_s=0)
    processor._buffer.max_age_s = 0.3
    for index in range(4):
        _run_with_tool(telemetry, f"question {index}", failed=index == 3)
    assert processor.force_flush(60_000)
    stats = processor.stats()["checks"]
    assert stats.get("filtered", 0) == 0 and stats["scored"] == 4, stats
    checks = _checks_results(telemetry)
    assert sorted(c["gen_ai.evaluation.score.label"] for c in checks) == \
        ["fail", "pass", "pass", "pass"], checks
    assert not any(c.get("otel_scorers.skipped") for c in checks)
    # what was held for the queued runs is let go once they are read
    deadline = time.monotonic() + 10
    while len(processor._buffer.traces):
        assert time.monotonic() < deadline, len(processor._buffer.traces)
        time.sleep(0.1)


def test_a_run_whose_trace_had_to_go_is_dropped_not_judged_without_steps(
        telemetry: Telemetry, make_processor: Any, judge: JudgeClient,
        judge_server: ScriptedJudgeServer, caplog: Any) -> None:
    """The hold is bounded (``max_hold_s``): a run still queued past it has lost its steps,
    and is counted as dropped (``expired``) with the one line that says what to change;
    never a checks verdict on a run without its tool calls. Its span is still exported."""
    judge_server.responder = judge_responder(delay_s=1.5)
    processor = make_processor([RubricScorer(judge, "- answers the question"),
                                ChecksScorer(["called_tool lookup"])],
                               concurrency=1, cache_ttl_s=0)
    processor._buffer.max_age_s = 0.2
    processor._buffer.max_hold_s = 0.5
    for index in range(3):
        _run_with_tool(telemetry, f"question {index}", failed=False)
    assert processor.force_flush(60_000)
    stats = processor.stats()["checks"]
    assert stats.get("filtered", 0) == 0, stats  # no no_steps
    assert stats["scored"] >= 1 and stats.get("dropped", 0) >= 1, stats
    assert stats["scored"] + stats["dropped"] == 3, stats
    assert processor.counts.count("dropped", "expired") >= 2  # both scorers of a lost run
    assert all(c["gen_ai.evaluation.score.label"] == "pass" for c in _checks_results(telemetry))
    assert "steps were let go before it was judged" in caplog.text
    assert "reason expired" in caplog.text
    assert len(telemetry.app_spans()) >= 6  # every agent and tool span reached the exporter


def test_the_buffer_evicts_unheld_traces_first() -> None:
    """At its trace bound, the buffer lets the oldest trace no queued run holds go; when every
    one is held, the oldest goes and is remembered as lost (``trace_limit``)."""
    from otel_scorers.capture.trace import TraceBuffer

    buffer = TraceBuffer(max_traces=2)
    buffer._entry(1)
    buffer._entry(2)
    buffer.hold(1)
    buffer._entry(3)  # 2 goes (unheld), 1 stays
    assert set(buffer.traces) == {1, 3} and buffer.lost(1) is None
    buffer.hold(3)
    buffer._entry(4)  # all held: the oldest, 1, goes and is remembered
    assert set(buffer.traces) == {3, 4} and buffer.lost(1) == "trace_limit"
    buffer.release(3, root=True)  # read, root ended: gone at once
    assert set(buffer.traces) == {4}
