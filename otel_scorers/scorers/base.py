"""The scorer protocol and the base classes the built-in scorers share.

Anything with a ``name``, ``run(run) -> ScoreResult`` and ``async arun(run) -> ScoreResult``
is a scorer: the span processor runs it with the same sampling, emission and metrics as the
built-in ones. Subclass :class:`BaseScorer` and write one coroutine, ``score``; ``run`` and
``arun`` come with it (``run`` drives ``arun`` on the library's background loop, so there is a
single code path). An :class:`LLMScorer` writes ``ask`` instead: the :class:`Question` for the
judge (or the result, when no judge call is needed), and how its answer becomes a result; so
whoever calls the judge (the scorer itself, or one fused call for several scorers,
:mod:`otel_scorers.scorers.fused`) is the caller's choice, never hidden state.
"""

from __future__ import annotations

import abc
import hashlib
import inspect
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from otel_scorers.background_loop import run_sync
from otel_scorers.errors import ConfigError, JudgeError, ScorerInputError
from otel_scorers.judge.client import JudgeClient, Judgement, JudgeRequest
from otel_scorers.scorers.examples import FewShot
from otel_scorers.scorers.result import ScoreError, ScoreResult
from otel_scorers.scorers.run import RunLike, ScorerRun

__all__ = ["BaseScorer", "LLMScorer", "Question", "Scorer"]

logger = logging.getLogger(__name__)


@runtime_checkable
class Scorer(Protocol):
    """What the pipeline needs of a scorer."""

    name: str

    def run(self, run: RunLike) -> ScoreResult: ...

    async def arun(self, run: RunLike) -> ScoreResult: ...


class BaseScorer(abc.ABC):
    """Base class for scorers: implement :meth:`score`; input and judge errors become results."""

    name: str = "scorer"
    scale: float = 1.0
    #: Whether the scorer reads what the agent did (``ScorerRun.steps``): the pipeline keeps
    #: an interaction's tool calls, retrievals and LLM calls only when a scorer does.
    uses_steps: bool = False
    #: ``llm`` (a judge decides) or ``code`` (decided without a judge): what result sinks
    #: report as the annotator, and why a code scorer never goes to a judging process.
    kind: str = "llm"
    #: ``turn``: the pipeline gives it each interaction; ``session``: each conversation, once
    #: it goes idle (a session run: :attr:`ScorerRun.turns`). A custom scorer sets it too.
    level: str = "turn"

    def run(self, run: RunLike) -> ScoreResult:
        """Score ``run`` synchronously (safe from any thread that is not an event loop's)."""
        return run_sync(self.arun(run))

    async def arun(self, run: RunLike) -> ScoreResult:
        """Score ``run``; a judge or input failure is returned as an error result, not raised."""
        scorer_run = ScorerRun.coerce(run)
        try:
            return await self.score(scorer_run)
        except (ScorerInputError, JudgeError) as error:
            logger.debug("scorer %s: %s on run %s: %s", self.name, error.error_type,
                         scorer_run.run_id, error)
            return self.error_result(scorer_run, error)

    @abc.abstractmethod
    async def score(self, run: ScorerRun) -> ScoreResult:
        """Judge one run. Raise ``ScorerInputError`` or ``JudgeError`` to report a failure."""

    def error_result(self, run: ScorerRun, error: ScorerInputError | JudgeError) -> ScoreResult:
        return ScoreResult(run_id=run.run_id, scorer=self.name, scale=self.scale,
                           error=ScoreError.from_exception(error),
                           reason=f"Not scored: {error}", mode=self.mode_for(run),
                           judge=getattr(error, "usage", None))

    def mode_for(self, run: ScorerRun) -> str | None:
        """The evaluation mode reported on results (``None`` for scorers without modes)."""
        return None

    def cache_key(self, run: ScorerRun) -> str | None:
        """A key identifying the judge input for ``run``; equal keys give equal judgements.

        ``None`` (the default for custom scorers) disables caching.
        """
        return None


#: What a scorer passes on to its :class:`JudgeClient` (the client's keyword arguments).
JUDGE_OPTIONS = frozenset(
    name for name, parameter in inspect.signature(JudgeClient).parameters.items()
    if parameter.kind is inspect.Parameter.KEYWORD_ONLY)


def check_options(given: Mapping[str, Any], accepted: Iterable[str], what: str) -> None:
    """An unknown option is a :class:`ConfigError` naming it and what is accepted (never a
    ``TypeError`` from deep inside)."""
    allowed = set(accepted)
    unknown = sorted(set(given) - allowed)
    if unknown:
        raise ConfigError(f"{what} has no option {', '.join(map(repr, unknown))}; accepted: "
                          f"{', '.join(sorted(allowed))}")


