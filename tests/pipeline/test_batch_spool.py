"""The batch lane's spool trusts nothing it did not write (issue 53): a directory another
user owns or others can write is refused at start naming the setting; an entry that is not
this user's file, or does not read, is set aside, counted and said; a linked ``lock`` is never
followed; a full disk while spooling is the counted spool reason naming the setting."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

import pytest

from otel_scorers.errors import ConfigError
from otel_scorers.testing import ScriptedJudgeServer, judge_responder
from tests.pipeline.test_batch_lane import batch_processor, lane_env, wait_for
from tests.support import Telemetry, end_agent_span

__all__ = ["lane_env"]

pytestmark = pytest.mark.timeout(120)

OTHER_UID = 65534  # nobody
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")


def planted(ident: str = "cd" * 16) -> dict[str, Any]:
    """A request of the lane's shape, as someone else would plant it."""
    return {"id": ident, "scorer": "rubric", "run": {"run_id": "forged"}, "attempts": 0,
            "trace_id": "f" * 32, "span_id": "e" * 16, "spooled_ns": 1,
            "body": {"model": "gpt-4o", "max_tokens": 4000,
                     "messages": [{"role": "user", "content": "planted"}]}}


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]


def test_a_spool_others_can_write_is_refused_naming_the_setting(
        lane_env: Path, make_processor: Any, judge_server: ScriptedJudgeServer) -> None:
    lane_env.mkdir(mode=0o700)
    lane_env.chmod(0o777)
    with pytest.raises(ConfigError, match="OTEL_SCORERS_BATCH_DIR") as refused:
        batch_processor(make_processor, judge_server)
    assert "writable by its group or by others" in str(refused.value)
    lane_env.chmod(0o700)
    (lane_env / "pending").chmod(0o770)
    with pytest.raises(ConfigError, match="writable by its group"):
        batch_processor(make_processor, judge_server)


@root_only
def test_a_spool_another_user_owns_is_refused(
        lane_env: Path, make_processor: Any, judge_server: ScriptedJudgeServer) -> None:
    lane_env.mkdir(mode=0o700)
    os.chown(lane_env, OTHER_UID, OTHER_UID)
    with pytest.raises(ConfigError, match=f"owned by uid {OTHER_UID}.*OTEL_SCORERS_BATCH_DIR"):
        batch_processor(make_processor, judge_server)


@root_only
def test_an_entry_another_user_wrote_is_never_sent(
        lane_env: Path, telemetry: Telemetry, make_processor: Any,
        judge_server: ScriptedJudgeServer, caplog: pytest.LogCaptureFixture) -> None:
    """A planted request (its own model, max_tokens and prompt, a forged trace id) in a
    spool this user owns: set aside as ``*.refused``, counted, said; only the real run is
    sent and emitted."""
    judge_server.responder = judge_responder()
    (lane_env / "pending").mkdir(parents=True, mode=0o700)
    lane_env.chmod(0o700)
    plant = lane_env / "pending" / f"{'cd' * 16}.json"
    plant.write_text(json.dumps(planted()))
    os.chown(plant, OTHER_UID, OTHER_UID)
    with caplog.at_level("WARNING", logger="otel_scorers"):
        processor = batch_processor(make_processor, judge_server)
        end_agent_span(telemetry)
        assert processor.force_flush(30_000)
        (span,) = wait_for(telemetry.evaluation_spans, "the real run's result")
    assert span.context.trace_id != int("f" * 32, 16)
    sent = [r.body for r in judge_server.requests]
    assert len(sent) == 1 and "planted" not in json.dumps(sent)
    assert (lane_env / "pending" / f"{'cd' * 16}.refused").exists()
    assert processor.health()["batch"]["spool_refused"] == 1
    assert any("*.refused" in line and "OTEL_SCORERS_BATCH_DIR" in line
               for line in warnings_of(caplog))


def test_truncated_and_empty_entries_are_counted_and_said(
        lane_env: Path, telemetry: Telemetry, make_processor: Any,
        judge_server: ScriptedJudgeServer, caplog: pytest.LogCaptureFixture) -> None:
    judge_server.responder = judge_responder()
    pending = lane_env / "pending"
    pending.mkdir(parents=True, mode=0o700)
    lane_env.chmod(0o700)
    (pending / f"{'01' * 16}.json").write_bytes(b"")
    (pending / f"{'02' * 16}.json").write_bytes(json.dumps(planted("02" * 16)).encode()[:90])
    wrong = planted("03" * 16) | {"trace_id": "not hex"}
    (pending / f"{'03' * 16}.json").write_text(json.dumps(wrong))
    with caplog.at_level("WARNING", logger="otel_scorers"):
        processor = batch_processor(make_processor, judge_server)
        end_agent_span(telemetry)
        assert processor.force_flush(30_000)
        wait_for(telemetry.evaluation_spans, "the real run's result")
    assert processor.health()["batch"]["spool_unreadable"] == 3
    assert sorted(p.suffix for p in pending.iterdir()) == [".unreadable"] * 3
    assert any("3 batch spool entr(y/ies) could not be read" in line
               for line in warnings_of(caplog))


def test_a_linked_lock_is_never_followed(
        lane_env: Path, tmp_path: Path, telemetry: Telemetry, make_processor: Any,
        judge_server: ScriptedJudgeServer, caplog: pytest.LogCaptureFixture) -> None:
    target = tmp_path / "elsewhere" / "created-by-the-lane"
    target.parent.mkdir()
    lane_env.mkdir(mode=0o700)
    (lane_env / "lock").symlink_to(target)
    with caplog.at_level("WARNING", logger="otel_scorers"):
        processor = batch_processor(make_processor, judge_server)
        end_agent_span(telemetry)
        assert processor.force_flush(30_000)
        wait_for(lambda: processor.health()["batch"]["untrusted"], "the round refused")
    assert not target.exists()
    assert judge_server.batches.batches == {}
    assert any("is a link" in line and "OTEL_SCORERS_BATCH_DIR" in line
               for line in warnings_of(caplog))


def test_a_full_disk_while_spooling_is_the_counted_spool_reason(
        lane_env: Path, telemetry: Telemetry, make_processor: Any,
        judge_server: ScriptedJudgeServer, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    def full(path: Path, data: bytes) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    processor = batch_processor(make_processor, judge_server)
    monkeypatch.setattr("otel_scorers.judge.spool._write_atomic", full)
    with caplog.at_level("WARNING", logger="otel_scorers"):
        for _ in range(2):
            end_agent_span(telemetry)
        assert processor.force_flush(30_000)
    assert processor.stats()["rubric"] == {"selected": 2, "dropped": 2}
    assert telemetry.metric_value("otel_scorers.decisions", decision="dropped",
                                  reason="spool_full") == 2
    lines = warnings_of(caplog)
    assert not [line for line in lines if "unexpectedly" in line]
    (line,) = [line for line in lines if "spool cannot be written" in line]
    assert "No space left on device" in line and "OTEL_SCORERS_BATCH_DIR" in line
    assert processor.health()["batch"]["spool_full"] == 2
