"""One tiny judge call to check a judge set-up end to end (``check-config --ping``)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, StrictBool

from otel_scorers.errors import JudgeAuthError, JudgeError
from otel_scorers.judge.client import JudgeClient, JudgeRequest

__all__ = ["PingResult", "ping"]


class _Pong(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    ok: StrictBool


@dataclass(frozen=True)
class PingResult:
    """What one judge call showed: the model, how JSON was asked for and whether the judge
    answered in the shape asked, the time it took, and the error when it failed."""

    model: str
    api_base: str | None
    structured_output: str
    reachable: bool
    latency_s: float
    error_type: str | None = None
    error: str | None = None
    #: what the judge answered, as read (a compact JSON object), when it answered in shape
    answer: str | None = None

    @property
    def ok(self) -> bool:
        return self.reachable and self.error is None


async def ping(client: JudgeClient) -> PingResult:
    """Ask the judge for ``{"ok": true}`` once (retries as configured)."""
    mode = await asyncio.to_thread(client.structured_mode)
    started = time.monotonic()
    request = JudgeRequest(instructions="This is a connectivity check. Answer ok=true.",
                           fields=[("check", "ping")], answer_model=_Pong,
                           task='Answer with the JSON object {"ok": true}.')
    try:
        answer = await client.judge(request)
    except JudgeError as exc:
        # anything the judge answered (a 401 too) means it was reached; a key missing here
        # stopped the call before it was sent: nothing was reached
        missing_key = isinstance(exc, JudgeAuthError) and exc.missing
        reachable = exc.error_type not in ("connection_error", "timeout") and not missing_key
        return PingResult(client.model, client.api_base, mode, reachable,
                          time.monotonic() - started, exc.error_type, str(exc))
    error = None if answer.value.ok else "the judge answered ok=false"
    return PingResult(client.model, client.api_base, mode, True, answer.usage.latency_s,
                      None if error is None else "invalid_output", error,
                      answer.value.model_dump_json())
