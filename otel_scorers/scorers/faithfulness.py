"""The faithfulness scorer: is the answer grounded in what the agent's tools and retrievals
returned? One judge call (seed: Mastra ``createFaithfulnessScorer``, which needs two; docs/
mastra.md lists the differences).

The context is, in order: the scorer's own ``context`` (Mastra's ``options.context``), a run's
``context`` in its request context, additional context or input, else the run's own: the
results of its successful tool calls and the documents its retrievals returned. The judge
lists the answer's claims (at most 30) and gives each a verdict against the context in the same
answer: ``yes`` (supported), ``no`` (contradicted), ``unsure`` (not in the context). Score =
supported claims / claims, rounded to two decimals, times ``scale`` (Mastra's formula: unsure
counts as unsupported); contradicted claims are named in the reason. Passes at
``pass_threshold`` (default 1.0: every claim supported).

No context is a counted ``no_context`` decision, never a score; an answer with no factual
claim (a greeting, a question back) is ``no_claims``: there is nothing to ground.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from otel_scorers.errors import ConfigError, ScorerInputError
from otel_scorers.judge.client import JudgeClient, Judgement, JudgeRequest
from otel_scorers.registry import Flag, Options, ScorerType, option
from otel_scorers.scorers.analysis import (
    Calibrated,
    CaseLike,
    CriterionVerdict,
    RubricAnalysis,
)
from otel_scorers.scorers.base import LLMScorer, Question, digest
from otel_scorers.scorers.cases import band_problems
from otel_scorers.scorers.result import JudgeModel, ScoreResult, bounded_list, bounded_text
from otel_scorers.scorers.run import ScorerRun, text_of

__all__ = ["FaithfulnessAnalysis", "FaithfulnessScorer", "context_of"]

MAX_CLAIMS = 30
#: Characters of context sent to the judge (each piece clipped to a share of it).
MAX_CONTEXT_CHARS = 24_000
MAX_PIECE_CHARS = 6_000

INSTRUCTIONS = """\
You judge whether an AI agent's RESPONSE is faithful to the CONTEXT (what its tools and \
retrievals returned). First list the response's claims: every factual statement, split \
compound sentences into single claims, include numbers, dates and names; leave out \
questions, greetings, offers of help and instructions to the user. At most 30 claims. For each \
claim give "claim" (short, in the response's words), "verdict": "yes" if the context states \
or directly implies it, "no" if the context contradicts it, "unsure" if the context does not \
say (speculation, outside knowledge), then "reason" (one sentence). Use only the context, \
never your own knowledge. A response with no factual claim has an empty list.\
"""


class _Claim(JudgeModel):
    claim: bounded_text(300)  # type: ignore[valid-type]
    verdict: Literal["yes", "no", "unsure"]
    reason: bounded_text(300)  # type: ignore[valid-type]


class _Answer(JudgeModel):
    claims: bounded_list(_Claim, MAX_CLAIMS)  # type: ignore[valid-type]


class FaithfulnessAnalysis(RubricAnalysis):
    """``analyzeStepResult``: one criterion per claim (satisfied: supported), the counts, and
    where the context came from."""

    verdict_metrics = False
    supported: int = 0
    contradicted: int = 0
    unsure: int = 0
    context_source: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "supported": self.supported,
                "contradicted": self.contradicted, "unsure": self.unsure,
                "contextSource": self.context_source}

    def calibrated(self, case: CaseLike, result: ScoreResult) -> Calibrated:
        """The normalized score (supported claims / claims) and the label."""
        if result.score is None:
            return super().calibrated(case, result)
        return Calibrated(judged_pass=result.label == "pass",
                          normalized=result.score / result.scale)


