"""The exception tree of otel-scorers.

::

    OtelScorersError
    ├── ConfigError            bad configuration (raised at construction, never at run time)
    │   └── EnvConfigError     bad OTEL_SCORERS_* environment variables
    ├── ScorerInputError       the run has nothing the scorer can judge     error.type invalid_input
    ├── SinkError              a result backend did not take a write        (counted by reason)
    └── JudgeError             the judge call failed                        error.type below
        ├── JudgeTimeoutError        timeout
        ├── JudgeConnectionError     connection_error
        ├── JudgeRateLimitError      rate_limited
        ├── JudgeServerError         server_error       (HTTP 5xx)
        ├── JudgeAuthError           auth               (no API key, or one rejected: 401/403)
        ├── JudgeRequestError        request_rejected   (other HTTP 4xx: bad request, ...)
        ├── JudgeResponseError       invalid_response   (the body is not a chat completion)
        └── JudgeOutputError         invalid_output     (schema broken, after one re-ask)
            └── JudgeTruncatedError  truncated_output   (finish_reason == "length")

Scorers turn ``ScorerInputError`` and ``JudgeError`` into error results (``ScoreResult.error``,
never a score); ``ScoreResult.raise_for_error()`` raises them again. ``error_type`` is the stable,
low-cardinality value written to the ``error.type`` attribute and metric label.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ConfigError",
    "EnvConfigError",
    "JudgeAuthError",
    "JudgeConnectionError",
    "JudgeError",
    "JudgeOutputError",
    "JudgeRateLimitError",
    "JudgeRequestError",
    "JudgeResponseError",
    "JudgeServerError",
    "JudgeTimeoutError",
    "JudgeTruncatedError",
    "OtelScorersError",
    "ScorerInputError",
    "SinkError",
]


class OtelScorersError(Exception):
    """Base class of every error this library raises on purpose."""

    error_type = "internal_error"


class ConfigError(OtelScorersError, ValueError):
    """Invalid configuration: raised when a scorer, judge or processor is built."""

    error_type = "config_error"


class EnvConfigError(ConfigError):
    """Bad ``OTEL_SCORERS_*`` environment variables; ``problems`` has one line for each."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = list(problems or [message])


class ScorerInputError(OtelScorersError):
    """The run lacks what the scorer needs (no user prompt, empty response, ...)."""

    error_type = "invalid_input"


class SinkError(OtelScorersError):
    """A write to a result backend that failed; ``retryable`` for timeouts, connection
    failures, 408, 429 and 5xx, not for a request the backend refused (400, 401, 403, 404,
    413, 422). ``reason`` is the counted reason (``unreachable``, ``http_401``, ...)."""

    error_type = "sink_error"

    def __init__(self, message: str, *, retryable: bool, reason: str,
                 expected: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.reason = reason
        #: a normal wait, not a failure (the trace a result annotates has not arrived yet):
        #: retried and counted, said only if the retries run out
        self.expected = expected


class JudgeError(OtelScorersError):
    """The judge model could not produce a valid judgement."""

    error_type = "judge_error"
    #: The judge usage spent before the failure (a ``JudgeUsage``), set by the judge client.
    usage: Any = None
    #: The judge's last answer, when it answered but not as the schema asks (never shown:
    #: only a fused call reads it, to use the parts that are valid on their own).
    raw: str | None = None

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class JudgeTimeoutError(JudgeError):
    error_type = "timeout"


class JudgeConnectionError(JudgeError):
    error_type = "connection_error"


class JudgeRateLimitError(JudgeError):
    error_type = "rate_limited"

    def __init__(self, message: str, *, retry_after_s: float | None = None) -> None:
        super().__init__(message, status_code=429)
        self.retry_after_s = retry_after_s


class JudgeServerError(JudgeError):
    error_type = "server_error"


class JudgeAuthError(JudgeError):
    """No API key for the judge, or one the provider rejected (HTTP 401/403). Not retried:
    asking again with the same key gets the same answer. The message names what to set."""

    error_type = "auth"
    #: No key was given at all (else one was given and rejected).
    missing = False


class JudgeRequestError(JudgeError):
    error_type = "request_rejected"


class JudgeResponseError(JudgeError):
    error_type = "invalid_response"


class JudgeOutputError(JudgeError):
    error_type = "invalid_output"


class JudgeTruncatedError(JudgeOutputError):
    error_type = "truncated_output"


ERROR_TYPES: dict[str, type[OtelScorersError]] = {
    cls.error_type: cls
    for cls in (
        OtelScorersError, ConfigError, ScorerInputError, JudgeError, JudgeTimeoutError,
        JudgeConnectionError, JudgeRateLimitError, JudgeServerError, JudgeAuthError,
        JudgeRequestError,
        JudgeResponseError, JudgeOutputError, JudgeTruncatedError,
    )
}
