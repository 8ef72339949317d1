"""The direct transport: a judge on an OpenAI-compatible endpoint called without litellm.

Profiled on this library's judge calls (docs/performance.md), litellm spends most of an
evaluation's CPU around the HTTP request rather than in it: a logging object, callbacks and
hidden-parameter bookkeeping per call, a price computed through the full cost calculator, the
OpenAI SDK's request building and response models, and an httpx-to-aiohttp bridge. For an
``openai/<model>`` judge with an explicit ``api_base`` (vLLM, llama.cpp's server, Ollama's
``/v1``, LM Studio, a gateway) the request is plain JSON over HTTP, so this module sends it
itself:

- one shared ``aiohttp.ClientSession`` per process and event loop, connections kept alive
  (httpx's pool was tried first: it scans every pooled connection on every request, which
  cost more than it saved at 32 concurrent calls);
- the same body litellm would send and the same status-to-error mapping
  (:func:`otel_scorers.judge.retry.error_for_status`); redirects are not followed and a body
  over 8 MB is an error; the proxy variables are read once per judge (:func:`env_proxy`);
- the price and JSON-schema support from litellm's bundled model table, read as JSON, so
  litellm is not imported at all. That saves its 6-9 s import and, more, its large heap:
  every full garbage collection of the process walks it, and those pauses (0.2-0.3 s) were
  what kept 32 concurrent judge calls of 0.2 s from their ceiling.

Every other judge (a provider's own API, ``extra_params``, the embedded local model) goes
through litellm as before; ``transport="litellm"`` forces it.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import json
import os
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from otel_scorers import http, safe_json
from otel_scorers.errors import (
    JudgeAuthError,
    JudgeConnectionError,
    JudgeResponseError,
    JudgeTimeoutError,
)
from otel_scorers.judge.retry import error_for_status
from otel_scorers.judge.transport import ChatRequest, ChatResponse, StructuredOutput
from otel_scorers.judge.usage import cached_tokens

__all__ = ["DirectTransport", "applies", "env_proxy", "split_proxy"]
#: The most of a response body read (a judge answer is a few kB; a hostile endpoint may
#: stream forever).
MAX_RESPONSE_BYTES = 8 * 1024 * 1024


def applies(model: str, api_base: str | None, extra_params: dict[str, Any]) -> bool:
    """Whether a judge can use the direct transport: an OpenAI-compatible endpoint given by
    URL, and no provider parameters that litellm would translate."""
    return (model.startswith("openai/") and api_base is not None
            and api_base.startswith(("http://", "https://")) and not extra_params)


class DirectTransport:
    """POST ``{api_base}/chat/completions`` with a shared client (see the module docstring)."""

    #: aiohttp's ``total`` timeout ends the whole call (connecting, sending, the answer read)
    #: at ``request.timeout_s``: the client arms no timer of its own around it
    bounded = True

    def __init__(self, model: str, api_base: str, api_key: str | None) -> None:
        self.model = model
        self.name = model.split("/", 1)[1]
        self.url = api_base.rstrip("/") + "/chat/completions"
        # as litellm does for openai/ models: the given key, else OPENAI_API_KEY
        key = api_key or os.environ.get("OPENAI_API_KEY")
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if key:
            self._headers["Authorization"] = f"Bearer {key}"
        self._proxy_url = env_proxy(self.url)
        self._proxy: tuple[Any, Any] | None = None  # (URL, BasicAuth | None), on first call
        self._target: Any = None  # self.url as a yarl.URL, on first call

    def __repr__(self) -> str:
        return f"DirectTransport({self.model!r}, {self.url!r})"

    async def complete(self, request: ChatRequest) -> ChatResponse:
        """One chat completion, or a :class:`JudgeError`."""
        import aiohttp

        body: dict[str, Any] = {"model": self.name, "messages": [dict(m) for m in
                                                                 request.messages],
                                "temperature": request.temperature,
                                "max_tokens": request.max_tokens}
        if request.response_format is not None:
            body["response_format"] = dict(request.response_format)
        if request.service_tier is not None:
            body["service_tier"] = request.service_tier
        session = _session()
        timeout = _timeout(request.timeout_s)
        if self._proxy is None and self._proxy_url is not None:
            self._proxy = split_proxy(self._proxy_url)
        proxy, proxy_auth = self._proxy or (None, None)
        if self._target is None:  # parsed once (aiohttp parses a string URL on every call)
            import yarl
            self._target = yarl.URL(self.url)
        try:
            async with session.post(self._target, data=json.dumps(body).encode(),
                                    headers=self._headers, timeout=timeout,
                                    allow_redirects=False, proxy=proxy,
                                    proxy_auth=proxy_auth) as response:
                status, headers = response.status, response.headers
                data = await _read_limited(response)
        except asyncio.TimeoutError as exc:  # aiohttp's own timeouts are TimeoutErrors
            raise JudgeTimeoutError(f"judge call timed out: {type(exc).__name__}") from None
        except (aiohttp.ClientConnectionError, OSError) as exc:
            raise JudgeConnectionError(
                f"could not reach the judge: {type(exc).__name__}: {exc}") from None
        except aiohttp.ClientError as exc:  # a malformed response (payload, headers)
            raise JudgeResponseError(
                f"judge returned an unreadable response: {type(exc).__name__}") from None
        return self._answer(status, headers, data, request.service_tier)

    def _answer(self, status: int, headers: Any, data: bytes, tier: str | None = None
                ) -> ChatResponse:
        """The response read: an HTTP failure as its judge error, else the chat completion
        (or ``invalid_response`` for a body that is none)."""
        if status != 200:
            error = error_for_status(status, headers, _error_text(data))
            if isinstance(error, JudgeAuthError):
                error.missing = "Authorization" not in self._headers
            raise error
        try:
            payload = safe_json.loads(data)
            choice = payload["choices"][0]
            message = choice["message"]
            usage = payload.get("usage") or {}
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            raise JudgeResponseError(
                "judge returned an unreadable response: not a chat completion "
                f"({len(data)} bytes)") from None
        content = message.get("content") if isinstance(message, dict) else None
        prompt, completion = _int(usage.get("prompt_tokens")), _int(
            usage.get("completion_tokens"))
        cached = min(cached_tokens(usage), prompt)
        return ChatResponse(content=content if isinstance(content, str) else None,
                            finish_reason=choice.get("finish_reason"), prompt_tokens=prompt,
                            completion_tokens=completion, cached_tokens=cached,
                            cost_usd=self.cost(prompt, completion, cached, tier))

    def cost(self, prompt_tokens: int, completion_tokens: int, cached: int = 0,
             tier: str | None = None) -> float | None:
        """A call's price from litellm's price table (``None``: a model it does not price);
        ``cached`` of the prompt tokens at the table's cached-input rate (the input rate where
        it has none); a ``tier`` (``flex``) at the table's ``*_flex`` rates where it has them
        (the standard ones where it has none: never priced under what was paid)."""
        entry = model_entry(self.model)
        if entry is None:
            return None
        input_rate = _rate(entry, "input_cost_per_token", tier)
        cached_rate = _rate(entry, "cache_read_input_token_cost", tier)
        if cached_rate is None:
            cached_rate = input_rate
        cost: float = ((prompt_tokens - cached) * input_rate + cached * cached_rate
                       + completion_tokens * _rate(entry, "output_cost_per_token", tier))
        return cost

    def priced(self) -> bool:
        return model_entry(self.model) is not None

    def structured_mode(self) -> StructuredOutput:
        """A JSON schema when litellm's table says the model enforces one, else JSON mode."""
        entry = model_entry(self.model)
        supported = entry is not None and bool(entry.get("supports_response_schema"))
        return "json_schema" if supported else "json_object"

    def key_variables(self) -> list[str]:
        return ["OPENAI_API_KEY"]