class FaithfulnessScorer(LLMScorer):
    """Claims of the answer checked against the run's own context (see the module docstring)."""

    def __init__(self, model: str | JudgeClient | None = None, *,
                 context: Sequence[str] | None = None, scale: float = 1.0,
                 pass_threshold: float = 1.0, name: str = "faithfulness",
                 **judge_options: Any) -> None:
        super().__init__(model, name=name, scale=scale, judge_options=judge_options)
        if not 0.0 <= pass_threshold <= 1.0:
            raise ConfigError("pass_threshold is a share of the scale, between 0 and 1")
        if context is not None and (isinstance(context, str) or not all(
                isinstance(piece, str) for piece in context)):
            raise ConfigError("context is a list of strings")
        self.pass_threshold = pass_threshold
        self.context = tuple(context) if context is not None else None
        #: the run's tool results and retrievals are read only when no context is given
        self.uses_steps = self.context is None

    def cache_key(self, run: ScorerRun) -> str | None:
        pieces, _ = context_of(run, self.context)
        return digest("faithfulness", self.judge.fingerprint, self.scale, pieces,
                      run.user_prompt, run.response)

    def ask(self, run: ScorerRun) -> Question | ScoreResult:
        pieces, source = context_of(run, self.context)
        if not pieces:
            return ScoreResult(
                run_id=run.run_id, scorer=self.name, score=None, scale=self.scale,
                label="skipped", passed=None, skipped="no_context",
                reason="Not judged: nothing to ground the answer on (no tool result or "
                       "retrieved document in the run, and no context given).")
        if not run.response.strip():
            raise ScorerInputError("the run has no response to judge (empty output)")
        rendered = render_context(pieces)
        # the judge sees part of the context: a claim it cannot find may be in the rest
        cut = rendered != "\n\n".join(pieces) or len(rendered) > self.judge.max_field_chars
        fields = [("context", rendered)]
        if run.user_prompt:
            fields.append(("user request", run.user_prompt))
        fields.append(("agent response", run.response))
        request = JudgeRequest(instructions=INSTRUCTIONS, fields=fields, answer_model=_Answer,
                               task='List the claims with their verdicts; answer with the JSON '
                                    'object {"claims": [...]}.')
        return Question(request, lambda judgement: self._result(run, source, judgement, cut))

    def _result(self, run: ScorerRun, source: str, judgement: Judgement[Any],
                cut: bool = False) -> ScoreResult:
        """The score from the claims' verdicts. With the context ``cut`` (clipped for the
        judge), a claim it found no support for (``unsure``) may be supported in the part not
        shown: it is left out of the score, never counted unsupported; with no claim left to
        decide, the run is not scored (``context_truncated``)."""
        claims = judgement.value.claims
        if not claims:
            return ScoreResult(
                run_id=run.run_id, scorer=self.name, score=self.scale, scale=self.scale,
                label="skipped", passed=True, skipped="no_claims", judge=judgement.usage,
                reason="Not scored: the judge found no factual claim in the answer.")
        counts = {v: sum(1 for c in claims if c.verdict == v) for v in ("yes", "no", "unsure")}
        decided = len(claims) - counts["unsure"] if cut else len(claims)
        if not decided:
            return ScoreResult(
                run_id=run.run_id, scorer=self.name, score=None, scale=self.scale,
                label="skipped", passed=None, skipped="context_truncated", judge=judgement.usage,
                reason=f"Not scored: the {source} was cut to fit the judge, and none of the "
                       f"answer's {len(claims)} claim(s) could be decided on the part shown "
                       "(their support may lie in the rest).")
        level = round(counts["yes"] / decided, 2)
        verdicts = tuple(CriterionVerdict(
            id=f"claim_{i}", description=claim.claim,
            required=not (cut and claim.verdict == "unsure"),
            satisfied=claim.verdict == "yes", reasoning=f"{claim.verdict}: {claim.reason}")
            for i, claim in enumerate(claims, start=1))
        passed = level >= self.pass_threshold
        analysis = FaithfulnessAnalysis(
            criteria=verdicts, required_unmet=decided - counts["yes"], dynamic=True,
            supported=counts["yes"], contradicted=counts["no"], unsure=counts["unsure"],
            context_source=source)
        lines = [f"Faithfulness {level:.2f}: {counts['yes']} of {decided} claim(s) "
                 f"supported by the {source}, {counts['no']} contradicted, {counts['unsure']} "
                 "not in it." + (f" The {source} was cut to fit the judge: the "
                                 f"{counts['unsure']} claim(s) not found in the part shown are "
                                 "not counted against the answer." if cut and counts["unsure"]
                                 else "")]
        contradicted = [c.claim for c in claims if c.verdict == "no"]
        if contradicted:
            lines.append("Contradicted by the context: " + "; ".join(contradicted))
        lines += [f"- [{c.verdict.upper()}] {c.claim} — {c.reason}" for c in claims]
        return ScoreResult(run_id=run.run_id, scorer=self.name, score=level * self.scale,
                           scale=self.scale, label="pass" if passed else "fail", passed=passed,
                           reason="\n".join(lines), analysis=analysis, judge=judgement.usage)


