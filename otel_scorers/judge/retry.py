"""Retry policy and the mapping of provider failures to this library's judge errors.

Retried: timeouts, connection errors, HTTP 429 (honouring ``Retry-After`` / ``retry-after-ms``)
and HTTP 5xx. Not retried: other 4xx, and bodies that are not chat completions at all.
litellm reports some failures with a synthetic status (a 200 with an unreadable body surfaces as
its ``InternalServerError``), so the real HTTP status is read from the exception chain first,
and litellm's own "invalid response" errors (an HTML error page from a proxy, any body that
is not JSON, whatever its content type) are ``invalid_response``: asking again would get the
same page.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from otel_scorers.errors import (
    JudgeAuthError,
    JudgeConnectionError,
    JudgeError,
    JudgeRateLimitError,
    JudgeRequestError,
    JudgeResponseError,
    JudgeServerError,
    JudgeTimeoutError,
)

__all__ = ["RetryPolicy", "capacity_refusal", "classify_exception"]

_HTTP_CLIENT_MODULES = frozenset({"openai", "httpx", "anthropic", "aiohttp", "requests"})
_RETRYABLE = (JudgeTimeoutError, JudgeConnectionError, JudgeRateLimitError, JudgeServerError)
#: How litellm words a response body it could not read as a chat completion (it then raises
#: with a made-up status 500); checked by test_client's non-JSON-body cases.
_INVALID_BODY = ("Empty or invalid response from LLM endpoint", "Expecting value: line 1")
#: How the provider SDKs say a key is missing (the OpenAI one, through litellm, as a made-up
#: status 500: it used to be retried as a server error).
_NO_KEY = ("Missing credentials", "api_key client option must be set", "Missing Anthropic API Key")


@dataclass(frozen=True)
class RetryPolicy:
    """Jittered exponential backoff: attempt ``n`` waits ``uniform(0.5, 1) * min(cap, base*2**n)``.

    A ``Retry-After`` hint replaces the backoff when it is longer, up to ``max_retry_after_s``;
    a hint beyond that (or beyond the caller's deadline) ends the retries at once.
    """

    max_retries: int = 3
    initial_backoff_s: float = 0.5
    max_backoff_s: float = 20.0
    max_retry_after_s: float = 60.0

    def should_retry(self, error: JudgeError, attempt: int) -> bool:
        return attempt < self.max_retries and isinstance(error, _RETRYABLE)

    def delay_s(self, error: JudgeError, attempt: int) -> float | None:
        """Seconds to wait before retry number ``attempt + 1``; ``None`` means give up."""
        backoff = min(self.max_backoff_s, self.initial_backoff_s * (2.0 ** attempt))
        delay = backoff * random.uniform(0.5, 1.0)
        hint = getattr(error, "retry_after_s", None)
        if isinstance(hint, int | float):
            if hint > self.max_retry_after_s:
                return None
            delay = max(delay, float(hint))
        return delay


def classify_exception(exc: BaseException) -> JudgeError:
    """Turn whatever litellm (or the transport under it) raised into a :class:`JudgeError`."""
    if isinstance(exc, JudgeError):
        return exc
    chain = list(_chain(exc))
    message = _describe(exc)
    if any(marker in str(e) for e in chain for marker in _INVALID_BODY):
        return JudgeResponseError(f"judge returned an unreadable response: {message}")
    if any(type(e).__name__ == "AuthenticationError" or any(
            marker in str(e) for marker in _NO_KEY) for e in chain):
        missing = any(marker in str(e) for e in chain for marker in _NO_KEY)
        error = JudgeAuthError(f"judge authentication failed (the provider said: {message})",
                               status_code=401)
        error.missing = missing
        return error
    response = _http_response(chain)
    if response is not None:
        return error_for_status(int(response.status_code), getattr(response, "headers", {}),
                                message)
    names = {type(e).__name__ for e in chain}
    if any(isinstance(e, TimeoutError | asyncio.TimeoutError) for e in chain) or names & {
        "Timeout", "APITimeoutError", "ReadTimeout", "ConnectTimeout", "WriteTimeout",
        "PoolTimeout", "TimeoutException", "SocketTimeoutError", "ServerTimeoutError",
    }:
        return JudgeTimeoutError(f"judge call timed out: {message}")
    if any(isinstance(e, ConnectionError) for e in chain) or names & {
        "APIConnectionError", "ConnectError", "ClientConnectorError", "ClientConnectionError",
        "ServerDisconnectedError", "RemoteProtocolError", "ClientOSError",
    } or "connection error" in message.lower():
        return JudgeConnectionError(f"could not reach the judge: {message}")
    if any(isinstance(e, ValueError | UnicodeError) for e in chain) or names & {"APIError"}:
        return JudgeResponseError(f"judge returned an unreadable response: {message}")
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        return error_for_status(status, {}, message)
    return JudgeResponseError(f"judge call failed: {message}")


def error_for_status(status: int, headers: Mapping[str, str] | Any, message: str) -> JudgeError:
    """The :class:`JudgeError` for an HTTP status (``Retry-After`` read from ``headers``)."""
    if status == 429:
        return JudgeRateLimitError(f"judge rate limited (HTTP 429): {message}",
                                   retry_after_s=retry_after_s(headers))
    if status in (408, 504):
        return JudgeTimeoutError(f"judge timed out (HTTP {status}): {message}", status_code=status)
    if status >= 500:
        return JudgeServerError(f"judge server error (HTTP {status}): {message}",
                                status_code=status)
    if status in (401, 403):
        return JudgeAuthError(f"judge rejected the API key (HTTP {status}): {message}",
                              status_code=status)
    if status >= 400:
        return JudgeRequestError(f"judge rejected the request (HTTP {status}): {message}",
                                 status_code=status)
    return JudgeResponseError(f"judge returned an unreadable response (HTTP {status}): {message}",
                              status_code=status)


def capacity_refusal(error: JudgeError) -> bool:
    """Whether ``error`` is a flex tier's refusal for capacity: an HTTP 429 whose message says
    the resource is unavailable (OpenAI's "Resource Unavailable", ``resource_unavailable``) or
    out of capacity, not a rate limit of the account."""
    if not isinstance(error, JudgeRateLimitError):
        return False
    text = str(error).lower().replace("_", " ")
    return "resource unavailable" in text or "capacity" in text


def retry_after_s(headers: Mapping[str, str] | Any) -> float | None:
    """Seconds from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)."""
    try:
        millis = headers.get("retry-after-ms")
        if millis is not None:
            return max(0.0, float(millis) / 1000.0)
        value = headers.get("retry-after")
    except (AttributeError, TypeError, ValueError):
        return None
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(str(value))
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _http_response(chain: list[BaseException]) -> Any:
    """The real HTTP response carried by an exception of the chain, if any.

    Only the HTTP clients' own exceptions are trusted: litellm attaches synthetic responses
    (status 500 for a body it could not read, for instance) to its wrappers.
    """
    for error in chain:
        if type(error).__module__.split(".")[0] not in _HTTP_CLIENT_MODULES:
            continue
        response = getattr(error, "response", None)
        status = getattr(response, "status_code", None)
        if isinstance(status, int) and 100 <= status < 600 and status != 200:
            return response
    return None


#: litellm's wrapping of a provider's message (``litellm.AuthenticationError:
#: AuthenticationError: OpenAIException - <the provider's words>``): not ours to repeat.
_WRAPPERS = re.compile(r"^(?:litellm\.\w+:\s*)?(?:\w+(?:Error|Exception):\s*)?"
                       r"(?:\w+Exception\s*-\s*)?")


def _describe(exc: BaseException) -> str:
    """The provider's own words, without litellm's wrapping (our message says what failed)."""
    text = " ".join(str(exc).split())
    text = _WRAPPERS.sub("", text, count=1)
    return text[:300] if text else type(exc).__name__
