"""Shared fixtures: the scripted judge server on 127.0.0.1, judge clients pointed at it, real
OTel providers exporting to memory, and processors wired to them."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

# Before anything imports litellm: use its bundled price map, never the network.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from otel_scorers import PromptAlignmentScorer, RubricScorer
from otel_scorers.judge.client import JudgeClient
from otel_scorers.judge.provider import load_litellm
from otel_scorers.judge.retry import RetryPolicy
from otel_scorers.pipeline import ScoringSpanProcessor
from otel_scorers.testing import CapturedTelemetry, ScriptedJudgeServer

FAST_RETRY = RetryPolicy(max_retries=3, initial_backoff_s=0.01, max_backoff_s=0.05)


@pytest.fixture(scope="session")
def _server() -> Iterator[ScriptedJudgeServer]:
    # litellm's first import takes seconds (more on a busy machine): done here, once, so that no
    # test's flush or timeout deadline includes it.
    load_litellm()
    with ScriptedJudgeServer() as server:
        yield server


@pytest.fixture
def judge_server(_server: ScriptedJudgeServer) -> Iterator[ScriptedJudgeServer]:
    """The scripted judge, emptied before each test; unused scripted answers fail the test."""
    _server.reset()
    _server.responder = None
    yield _server
    leftover = _server.pending
    _server.reset()
    assert leftover == 0, f"{leftover} scripted judge answer(s) were never requested"


@pytest.fixture
def judge(judge_server: ScriptedJudgeServer) -> JudgeClient:
    """A judge client on the scripted server with fast retries and short timeouts."""
    return JudgeClient(judge_server.model, api_base=judge_server.url, api_key="test-key",
                       retry=FAST_RETRY, timeout_s=2.0, total_timeout_s=20.0)


@pytest.fixture
def telemetry() -> Iterator[CapturedTelemetry]:
    captured = CapturedTelemetry.create()
    yield captured
    captured.shutdown()


@pytest.fixture
def make_processor(telemetry: CapturedTelemetry, judge: JudgeClient):  # type: ignore[no-untyped-def]
    """Build a processor wired to the telemetry fixture, installed before the exporter."""
    made: list[ScoringSpanProcessor] = []

    def make(scorers: list[Any] | None = None, *, install: bool = True,
             **kwargs: Any) -> ScoringSpanProcessor:
        if scorers is None:
            scorers = [RubricScorer(judge, "- greets the user\n- is polite"),
                       PromptAlignmentScorer(judge)]
        kwargs.setdefault("tracer_provider", telemetry.tracer_provider)
        kwargs.setdefault("meter_provider", telemetry.meter_provider)
        kwargs.setdefault("logger_provider", telemetry.logger_provider)
        processor = ScoringSpanProcessor(scorers, **kwargs)
        made.append(processor)
        if install:
            telemetry.tracer_provider.add_span_processor(processor)
            if "exporter" not in kwargs:
                telemetry.tracer_provider.add_span_processor(
                    SimpleSpanProcessor(telemetry.spans_out))
        return processor

    yield make
    for processor in made:
        processor.shutdown()
