"""The self-correction loop (seed: Mastra's ``isTaskComplete``).

Run an agent, score its output with one or more scorers, and while the task is not complete
feed the scorers' reasons back as the next user turn, up to ``max_steps`` agent calls.
Complete means every score equals its maximum (``strategy="all"``) or at least one does
(``strategy="any"``). A scorer error never counts as complete.

As Mastra's ``isTaskComplete`` takes them: a per-run ``request_context`` (a ``rubric`` there is
this run's rubric, for a rubric scorer built without criteria), ``parallel`` (scorers judged
together, the default, or one after the other) and ``timeout`` (seconds for each round of
scoring; a round cut off counts as not complete). Unlike the seed, a rubric scorer that finds
no rubric is an error here, not an instant "complete": a loop that judged nothing has not
finished its task. Each round judges the response against the original task, with the
earlier attempts and the feedback given as the conversation before it.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from otel_scorers.background_loop import run_sync
from otel_scorers.errors import ConfigError, JudgeTimeoutError, ScorerInputError
from otel_scorers.scorers.base import Scorer
from otel_scorers.scorers.result import ScoreError, ScoreResult
from otel_scorers.scorers.run import Message, ScorerRun

__all__ = ["Agent", "CorrectionResult", "CorrectionStep", "aself_correct", "is_task_complete",
           "self_correct"]

Strategy = Literal["all", "any"]
ChatMessages = list[dict[str, str]]
#: An agent takes the chat so far (``{"role", "content"}`` dicts) and returns its reply text.
Agent = Callable[[ChatMessages], str | Awaitable[str]]


@dataclass(frozen=True)
class CorrectionStep:
    """One agent call and how the scorers judged it."""

    output: str
    results: tuple[ScoreResult, ...]
    complete: bool


@dataclass(frozen=True)
class CorrectionResult:
    """The loop's outcome: the last output, whether it completed, and every step."""

    complete: bool
    output: str
    steps: tuple[CorrectionStep, ...]
    messages: tuple[dict[str, str], ...]


def is_task_complete(results: Sequence[ScoreResult], strategy: Strategy = "all") -> bool:
    """``all``: every score equals its maximum; ``any``: at least one does."""
    if strategy not in get_args(Strategy):
        raise ConfigError(f"strategy must be 'all' or 'any', got {strategy!r}")
    if not results:
        return False
    checks = [r.complete for r in results]
    return all(checks) if strategy == "all" else any(checks)


def feedback(results: Sequence[ScoreResult]) -> str:
    """The next user turn: each incomplete scorer's reason, verbatim."""
    parts = ["Your response does not meet the evaluation criteria yet. Revise it.", ""]
    for result in results:
        if result.complete:
            continue
        if result.error is not None:
            parts.append(f"[{result.scorer}] could not judge the response "
                         f"({result.error.type}): {result.error.message}")
        else:
            parts.append(f"[{result.scorer}] {result.reason}")
    return "\n".join(parts).strip()


async def aself_correct(agent: Agent, prompt: str, *, scorers: Sequence[Scorer],
                        strategy: Strategy = "all", max_steps: int = 5,
                        system: str | None = None,
                        request_context: Mapping[str, Any] | None = None,
                        parallel: bool = True, timeout: float | None = None
                        ) -> CorrectionResult:
    """Run ``agent`` on ``prompt`` until the scorers call the task complete or ``max_steps``
    (see the module docstring for ``request_context``, ``parallel`` and ``timeout``)."""
    if max_steps < 1:
        raise ConfigError("max_steps must be at least 1")
    if not scorers:
        raise ConfigError("self_correct needs at least one scorer")
    if timeout is not None and timeout <= 0:
        raise ConfigError(f"timeout must be > 0 seconds, got {timeout!r}")
    is_task_complete([], strategy)  # validates the strategy before any agent call
    messages: ChatMessages = ([{"role": "system", "content": system}] if system else [])
    messages.append({"role": "user", "content": prompt})
    steps: list[CorrectionStep] = []
    output = ""
    for _ in range(max_steps):
        output = await _call(agent, list(messages))
        run = ScorerRun(
            input_messages=tuple(Message(role=m["role"], content=m["content"])
                                 for m in messages if m["role"] != "system"),
            system_messages=(Message(role="system", content=system),) if system else (),
            output=(Message(role="assistant", content=output),),
            request_context=dict(request_context or {}), original_task=prompt)
        results = await _score(scorers, run, parallel=parallel, timeout=timeout)
        done = is_task_complete(results, strategy)
        steps.append(CorrectionStep(output=output, results=results, complete=done))
        messages.append({"role": "assistant", "content": output})
        if done:
            return CorrectionResult(True, output, tuple(steps), tuple(messages))
        messages.append({"role": "user", "content": feedback(results)})
    return CorrectionResult(False, output, tuple(steps), tuple(messages))


def self_correct(agent: Agent, prompt: str, *, scorers: Sequence[Scorer],
                 strategy: Strategy = "all", max_steps: int = 5,
                 system: str | None = None, request_context: Mapping[str, Any] | None = None,
                 parallel: bool = True, timeout: float | None = None) -> CorrectionResult:
    """Synchronous :func:`aself_correct`; a synchronous agent runs in a worker thread."""
    return run_sync(aself_correct(agent, prompt, scorers=scorers, strategy=strategy,
                                  max_steps=max_steps, system=system,
                                  request_context=request_context, parallel=parallel,
                                  timeout=timeout))


async def _score(scorers: Sequence[Scorer], run: ScorerRun, *, parallel: bool,
                 timeout: float | None) -> tuple[ScoreResult, ...]:
    async def one(scorer: Scorer) -> ScoreResult:
        try:
            result = await asyncio.wait_for(scorer.arun(run), timeout)
        except asyncio.TimeoutError:
            error = JudgeTimeoutError(f"scoring exceeded the loop's timeout of {timeout:g}s")
            return ScoreResult(run_id=run.run_id, scorer=scorer.name,
                               scale=float(getattr(scorer, "scale", 1.0)),
                               error=ScoreError.from_exception(error), reason=str(error))
        if result.skipped is not None:
            raise ScorerInputError(
                f"scorer {scorer.name} judged nothing ({result.skipped}): in a loop a rubric "
                "scorer needs criteria, or a rubric in request_context")
        return result

    if parallel:
        return tuple(await asyncio.gather(*(one(scorer) for scorer in scorers)))
    return tuple([await one(scorer) for scorer in scorers])


async def _call(agent: Agent, messages: ChatMessages) -> str:
    if inspect.iscoroutinefunction(agent):
        reply = await agent(messages)
    else:
        reply = await asyncio.to_thread(agent, messages)
        if inspect.isawaitable(reply):
            reply = await reply
    if not isinstance(reply, str):
        raise TypeError(f"the agent must return a string, got {type(reply).__name__}")
    return reply
