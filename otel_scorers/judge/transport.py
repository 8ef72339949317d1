"""The judge's transport seam: one chat completion in, one answer out, whatever carries it.

The client (:class:`~otel_scorers.judge.client.JudgeClient`) renders the prompt, retries and
parses; a :class:`Transport` only makes one call. Requests and answers are this library's own
plain values, never a provider SDK's objects, so a transport is a class of its own and the
client never asks which one it holds (httpx's ``AsyncBaseTransport`` is the model). Three exist:

- :class:`~otel_scorers.judge.litellm_transport.LiteLLMTransport`: any provider litellm knows
  (imported lazily: seconds, once);
- :class:`~otel_scorers.judge.openai_compatible.DirectTransport`: an OpenAI-compatible
  ``api_base`` called over HTTP directly (litellm never imported);
- :class:`~otel_scorers.judge.local.LocalTransport`: the embedded llama.cpp model, in process.

:func:`~otel_scorers.judge.transports.transport_for` picks one for a model string.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

__all__ = ["ChatRequest", "ChatResponse", "StructuredOutput", "Transport"]

StructuredOutput = Literal["auto", "json_schema", "json_object", "json_object_schema", "prompt"]


@dataclass(frozen=True)
class ChatRequest:
    """One chat completion to make. ``response_format`` is the OpenAI form (``None``: none);
    ``timeout_s`` bounds this one call."""

    messages: Sequence[Mapping[str, str]]
    temperature: float
    max_tokens: int
    timeout_s: float
    response_format: Mapping[str, Any] | None = None
    #: the provider's service tier (OpenAI's ``"flex"``: the same call at about half the
    #: price, slower, sometimes refused for capacity); ``None``: the standard tier
    service_tier: str | None = None


@dataclass(frozen=True)
class ChatResponse:
    """The judge's answer: its text, why it stopped, the tokens it cost, and its price when
    the transport knows one (``None``: unpriced)."""

    content: str | None
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    #: Of ``prompt_tokens``, those the provider read from its prompt cache (priced at the
    #: cached rate; counted apart)
    cached_tokens: int = 0

    def __post_init__(self) -> None:
        """The provider's figures are not trusted: a token count that is negative (or not a
        whole number) is none (0, then estimated from the prompt), and a price that is
        negative or not finite is no price (unpriced), so no hostile or broken usage block
        can refill a budget or show a negative spend."""
        for name in ("prompt_tokens", "completion_tokens", "cached_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                object.__setattr__(self, name, 0)
        if self.cached_tokens > self.prompt_tokens:  # never more cached than read
            object.__setattr__(self, "cached_tokens", self.prompt_tokens)
        cost = self.cost_usd
        if cost is not None and (isinstance(cost, bool) or not isinstance(cost, int | float)
                                 or not math.isfinite(cost) or cost < 0):
            object.__setattr__(self, "cost_usd", None)


class Transport(Protocol):
    """What carries judge calls. ``complete`` raises only
    :class:`~otel_scorers.errors.JudgeError` subclasses (classified: timeout, auth, rate
    limit, ...); the other methods may do slow one-time work (loading litellm, reading a price
    table), so the client calls them off the event loop. A transport whose class says
    ``bounded = True`` ends every call itself by ``request.timeout_s``, the answer read
    included; the client bounds any other's calls with a timer of its own."""

    #: The model string as configured (``openai/gpt-5-mini``, ``local/smollm2``).
    model: str

    async def complete(self, request: ChatRequest) -> ChatResponse: ...

    def structured_mode(self) -> StructuredOutput:
        """How ``structured_output="auto"`` asks this judge for JSON."""
        ...

    def priced(self) -> bool:
        """Whether this judge's calls have a known price."""
        ...

    def key_variables(self) -> list[str]:
        """The provider's environment variables for an API key (for error hints)."""
        ...
