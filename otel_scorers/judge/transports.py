"""Which transport carries a judge's calls (:mod:`otel_scorers.judge.transport`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from otel_scorers.errors import ConfigError
from otel_scorers.judge.litellm_transport import LiteLLMTransport
from otel_scorers.judge.local import LocalTransport
from otel_scorers.judge.openai_compatible import DirectTransport, applies
from otel_scorers.judge.transport import Transport

__all__ = ["transport_for"]


def transport_for(model: str, *, api_base: str | None = None, api_key: str | None = None,
                  extra_params: Mapping[str, Any] | None = None,
                  choice: Literal["auto", "litellm"] | Transport = "auto") -> Transport:
    """The transport for a judge: a given one; the embedded model for ``local/...``; the direct
    transport for an ``openai/<model>`` judge with an ``api_base`` and no provider parameters
    (unless ``choice`` is ``litellm``); litellm for everything else."""
    if not isinstance(choice, str):
        return choice
    if choice not in ("auto", "litellm"):
        raise ConfigError(f"transport must be 'auto' or 'litellm', got {choice!r}")
    if model.startswith("local/"):
        return LocalTransport(model)
    extra = dict(extra_params or {})
    if choice == "auto" and api_base and applies(model, api_base, extra):
        return DirectTransport(model, api_base, api_key)
    return LiteLLMTransport(model, api_base=api_base, api_key=api_key, extra_params=extra)
