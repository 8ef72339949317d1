"""The litellm transport: any provider litellm knows (OpenAI, Anthropic, Azure, Bedrock, Vertex,
Ollama, vLLM, ...), for every judge the direct transport does not take.

litellm is imported on the first call, in a worker thread (its import takes seconds); it reads
answers through this library's bounded session (:mod:`otel_scorers.judge.bounded`); its
retries are off (the client retries, with its own policy), and its exceptions are classified
into this library's judge errors here, so nothing of litellm's leaves this module.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from otel_scorers.errors import JudgeResponseError
from otel_scorers.judge.bounded import (
    ACCEPTED_ENCODINGS,
    MAX_RESPONSE_BYTES,
    bounded_session,
    overflowed,
    watch,
)
from otel_scorers.judge.provider import cost_of, load_litellm
from otel_scorers.judge.retry import classify_exception
from otel_scorers.judge.transport import ChatRequest, ChatResponse, StructuredOutput
from otel_scorers.judge.usage import cached_tokens

__all__ = ["LiteLLMTransport"]


class LiteLLMTransport:
    """``litellm.acompletion`` for one model (see the module docstring)."""

    def __init__(self, model: str, *, api_base: str | None = None, api_key: str | None = None,
                 extra_params: Mapping[str, Any] | None = None) -> None:
        self.model = model
        self.api_base = api_base
        self._api_key = api_key
        self.extra_params = dict(extra_params or {})

    def __repr__(self) -> str:
        return f"LiteLLMTransport({self.model!r})"

    async def complete(self, request: ChatRequest) -> ChatResponse:
        litellm = await asyncio.to_thread(load_litellm)
        kwargs: dict[str, Any] = {
            "model": self.model, "messages": [dict(m) for m in request.messages],
            "temperature": request.temperature, "max_tokens": request.max_tokens,
            "timeout": request.timeout_s, "max_retries": 0, "num_retries": 0,
            "drop_params": True, **self.extra_params,
        }
        if request.response_format is not None:
            kwargs["response_format"] = dict(request.response_format)
        if request.service_tier is not None:
            kwargs["service_tier"] = request.service_tier
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self._api_key:
            kwargs["api_key"] = self._api_key
        # litellm reads the answer through the library's own bounded session (8 MB after
        # decompression): a gzip bomb or an endless body is an error, not gigabytes
        kwargs["shared_session"] = bounded_session()
        kwargs["extra_headers"] = {**dict(kwargs.get("extra_headers") or {}),
                                   "Accept-Encoding": ACCEPTED_ENCODINGS}
        flag = watch()
        try:
            response = await litellm.acompletion(**kwargs)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if overflowed(flag):
                raise JudgeResponseError(
                    f"judge response is larger than {MAX_RESPONSE_BYTES // (1024 * 1024)} MB"
                ) from None
            raise classify_exception(exc) from None  # the original may quote the key
        usage = getattr(response, "usage", None)
        choice = response.choices[0] if getattr(response, "choices", None) else None
        content = getattr(getattr(choice, "message", None), "content", None)
        return ChatResponse(
            content=content if isinstance(content, str) else None,
            finish_reason=getattr(choice, "finish_reason", None),
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            cached_tokens=cached_tokens(usage) if usage is not None else 0,
            cost_usd=cost_of(litellm, response, request.service_tier))

    def structured_mode(self) -> StructuredOutput:
        try:
            supported = bool(load_litellm().supports_response_schema(model=self.model))
        except Exception:  # an unknown model string: fall back to JSON mode
            supported = False
        return "json_schema" if supported else "json_object"

    def priced(self) -> bool:
        try:
            load_litellm().cost_per_token(model=self.model, prompt_tokens=1000,
                                          completion_tokens=0)
        except Exception:
            return False
        return True

    def key_variables(self) -> list[str]:
        try:
            found = load_litellm().validate_environment(model=self.model)
        except Exception:  # an unknown provider: litellm cannot say
            return []
        return [name for name in found.get("missing_keys", []) if name.endswith("_KEY")]
