"""Fused judge calls: when several scorers judge the same run with the same judge, one call
answers for all of them.

Who asks is decided before the call (:mod:`otel_scorers.scorers.fused`: the scorers that share
a judge and have a question for it); :func:`judge_fused` then sends one request carrying every
question:

- the system prompt says the answer is one JSON object with a key per part (``part1``,
  ``part2``, ...), each part judged on its own, and gives each part's instructions and task,
  with the fields that part may use (a prompt-alignment part in ``user`` mode is told to leave
  the agent instructions out, as its own prompt would not show them);
- the fields are shown once (a field two parts share, such as the agent response, is not
  repeated); they are fenced as always;
- the schema is one object whose properties are the parts' own schemas, so a provider that
  enforces schemas enforces every part.

Failure isolation: a transport failure (timeout, rate limit, auth) fails every member, as
separate calls to the same judge at the same moment would; an answer that still breaks the
schema after the client's corrective re-ask is split, and each part that validates on its own
is used: a broken half fails only its scorer (``invalid_output``). Each member's usage carries
its share of the tokens and cost (they add up to the call's); the call itself (``calls``,
retries, re-asks) is counted on the first member only, so calls summed over scorers are the
calls made. A request with few-shot examples is never fused (each scorer's examples belong to
its own prompt).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from otel_scorers.errors import JudgeOutputError
from otel_scorers.judge.schema import load_object, parse_answer, problems
from otel_scorers.judge.usage import JudgeUsage

if TYPE_CHECKING:
    from otel_scorers.judge.client import JudgeClient, Judgement, JudgeRequest

__all__ = ["fuse", "judge_fused"]

FUSED_HEAD = """\
This request holds {count} independent judgements of the same agent run, PART 1 to PART \
{count}. Judge each part on its own, by its own instructions only, as if it were the only \
question; never let one part's findings change another's. Answer with one JSON object whose \
keys are {keys}: each the answer its part asks for.\
"""


def fuse(requests: Sequence[JudgeRequest[Any]]) -> JudgeRequest[Any]:
    """One request asking every part of ``requests``, its answer model keyed ``part1``..."""
    from otel_scorers.judge.client import JudgeRequest

    fields: list[tuple[str, str]] = []
    for request in requests:
        for item in request.fields:
            if item not in fields:
                fields.append(tuple(item))  # type: ignore[arg-type]
    keys = [f"part{index}" for index in range(1, len(requests) + 1)]
    blocks = [FUSED_HEAD.format(count=len(requests),
                                keys=", ".join(f'"{key}"' for key in keys))]
    names = [name for name, _ in fields]
    for index, request in enumerate(requests, start=1):
        own = [name for name, _ in request.fields]
        scope = ("" if own == names else
                 f"This part uses only these fields: {', '.join(own)}; ignore the others.\n")
        blocks.append(f"PART {index} (answer under \"part{index}\")\n{scope}"
                      f"{request.instructions.strip()}\n{request.task.strip()}")
    model = create_model(  # type: ignore[call-overload]
        "FusedAnswer", __config__=ConfigDict(strict=True, extra="forbid"),
        **{key: (request.answer_model, ...) for key, request in zip(keys, requests,
                                                                   strict=True)})
    return JudgeRequest(instructions="\n\n".join(blocks), fields=fields, answer_model=model,
                        task=f"Answer with the JSON object: {', '.join(keys)}.")


async def judge_fused(client: JudgeClient, requests: Sequence[JudgeRequest[Any]]
                      ) -> list[Judgement[Any] | BaseException]:
    """Ask ``requests`` in one call; each part's judgement, or the error of its part."""
    from otel_scorers.judge.client import Judgement

    fused = fuse(requests)
    count = len(requests)
    try:
        whole = await client.judge(fused)
    except JudgeOutputError as error:
        if error.raw is None:
            raise
        usage = error.usage if error.usage is not None else JudgeUsage(model=client.model)
        outcomes: list[Judgement[Any] | BaseException] = []
        for index, request in enumerate(requests):
            share = _share(usage, index, count)
            try:
                part = _part(error.raw, index + 1)
                outcomes.append(Judgement(parse_answer(json.dumps(part), request.answer_model),
                                          share, error.raw))
            except (ValidationError, ValueError, KeyError, TypeError) as exc:
                failed = JudgeOutputError(
                    f"judge answer (one call for {count} scorers) did not match this scorer's "
                    f"part of the schema after one corrective re-ask: {problems(exc)}")
                failed.usage = share
                outcomes.append(failed)
        return outcomes
    value: BaseModel = whole.value
    return [Judgement(getattr(value, f"part{index + 1}"), _share(whole.usage, index, count),
                      whole.raw)
            for index in range(count)]


def _part(raw: str, index: int) -> Any:
    loaded = load_object(raw)
    if not isinstance(loaded, dict):
        raise ValueError("the answer is not a JSON object")
    return loaded[f"part{index}"]


def _share(usage: JudgeUsage, index: int, count: int) -> JudgeUsage:
    """Member ``index``'s share of a call's usage: tokens and cost split (they add up), the
    call, its retries and re-asks counted on the first member."""
    def part(total: int) -> int:
        return total // count + (total % count if index == 0 else 0)

    first = index == 0
    return usage.model_copy(update={
        "calls": usage.calls if first else 0, "retries": usage.retries if first else 0,
        "reasks": usage.reasks if first else 0,
        "prompt_tokens": part(usage.prompt_tokens),
        "cached_tokens": min(part(usage.cached_tokens), part(usage.prompt_tokens)),
        "completion_tokens": part(usage.completion_tokens),
        "cost_usd": None if usage.cost_usd is None else usage.cost_usd / count,
        "fused": count})

