"""litellm as the provider layer: imported once and lazily, its responses read, its calls kept
out of the application's telemetry.

``import litellm`` takes seconds; :func:`load_litellm` does it on first use (the judge client
runs it in a worker thread) with the bundled price table, and registers this library's local
provider. :func:`suppress_instrumentation` marks the context of a judge call so that OTel
instrumentations of HTTP clients and LLM SDKs stay silent: a judge call never becomes a span
that would itself be scored.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator
from types import ModuleType
from typing import Any

from opentelemetry import context as otel_context

from otel_scorers.errors import JudgeOutputError, JudgeTruncatedError

__all__ = ["content_of", "cost_of", "load_litellm", "suppress_instrumentation"]


@contextlib.contextmanager
def suppress_instrumentation() -> Iterator[None]:
    """Mark the current context so OTel instrumentations (HTTP clients, LLM SDKs) stay silent.

    Judge calls must never produce telemetry that would itself be selected and scored.
    """
    ctx = otel_context.set_value(otel_context._SUPPRESS_INSTRUMENTATION_KEY, True)
    ctx = otel_context.set_value(otel_context._SUPPRESS_HTTP_INSTRUMENTATION_KEY, True, ctx)
    token = otel_context.attach(ctx)
    try:
        yield
    finally:
        otel_context.detach(token)


@functools.cache
def _litellm() -> ModuleType:
    # The bundled price map avoids a network fetch at import; users may override the variable.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    module: ModuleType = litellm
    return module


def load_litellm() -> ModuleType:
    """Import litellm (seconds, once) and register this library's local providers."""
    module = _litellm()
    from otel_scorers.judge import local

    local.register(module)
    return module


def content_of(response: Any) -> str:
    try:
        choice = response.choices[0]
    except (AttributeError, IndexError, TypeError) as exc:
        raise JudgeOutputError("judge response has no choices") from exc
    if getattr(choice, "finish_reason", None) == "length":
        raise JudgeTruncatedError("judge answer was cut at max_tokens (finish_reason=length); "
                                  "raise max_tokens or shorten the rubric")
    content = getattr(getattr(choice, "message", None), "content", None)
    return content if isinstance(content, str) else ""


def cost_of(litellm: ModuleType, response: Any, tier: str | None = None) -> float | None:
    """The call's cost from litellm's price table (``None`` for unpriced models); a service
    ``tier`` (``flex``) at its rates, priced here (litellm's logged price may not know the tier).

    litellm already prices every response while logging it (``response_cost``); computing it
    again would double a noticeable share of the per-call CPU.
    """
    hidden = getattr(response, "_hidden_params", None) or {}
    cost = hidden.get("response_cost") if isinstance(hidden, dict) and tier is None else None
    if cost is None and (tier is not None or "response_cost" not in hidden):
        try:
            cost = litellm.completion_cost(completion_response=response, service_tier=tier)
        except Exception:  # models absent from litellm's price table have no cost
            return None
    return float(cost) if cost else None
