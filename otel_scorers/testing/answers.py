"""Scripted judge answers: what a real judge would return for this library's schemas.

:class:`Answer` is one scripted response (a chat completion, an HTTP fault, raw bytes or a
hang); :func:`rubric_answer` and :func:`alignment_answer` build the JSON of a verdict so tests
state verdicts rather than hand-write JSON; :func:`judge_responder` answers any request of the
built-in scorers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Answer",
    "RecordedRequest",
    "Responder",
    "alignment_answer",
    "faithfulness_answer",
    "fault",
    "garbage",
    "hang",
    "judge_responder",
    "reply",
    "rubric_answer",
    "tool_use_answer",
]

@dataclass(frozen=True)
class Answer:
    """One scripted response: a chat completion, an HTTP fault, raw bytes, or a hang."""

    content: str | None = None
    status: int = 200
    body: bytes | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    finish_reason: str = "stop"
    prompt_tokens: int = 100
    completion_tokens: int = 50
    #: of ``prompt_tokens``, reported as read from the provider's prompt cache
    cached_tokens: int = 0


_FENCED = re.compile(r"<<<(?P<nonce>[0-9a-f]+) BEGIN (?P<name>[^>\n]+)>>>\n(?P<body>.*?)\n"
                     r"<<<(?P=nonce) END (?P=name)>>>", re.S)


@dataclass(frozen=True)
class RecordedRequest:
    """A request the server received, decoded (header names lower-cased)."""

    path: str
    headers: Mapping[str, str]
    body: Mapping[str, Any]
    received_at: float

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", []))

    @property
    def fields(self) -> dict[str, str]:
        """The fenced fields the judge was shown, by name (``user request``, ``agent
        response``, ``agent instructions``, ``rubric criteria``, ...)."""
        return {match["name"]: match["body"] for match in _FENCED.finditer(self.text)}

    @property
    def text(self) -> str:
        """All message contents joined: what the judge was shown."""
        parts: list[str] = []
        for message in self.messages:
            content = message.get("content")
            if isinstance(content, str):
                parts.append(content)
            elif isinstance(content, list):
                parts.extend(str(p.get("text", "")) for p in content if isinstance(p, dict))
        return "\n".join(parts)


def reply(content: str | Mapping[str, Any], **kwargs: Any) -> Answer:
    """A successful completion whose message content is ``content`` (dicts are JSON-encoded)."""
    text = content if isinstance(content, str) else json.dumps(content)
    return Answer(content=text, **kwargs)


def fault(status: int, *, retry_after: float | None = None, message: str = "scripted fault",
          delay_s: float = 0.0) -> Answer:
    """An HTTP error in the OpenAI error format, optionally with a ``Retry-After`` header."""
    headers = {} if retry_after is None else {"Retry-After": f"{retry_after:g}"}
    body = json.dumps({"error": {"message": message, "type": "scripted", "code": status}})
    return Answer(status=status, body=body.encode(), headers=headers, delay_s=delay_s)


def garbage(body: bytes = b"\x00\xffnot json at all<html>", status: int = 200) -> Answer:
    """A response body that is not a chat completion at all."""
    return Answer(status=status, body=body)


def hang(seconds: float) -> Answer:
    """Hold the connection open for ``seconds`` before answering 200 with an empty JSON object."""
    return Answer(content="{}", delay_s=seconds)


def rubric_answer(verdicts: Sequence[bool], *, reasoning: Sequence[str] | None = None,
                  overall: str = "Scripted overall assessment.") -> dict[str, Any]:
    """The judge JSON for a rubric with one verdict per criterion, in criterion order."""
    notes = list(reasoning) if reasoning is not None else [
        f"Scripted reasoning for criterion {i}." for i in range(1, len(verdicts) + 1)
    ]
    return {
        "verdicts": {
            f"c{i}": {"reasoning": note, "satisfied": bool(ok)}
            for i, (ok, note) in enumerate(zip(verdicts, notes, strict=True), start=1)
        },
        "overallAssessment": overall,
    }


def _dimensions(scores: Sequence[float], *, requirements: Iterable[tuple[str, bool]] = (),
                missing: Sequence[str] = ()) -> dict[str, Any]:
    intent, reqs, complete, appropriate = scores
    return {
        "intentAlignment": {
            "primaryIntent": "scripted intent", "reasoning": "scripted intent reasoning",
            "isAddressed": intent >= 0.5, "score": intent,
        },
        "requirementsFulfillment": {
            "requirements": [
                {"requirement": r, "reasoning": "scripted", "isFulfilled": ok}
                for r, ok in requirements
            ],
            "overallScore": reqs,
        },
        "completeness": {
            "missingElements": list(missing), "reasoning": "scripted completeness reasoning",
            "score": complete,
        },
        "responseAppropriateness": {
            "reasoning": "scripted appropriateness reasoning",
            "formatAlignment": appropriate >= 0.5,
            "toneAlignment": appropriate >= 0.5, "score": appropriate,
        },
    }


def alignment_answer(user: Sequence[float] | None = None, system: Sequence[float] | None = None,
                     *, requirements: Iterable[tuple[str, bool]] = (), missing: Sequence[str] = (),
                     overall: str = "Scripted overall assessment.") -> dict[str, Any]:
    """The judge JSON for the prompt-alignment scorer.

    ``user`` and ``system`` are the four dimension scores (intent, requirements, completeness,
    appropriateness); give the ones the scorer's mode asks for.
    """
    answer: dict[str, Any] = {}
    reqs = list(requirements)
    if user is not None:
        answer["userAlignment"] = _dimensions(user, requirements=reqs, missing=missing)
    if system is not None:
        answer["systemCompliance"] = _dimensions(system, requirements=reqs, missing=missing)
    answer["overallAssessment"] = overall
    return answer


def tool_use_answer(calls: Sequence[tuple[bool, bool]], *, missing: Sequence[str] = (),
                    overall: str = "Scripted overall assessment.") -> dict[str, Any]:
    """The judge JSON for the tool-use scorer: ``(appropriate, arguments_correct)`` per call,
    in call order, and the tools it should have called."""
    return {"calls": {f"s{i}": {"reasoning": f"Scripted reasoning for call {i}.",
                                "appropriate": ok, "argumentsCorrect": args}
                      for i, (ok, args) in enumerate(calls, start=1)},
            "missingTools": list(missing), "overallAssessment": overall}


def faithfulness_answer(claims: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """The judge JSON for the faithfulness scorer: ``(claim, verdict)`` pairs, verdict ``yes``,
    ``no`` or ``unsure``."""
    return {"claims": [{"claim": claim, "verdict": verdict, "reason": f"Scripted: {verdict}."}
                       for claim, verdict in claims]}


def grounded_claims(response: str, context: str) -> list[tuple[str, str]]:
    """A scripted judge's claims: one per sentence of ``response``; ``yes`` when every number
    in it appears in ``context``, ``no`` when one does not, ``unsure`` without numbers."""
    found = set(re.findall(r"\d+(?:\.\d+)?", context))
    claims = []
    for sentence in re.split(r"(?<=[.!?])\s+", response.strip()):
        if not sentence:
            continue
        numbers = set(re.findall(r"\d+(?:\.\d+)?", sentence))
        verdict = "unsure" if not numbers else "yes" if numbers <= found else "no"
        claims.append((sentence, verdict))
    return claims


def _fields(text: str) -> dict[str, str]:
    return {m.group("name").strip(): m.group("body") for m in _FENCED.finditer(text)}


Responder = Callable[[RecordedRequest], Answer]

_CRITERION_LINE = re.compile(r"^c(\d+): ", re.MULTILINE)
_PART_BLOCK = re.compile(r'^PART \d+ \(answer under "part(\d+)"\)$', re.MULTILINE)


def judge_responder(*, satisfied: bool | Callable[[int, str], bool] = True,
                    user: Sequence[float] = (1.0, 1.0, 1.0, 1.0),
                    system: Sequence[float] = (1.0, 1.0, 1.0, 1.0),
                    delay_s: float = 0.0, prompt_tokens: int = 100,
                    completion_tokens: int = 50) -> Responder:
    """A responder that answers any request of the built-in scorers.

    Rubric requests get one verdict per criterion (``satisfied``, or ``satisfied(i, text)``
    per criterion); alignment requests get the dimension scores their mode asks for; tool-use
    requests call every tool call right (appropriate, right arguments, nothing missing);
    faithfulness requests get :func:`grounded_claims` of the response; a fused
    call gets each part's answer under its key; ``check-config --ping`` gets ``{"ok": true}``.
    """
    def answer(instructions: str, user_text: str) -> Mapping[str, Any]:
        if "used its tools" in instructions:
            calls = re.findall(r"^s\d+: ", _fields(user_text).get("tool calls", ""), re.M)
            return tool_use_answer([(True, True)] * len(calls))
        if "is faithful to the CONTEXT" in instructions:
            fields = _fields(user_text)
            return faithfulness_answer(grounded_claims(fields.get("agent response", ""),
                                                       fields.get("context", "")))
        criteria = _CRITERION_LINE.findall(user_text)
        if criteria and "rubric of criteria" in instructions:
            texts = re.findall(r"^c\d+: (.*)$", user_text, re.MULTILINE)
            verdicts = [satisfied(i, t) if callable(satisfied) else satisfied
                        for i, t in enumerate(texts, start=1)]
            return rubric_answer(verdicts)
        return alignment_answer(
            user=user if '"userAlignment"' in instructions else None,
            system=system if '"systemCompliance"' in instructions else None)

    def respond(request: RecordedRequest) -> Answer:
        user_text = str(request.messages[-1].get("content", "")) if request.messages else ""
        system_text = str(request.messages[0].get("content", "")) if request.messages else ""
        parts = _PART_BLOCK.split(system_text)
        if len(parts) > 1:  # a fused call: one answer per part, keyed part1, part2, ...
            content: Mapping[str, Any] = {
                f"part{index}": answer(block, user_text)
                for index, block in zip(parts[1::2], parts[2::2], strict=True)}
        elif "connectivity check" in system_text:
            content = {"ok": True}
        elif "used its tools" in system_text or "is faithful to the CONTEXT" in system_text:
            content = answer(system_text, user_text)
        elif _CRITERION_LINE.search(user_text):
            content = answer("rubric of criteria", user_text)
        else:
            content = answer(user_text, user_text)
        return reply(content, delay_s=delay_s, prompt_tokens=prompt_tokens,
                     completion_tokens=completion_tokens)
    return respond
