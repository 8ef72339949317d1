"""Test helpers for users of otel-scorers (and for this project's own tests).

- :mod:`~otel_scorers.testing.judge_server`: :class:`ScriptedJudgeServer`, a real
  OpenAI-compatible server on 127.0.0.1 answering from a script (faults on demand), so litellm,
  retries and parsing stay under test; :mod:`~otel_scorers.testing.answers` builds its answers.
- :mod:`~otel_scorers.testing.telemetry`: :class:`CapturedTelemetry`, real SDK providers that
  export to memory, to read back evaluation spans, events and metrics.
- :mod:`~otel_scorers.testing.pytest_plugin`: the ``scripted_judge`` and ``captured_telemetry``
  fixtures.
"""

from otel_scorers.testing.answers import (
    Answer,
    RecordedRequest,
    alignment_answer,
    fault,
    garbage,
    hang,
    judge_responder,
    reply,
    rubric_answer,
)
from otel_scorers.testing.judge_server import SCRIPTED_MODEL, ScriptedJudgeServer
from otel_scorers.testing.telemetry import CapturedTelemetry

__all__ = [
    "SCRIPTED_MODEL",
    "Answer",
    "CapturedTelemetry",
    "RecordedRequest",
    "ScriptedJudgeServer",
    "alignment_answer",
    "fault",
    "garbage",
    "hang",
    "judge_responder",
    "reply",
    "rubric_answer",
]
