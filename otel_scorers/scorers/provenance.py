"""Which evaluator produced a result: provenance on every result.

A dashboard that averages results of two judges (a provider swapped the model snapshot, a
rubric was edited, the library's prompt changed) splices two series without a word. Every
emitted result therefore says who produced it:

- ``id``: the scorer's name (as configured), ``type``: ``llm`` (a judge decides) or ``code``
  (decided in code), as the OTel GenAI proposal for evaluator identity names them
  (``gen_ai.evaluation.evaluator.id`` / ``.type``, open-telemetry/semantic-conventions-genai
  PR 359, in development: the names follow it, the values are this library's);
- ``judge_model``: the judge model (``None`` for a code scorer);
- ``fingerprint``: 12 hex characters of a hash over everything that defines the judgement but
  the run: the scorer's class, scale and options (criteria, mode, threshold, checks, expected
  tools), the judge's settings (:attr:`JudgeClient.fingerprint`: model, endpoint, temperature,
  structured-output mode, redaction), the few-shot examples, and the text of the instructions
  the library sends (the prompt constants of the scorer's module and of
  :mod:`~otel_scorers.scorers.prompts`). A rubric resolved per run (per agent, or from the
  span's ``otel_scorers.rubric``) is part of it: edit a rubric and the fingerprint changes;
- ``score_min`` / ``score_max``: the score's range (0 to the scale).

The fingerprint never includes the run's content, and it is a hash: it says *that* two results
came from different evaluators, never what the prompt said.
"""

from __future__ import annotations

import functools
import hashlib
import re
import sys
from typing import Any

from otel_scorers.scorers import prompts
from otel_scorers.scorers.result import Evaluator

__all__ = ["Evaluator", "evaluator_of", "fingerprint_of"]

#: Options of a scorer that shape its judgement (read when present).
_OPTIONS = ("evaluation_mode", "pass_threshold", "include_trajectory", "checks", "expectation",
            "max_claims", "level")
#: A memory address in a repr (a callable's): never part of a fingerprint.
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


@functools.cache
def _prompt_text(module_name: str) -> str:
    """The prompt constants (upper-case string values) of a module, in a stable order."""

    texts: list[str] = []
    for module in (sys.modules.get(module_name), prompts):
        if module is None:
            continue
        texts += [f"{key}={value}" for key, value in sorted(vars(module).items())
                  if key.isupper() and isinstance(value, str)]
    return "\x1f".join(texts)


def _resolved(scorer: Any, run: Any) -> Any:
    """The criteria the scorer judges ``run`` by (a rubric resolved for it), else its own
    (the same object for every run), as they are: :func:`_described` for the hash."""
    criteria = getattr(scorer, "criteria", None)
    resolve = getattr(scorer, "resolve", None)
    if run is not None and callable(resolve):
        try:
            criteria, _ = resolve(run)
        except Exception:  # a rubric that does not parse: the result says so
            return "unreadable rubric"
    return criteria


def _described(criteria: Any) -> Any:
    if criteria is None or isinstance(criteria, str):
        return criteria
    return tuple((getattr(c, "description", repr(c)), getattr(c, "id", None),
                  getattr(c, "required", None)) for c in criteria)


class _Same:
    """An option held by identity: equal only to itself (an option's own ``==`` may be costly
    or raise)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same) and other.value is self.value

    __hash__ = None  # type: ignore[assignment]


#: id(scorer) -> (the scorer, the key its static part was hashed under, that hash): the static
#: part (type, scale, judge, examples, prompts, options) is hashed once per configuration, not
#: once per result (it was a tenth of an evaluation's CPU); bounded.
_STATIC: dict[int, tuple[Any, tuple[Any, ...], Any]] = {}
_STATIC_MAX = 1024


def _static_key(scorer: Any) -> tuple[Any, ...]:
    """What the static part is made of: scale, the judge's fingerprint, the examples, and the
    options themselves (held and compared by identity: no freed option's id can match)."""
    options = tuple((option, _Same(value)) for option in _OPTIONS
                    if (value := getattr(scorer, option, None)) is not None)
    return (float(getattr(scorer, "scale", 1.0)),
            getattr(getattr(scorer, "judge", None), "fingerprint", None),
            getattr(scorer, "examples_digest", ""), options)


def _static_hash(scorer: Any, key: tuple[Any, ...] | None = None) -> Any:
    """A sha256 fed with ``scorer``'s static parts (a copy to go on with); ``key``: its
    :func:`_static_key`, when the caller has it."""
    key = _static_key(scorer) if key is None else key
    found = _STATIC.get(id(scorer))
    if found is not None and found[0] is scorer and found[1] == key:
        return found[2].copy()
    parts: list[Any] = [f"{type(scorer).__module__}.{type(scorer).__qualname__}", key[0],
                        key[1], key[2], _prompt_text(type(scorer).__module__)]
    for option in _OPTIONS:
        value = getattr(scorer, option, None)
        if value is not None:
            parts.append((option, _ADDRESS.sub("", repr(value))))
    h = hashlib.sha256()
    for part in parts:
        h.update(repr(part).encode("utf-8", "surrogatepass"))
        h.update(b"\x1f")
    if len(_STATIC) >= _STATIC_MAX:
        _STATIC.clear()
    _STATIC[id(scorer)] = (scorer, key, h)
    return h.copy()


def fingerprint_of(scorer: Any, run: Any = None) -> str:
    """The fingerprint of ``scorer`` judging ``run`` (``None``: its static configuration)."""
    return _fingerprint(scorer, _resolved(scorer, run))


def _fingerprint(scorer: Any, criteria: Any, key: tuple[Any, ...] | None = None) -> str:
    h = _static_hash(scorer, key)
    h.update(repr(_described(criteria)).encode("utf-8", "surrogatepass"))
    h.update(b"\x1f")
    return str(h.hexdigest()[:12])


#: id(scorer) -> (the scorer, what its evaluator was made of, that evaluator): a scorer's
#: results on runs judged by the same criteria share one (it was made and hashed again for
#: every result); bounded
_EVALUATORS: dict[int, tuple[Any, tuple[Any, ...], Evaluator]] = {}


def evaluator_of(scorer: Any, run: Any = None) -> Evaluator:
    """The :class:`Evaluator` of ``scorer``'s result on ``run``."""
    judge = getattr(scorer, "judge", None)
    kind = getattr(scorer, "kind", "llm")
    criteria, static = _resolved(scorer, run), _static_key(scorer)
    # the criteria held and compared by identity, as the options: a scorer's own criteria are
    # one object for every run
    key = (_Same(criteria), kind, getattr(scorer, "name", None), static)
    found = _EVALUATORS.get(id(scorer))
    if found is not None and found[0] is scorer and found[1] == key:
        return found[2]
    evaluator = Evaluator(id=str(getattr(scorer, "name", type(scorer).__name__))[:128],
                          type="code" if kind == "code" else "llm",
                          judge_model=getattr(judge, "model", None) if kind != "code" else None,
                          fingerprint=_fingerprint(scorer, criteria, static),
                          score_max=static[0])
    if len(_EVALUATORS) >= _STATIC_MAX:
        _EVALUATORS.clear()
    _EVALUATORS[id(scorer)] = (scorer, key, evaluator)
    return evaluator