@functools.cache
def _table() -> dict[str, Any]:
    """litellm's bundled model table (prices, capabilities), read as JSON: the same table
    litellm itself uses with ``LITELLM_LOCAL_MODEL_COST_MAP`` (this library's default),
    without importing litellm."""
    spec = importlib.util.find_spec("litellm")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        path = Path(location) / "model_prices_and_context_window_backup.json"
        try:
            loaded = safe_json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(loaded, dict):
            return loaded
    return {}


def _rate(entry: dict[str, Any], key: str, tier: str | None) -> Any:
    """The table's ``key`` rate for ``tier`` (``key_flex``), else its standard one (``None``:
    none)."""
    for name in ((f"{key}_{tier}", key) if tier else (key,)):
        value = entry.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return value
    return None


def model_entry(model: str) -> dict[str, Any] | None:
    """The table's entry for ``openai/<name>`` (looked up as litellm does: by the name), when
    it has per-token prices."""
    table = _table()
    entry = table.get(model) or table.get(model.split("/", 1)[-1])
    if not isinstance(entry, dict):
        return None
    prices = (entry.get("input_cost_per_token"), entry.get("output_cost_per_token"))
    if not all(isinstance(p, int | float) for p in prices):
        return None
    return entry


@functools.lru_cache(maxsize=64)
def _timeout(total_s: float | None) -> Any:
    """An aiohttp timeout of ``total_s`` (immutable: one per value, not one per call)."""
    import aiohttp

    return aiohttp.ClientTimeout(total=total_s)


