"""Fused judge calls: when several scorers judge the same run with the same judge, one call
answers for all of them.

The evaluation of a run opens a :class:`CallBatch` for the scorers that will judge it (those
whose judge has the same fingerprint) and runs each scorer in a task of its own that is a
*member* of the batch. A member's first :meth:`JudgeClient.judge` call is not sent: it waits
until every member has either asked or finished without asking (a cache hit, a skipped rubric,
bad input), and then one request carries every waiting question:

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
calls made. A member that asks twice sends its second call alone; a request with few-shot
examples is never fused (each scorer's examples belong to its own prompt).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from otel_scorers.errors import JudgeOutputError
from otel_scorers.judge.schema import load_object, parse_answer, problems
from otel_scorers.judge.usage import JudgeUsage

if TYPE_CHECKING:
    from otel_scorers.judge.client import JudgeClient, Judgement, JudgeRequest

__all__ = ["CallBatch", "Member", "fuse"]

FUSED_HEAD = """\
This request holds {count} independent judgements of the same agent run, PART 1 to PART \
{count}. Judge each part on its own, by its own instructions only, as if it were the only \
question; never let one part's findings change another's. Answer with one JSON object whose \
keys are {keys}: each the answer its part asks for.\
"""


@dataclass
class Member:
    """One scorer's task in a batch: whether it has asked yet."""

    batch: CallBatch
    asked: bool = False


@dataclass
class _Question:
    client: JudgeClient
    request: JudgeRequest[Any]
    future: asyncio.Future[Judgement[Any]]


@dataclass
class CallBatch:
    """The scorers judging one run with one judge; ``members`` of them will ask or leave."""

    members: int
    fusion_key: str
    _waiting: list[_Question] = field(default_factory=list)
    _settled: int = 0
    _fired: bool = False
    _task: asyncio.Task[None] | None = None

    def join(self) -> Member:
        return Member(self)

    def accepts(self, member: Member, client: JudgeClient, request: JudgeRequest[Any]) -> bool:
        return (not member.asked and not self._fired and not request.examples
                and client.fusion_key == self.fusion_key)

    async def ask(self, member: Member, client: JudgeClient,
                  request: JudgeRequest[Any]) -> Judgement[Any]:
        """``request``'s judgement: one part of the batch's call, or, for a request that
        cannot be fused (examples, another judge, a second question), a call of its own."""
        if not self.accepts(member, client, request):
            self.leave(member)
            return await client.judge(request)
        member.asked = True
        future: asyncio.Future[Judgement[Any]] = asyncio.get_running_loop().create_future()
        self._waiting.append(_Question(client, request, future))
        self._settle()
        return await asyncio.shield(future)

    def leave(self, member: Member) -> None:
        """A member finished (or was cancelled) without asking."""
        if not member.asked:
            member.asked = True
            self._settle()

    def _settle(self) -> None:
        self._settled += 1
        if self._fired or self._settled < self.members or not self._waiting:
            return
        self._fired = True
        self._task = asyncio.get_running_loop().create_task(self._call(list(self._waiting)))

    async def _call(self, questions: list[_Question]) -> None:
        client = questions[0].client
        try:
            if len(questions) == 1:
                outcomes: list[Judgement[Any] | BaseException] = [
                    await client.judge(questions[0].request)]
            else:
                outcomes = list(await judge_fused(client, [q.request for q in questions]))
        except BaseException as exc:  # every member gets the failure (cancelled: then re-raised)
            outcomes = [exc] * len(questions)
        for question, outcome in zip(questions, outcomes, strict=True):
            if question.future.done():
                continue
            if isinstance(outcome, BaseException):
                question.future.set_exception(outcome)
            else:
                question.future.set_result(outcome)
        if outcomes and isinstance(outcomes[0], asyncio.CancelledError):
            raise outcomes[0]


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
        "completion_tokens": part(usage.completion_tokens),
        "cost_usd": None if usage.cost_usd is None else usage.cost_usd / count,
        "fused": count})

