"""The judge: litellm client, structured output, retries, redaction, the local model."""

from otel_scorers.judge.client import (
    DEFAULT_LOCAL_MODEL,
    JudgeClient,
    Judgement,
    JudgeRequest,
    JudgeUsage,
    suppress_instrumentation,
)
from otel_scorers.judge.redact import Redactor, RegexRedactor
from otel_scorers.judge.retry import RetryPolicy

__all__ = [
    "DEFAULT_LOCAL_MODEL",
    "JudgeClient",
    "JudgeRequest",
    "JudgeUsage",
    "Judgement",
    "Redactor",
    "RegexRedactor",
    "RetryPolicy",
    "suppress_instrumentation",
]