def _session() -> Any:
    """The process and loop's session shared by every direct judge (a process's judges all
    run on the library's background loop)."""
    return http.shared("judge-direct", _make_session)


def _make_session() -> Any:
    import aiohttp

    # not trust_env: it reads the proxy variables and ~/.netrc on every request, in two
    # thread hand-offs, and a netrc entry for the judge's host would clash with the
    # Authorization header; each transport reads the proxy once instead (env_proxy)
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=256, limit_per_host=256),
                                 trust_env=False, cookie_jar=aiohttp.DummyCookieJar())


def env_proxy(url: str) -> str | None:
    """The proxy ``HTTP_PROXY`` / ``HTTPS_PROXY`` name for ``url`` unless ``NO_PROXY`` exempts
    its host: what litellm's clients use, read once, when the judge is made (as they do)."""
    parts = urllib.parse.urlsplit(url)
    if parts.hostname is None or urllib.request.proxy_bypass(parts.hostname):
        return None
    return urllib.request.getproxies().get(parts.scheme)


def split_proxy(proxy_url: str) -> tuple[str, Any]:
    """The proxy's URL without credentials, and the credentials apart (so that no error
    message, which may name the proxy, can carry them)."""
    import aiohttp

    parts = urllib.parse.urlsplit(proxy_url)
    if parts.username is None:
        return proxy_url, None
    host = parts.netloc.rpartition("@")[2]
    auth = aiohttp.BasicAuth(urllib.parse.unquote(parts.username),
                             urllib.parse.unquote(parts.password or ""))
    return parts._replace(netloc=host).geturl(), auth


async def _read_limited(response: Any) -> bytes:
    try:
        data: bytes = await http.read_bounded(response, MAX_RESPONSE_BYTES)
    except http.TooLarge:
        raise JudgeResponseError(
            f"judge response is larger than {MAX_RESPONSE_BYTES // (1024 * 1024)} MB") from None
    return data


def _error_text(data: bytes) -> str:
    """The provider's error message (OpenAI error format), else the start of the body."""
    try:
        payload = safe_json.loads(data)
        message = payload["error"]["message"] if isinstance(payload.get("error"), dict) \
            else payload.get("error") or payload.get("message")
        if isinstance(message, str):
            return message[:500]
    except (ValueError, AttributeError, KeyError, TypeError):
        pass
    return data[:200].decode("utf-8", "replace")


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0