def mastra_options(options: Mapping[str, Any] | None, own: Mapping[str, str],
                   what: str) -> dict[str, Any]:
    """A seed-style factory's ``options``: camelCase names (``evaluationMode``) or snake_case,
    checked against the scorer's own options (``own``: camelCase -> snake_case) and the judge
    options; anything else is a :class:`ConfigError`."""
    out: dict[str, Any] = {}
    for key, value in (options or {}).items():
        out[own.get(key, key)] = value
    check_options(out, {*own.values(), *JUDGE_OPTIONS}, what)
    return out


def validate_scale(scale: float) -> float:
    if not isinstance(scale, int | float) or isinstance(scale, bool) or not scale > 0:
        raise ConfigError(f"scale must be a number > 0, got {scale!r}")
    return float(scale)


def digest(*parts: Any) -> str:
    """A short stable hash of ``parts`` (for cache keys)."""
    h = hashlib.sha256()
    for part in parts:
        h.update(repr(part).encode("utf-8", "surrogatepass"))
        h.update(b"\x1f")
    return h.hexdigest()[:32]


#: The fields a verdict is about: shown under a tenth, the run is not judged.
ESSENTIAL_FIELDS = frozenset({"agent response", "user request"})
TOO_LARGE_FACTOR = 10


@dataclass(frozen=True)
class Question:
    """What an LLM scorer asks the judge about one run, and how the answer becomes its result."""

    request: JudgeRequest[Any]
    answer: Callable[[Judgement[Any]], ScoreResult]


class LLMScorer(BaseScorer):
    """A scorer judged by an LLM through a :class:`JudgeClient`: one question per run."""

    @abc.abstractmethod
    def ask(self, run: ScorerRun) -> Question | ScoreResult:
        """The question for the judge about ``run``, or its result when no judge call is
        needed (a rubric scorer with no rubric). Raises ``ScorerInputError`` for a run it
        cannot judge."""

    def question_for(self, run: ScorerRun) -> Question | ScoreResult:
        """:meth:`ask`, and a run too large to show: when the agent's response or the user's
        request is more than :data:`TOO_LARGE_FACTOR` times what the judge is shown of a
        field (``max_field_chars``), the judge would see under a tenth of it; no verdict on
        that is a verdict on the run, so it is not judged (``input_too_large``, counted and
        said with its fix)."""
        asked = self.ask(run)
        if isinstance(asked, ScoreResult):
            return asked
        limit = self.judge.max_field_chars
        for name, text in asked.request.fields:
            if name in ESSENTIAL_FIELDS and limit > 0 and len(text) > TOO_LARGE_FACTOR * limit:
                return ScoreResult(
                    run_id=run.run_id, scorer=self.name, score=None, scale=self.scale,
                    label="skipped", passed=None, skipped="input_too_large",
                    mode=self.mode_for(run),
                    reason=f"Not judged: the {name} is {len(text):,} characters and the "
                           f"judge is shown {limit:,} of a field: under a tenth of it.")
        return asked

    async def score(self, run: ScorerRun) -> ScoreResult:
        asked = self.question_for(run)
        if isinstance(asked, ScoreResult):
            return asked
        return asked.answer(await self.judge.judge(asked.request))

    def __init__(self, model: str | JudgeClient | None, *, name: str, scale: float,
                 judge_options: dict[str, Any]) -> None:
        self.name = name
        self.scale = validate_scale(scale)
        if isinstance(model, JudgeClient):
            if judge_options:
                raise ConfigError("pass judge options to the JudgeClient, not beside it")
            self.judge = model
        else:
            check_options(judge_options, JUDGE_OPTIONS, f"the {name} scorer")
            self.judge = JudgeClient.from_environment(model, **judge_options)
        #: Few-shot examples (:mod:`otel_scorers.scorers.examples`), set by the subclasses.
        self.examples: FewShot | None = None

    def set_examples(self, examples: Any, *, kind: str, max_tokens: int) -> None:
        self.examples = FewShot.build(examples, kind=kind, max_tokens=max_tokens,
                                      redactor=self.judge.redactor)

    @property
    def examples_text(self) -> str:
        return self.examples.text if self.examples else ""

    @property
    def examples_digest(self) -> str:
        return self.examples.digest if self.examples else ""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, judge={self.judge!r})"
