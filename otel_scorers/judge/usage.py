"""What judging one run cost: calls, retries, re-asks, tokens, money and time."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = ["JudgeUsage", "Meter", "cached_tokens"]


class JudgeUsage(BaseModel):
    """What judging one run cost: calls (re-asks and retries included), tokens, money, time."""

    model_config = ConfigDict(frozen=True)

    model: str
    calls: int = 0
    retries: int = 0
    reasks: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: Of ``prompt_tokens``, read from the provider's prompt cache (priced at its cached rate)
    cached_tokens: int = 0
    cost_usd: float | None = None
    latency_s: float = 0.0
    #: Scorers that shared this call (one fused call for several; 0: the call was its own).
    #: Tokens and cost are this scorer's share; ``calls`` is counted on one of them.
    fused: int = 0
    #: Tokens estimated from the request and answer sizes: the judge reported no usage.
    estimated: bool = False
    #: The fields shown to the judge cut to ``max_field_chars`` (head and tail kept): the
    #: verdict was made on part of them, and the result says so.
    truncated: tuple[str, ...] = ()
    #: The provider tier that answered (``standard``, ``flex``), priced at its rates.
    service_tier: str = "standard"
    #: Calls the flex tier refused for capacity (then answered at the standard tier, or
    #: waited for: ``service_tier`` says which).
    flex_refusals: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model, "calls": self.calls, "retries": self.retries,
            "reasks": self.reasks, "promptTokens": self.prompt_tokens,
            "completionTokens": self.completion_tokens, "costUsd": self.cost_usd,
            **({"cachedTokens": self.cached_tokens} if self.cached_tokens else {}),
            "latencySeconds": round(self.latency_s, 6),
            **({"fusedWith": self.fused - 1} if self.fused else {}),
            **({"tokensEstimated": True} if self.estimated else {}),
            **({"truncatedFields": list(self.truncated)} if self.truncated else {}),
            **({"serviceTier": self.service_tier} if self.service_tier != "standard" else {}),
            **({"flexRefusals": self.flex_refusals} if self.flex_refusals else {}),
        }


@dataclass
class Meter:
    model: str
    started: float = field(default_factory=time.monotonic)
    calls: int = 0
    retries: int = 0
    reasks: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float | None = None
    estimated: bool = False
    truncated: tuple[str, ...] = ()
    service_tier: str = "standard"
    flex_refusals: int = 0

    def add(self, prompt_tokens: int, completion_tokens: int, cost: float | None,
            cached: int = 0) -> None:
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens
        self.cached_tokens += cached
        if cost is not None:
            self.cost_usd = (self.cost_usd or 0.0) + cost

    def freeze(self) -> JudgeUsage:
        return JudgeUsage(model=self.model, calls=self.calls, retries=self.retries,
                          reasks=self.reasks, prompt_tokens=self.prompt_tokens,
                          completion_tokens=self.completion_tokens,
                          cached_tokens=self.cached_tokens, cost_usd=self.cost_usd,
                          latency_s=time.monotonic() - self.started, estimated=self.estimated,
                          truncated=self.truncated, service_tier=self.service_tier,
                          flex_refusals=self.flex_refusals)


def cached_tokens(usage: Any) -> int:
    """The prompt tokens a provider read from its cache, as its usage block says (OpenAI:
    ``prompt_tokens_details.cached_tokens``; Anthropic through a proxy:
    ``cache_read_input_tokens``); 0 when it says nothing."""
    if not isinstance(usage, dict):
        details = getattr(usage, "prompt_tokens_details", None)
        found = getattr(details, "cached_tokens", None) if details is not None else None
        return _count(found) or _count(getattr(usage, "cache_read_input_tokens", None))
    details = usage.get("prompt_tokens_details")
    found = details.get("cached_tokens") if isinstance(details, dict) else None
    return _count(found) or _count(usage.get("cache_read_input_tokens"))


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