def context_of(run: ScorerRun, given: Sequence[str] | None = None
               ) -> tuple[tuple[str, ...], str]:
    """The context to ground the answer on, and where it came from: ``given``, a run's own
    ``context``, else its successful tool results and retrieved documents."""
    if given:
        return tuple(given), "given context"
    for values in (run.request_context, run.additional_context, run.input_data):
        value = values.get("context")
        if value is not None:
            pieces = _pieces(value)
            if pieces:
                return pieces, "run's context"
    out: list[str] = []
    for step in run.steps:
        if step.kind == "tool" and not step.failed and step.result and step.result.strip():
            out.append(f"[tool {step.name}] {step.result}")
        elif step.kind == "retrieval":
            out += [f"[retrieved by {step.name}] {doc}" for doc in step.documents if doc.strip()]
    return tuple(out), "tool results and retrievals"


def _pieces(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,) if value.strip() else ()
    if isinstance(value, Mapping):
        text = text_of(value)
        return (text,) if text.strip() else ()
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        return tuple(p for item in value for p in _pieces(item))
    return ()


def render_context(pieces: Sequence[str]) -> str:
    """The pieces, each clipped, within :data:`MAX_CONTEXT_CHARS` (the rest said, not sent)."""
    lines, used = [], 0
    for index, piece in enumerate(pieces):
        text = piece if len(piece) <= MAX_PIECE_CHARS else piece[:MAX_PIECE_CHARS] + " [...]"
        if used + len(text) > MAX_CONTEXT_CHARS:
            lines.append(f"[{len(pieces) - index} more context piece(s) not shown]")
            break
        lines.append(text)
        used += len(text)
    return "\n\n".join(lines)


# -- the row -------------------------------------------------------------------------------------
class FaithfulnessOptions(Options):
    """The faithfulness scorer's options (``type: faithfulness``)."""

    context: list[str] | None = option(None, "a fixed context to ground answers "
                                       "on (else each run's tool results and retrieved "
                                       "documents)")
    pass_threshold: float | None = option(None, "the share of the scale that passes", ge=0,
                                          le=1)


def _shape(case: Any) -> None:
    expected = case.expected
    if expected.score is None or expected.band is None or expected.label is None:
        raise ValueError("a faithfulness case expects 'score', 'band' and 'label'")


def _check(case: Any) -> list[str]:
    expected = case.expected
    problems = band_problems(expected)
    if (expected.label == "pass") != (expected.score >= 1.0):
        problems.append(f"label {expected.label!r} but score {expected.score} (pass only "
                        "at 1.0)")
    return problems


FAITHFULNESS = ScorerType(
    name="faithfulness", options=FaithfulnessOptions,
    summary="the answer's claims checked against the run's own context (tool results, "
            "retrieved documents) in one judge call; `no_context` when there is none",
    build=lambda name, scale, o, judge: FaithfulnessScorer(
        judge, context=o.context, scale=scale, name=name,
        **({} if o.pass_threshold is None else {"pass_threshold": o.pass_threshold})),
    flags=(Flag("context", "Faithfulness: the context to ground on (repeatable, or @file; "
                "default: the run's tool results and retrieved documents).", multiple=True,
                text=True, metavar="TEXT"),),
    from_flags=lambda values: {"context": list(values["context"])} if values.get("context")
    else {},
    shape_case=_shape, check_case=_check)
