"""Length, latency and cost of a run, as quick checks (rows of
:mod:`~otel_scorers.scorers.check_rows`):

- ``max_length N [chars|words|tokens]`` / ``min_length N [...]`` (characters by default): the
  answer's length; words as ``str.split`` counts them. Tokens are not counted by a tokenizer
  (neither litellm's nor any model's): they are an estimate stated in the reason, a quarter of
  the characters, rounded up (OpenAI's rule of thumb for English); a check runs with no judge
  model and importing litellm for its tokenizers costs seconds on the worker;
- ``max_duration 5s`` (``ms``, ``s``, ``m``; a bare number is seconds): the interaction's span
  duration (:attr:`ScorerRun.duration_ns <otel_scorers.scorers.run.ScorerRun.duration_ns>`);
- ``max_tokens N``: the tokens of the run's LLM calls as each call reported them
  (``gen_ai.usage.input_tokens`` + ``output_tokens``, or OpenInference's
  ``llm.token_count.*``), summed; nothing is tokenized;
- ``max_cost 0.02`` (US dollars): those tokens priced with litellm's price map (the copy the
  installed litellm ships, read once when the check is built, without importing litellm), by
  each call's model; a call whose model has no price is left out of the sum and the reason
  says the figure is an estimate (no call priced at all: an ``invalid_input`` error result);
- ``max_llm_calls N``: the LLM calls the run made.

What a run does not record (no duration, no call reporting usage) is an ``invalid_input`` error
result saying so, never a pass. Past the steps a run keeps, a sum of the kept steps over the
limit fails; under it, it is not decided (``steps_truncated``).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from otel_scorers.errors import ConfigError, ScorerInputError
from otel_scorers.scorers.check_rows import CheckRow
from otel_scorers.scorers.checks import Check, Verdict
from otel_scorers.scorers.run import ScorerRun

__all__ = ["ROWS", "UNITS", "approximate_tokens", "max_cost", "max_duration", "max_length",
           "max_llm_calls", "max_tokens", "min_length"]

UNITS = ("chars", "words", "tokens")
_UNIT_SPELLINGS = {"chars": "chars", "char": "chars", "characters": "chars",
                   "character": "chars", "words": "words", "word": "words",
                   "tokens": "tokens", "token": "tokens"}


def approximate_tokens(text: str) -> int:
    """Tokens in ``text``, estimated: a quarter of its characters, rounded up."""
    return math.ceil(len(text) / 4)


#: An ASCII text's white space (what ``str.split`` splits on) as space, all else as ``x``.
_SPACE_OR_NOT = bytes(ord(" ") if chr(code).isspace() else ord("x") for code in range(256))


def words(text: str) -> int:
    """Words in ``text``: ``len(text.split())``, counted without making the words when the text
    is ASCII (a word begins wherever a non-space follows a space or the start)."""
    if not text.isascii():
        return len(text.split())
    marks = text.encode("ascii").translate(_SPACE_OR_NOT)
    return marks.count(b" x") + marks.startswith(b"x")


def _measure(text: str, unit: str) -> int:
    if unit == "words":
        return words(text)
    if unit == "tokens":
        return approximate_tokens(text)
    return len(text)


def max_length(limit: int, unit: str = "chars") -> Check:
    """The answer is at most ``limit`` characters, words or tokens long."""
    return _length("max_length", limit, unit, "at most")


def min_length(limit: int, unit: str = "chars") -> Check:
    """The answer is at least ``limit`` characters, words or tokens long."""
    return _length("min_length", limit, unit, "at least")


def _length(kind: str, limit: int, unit: str, bound: str) -> Check:
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
        raise ConfigError(f"{kind} needs a count >= 0, got {limit!r}")
    if unit not in UNITS:
        raise ConfigError(f"{kind} counts {', '.join(UNITS)}, got {unit!r}")
    return Check(f"{kind}_{limit}_{unit}", f"the answer is {bound} {limit} {unit}", kind,
                 (limit, unit), uses_steps=False)


def _length_test(longest: bool) -> Callable[[ScorerRun, int, str], Verdict]:
    def test(run: ScorerRun, limit: int, unit: str) -> Verdict:
        size = _measure(run.response, unit)
        ok = size <= limit if longest else size >= limit
        estimate = " (estimated: 4 characters a token)" if unit == "tokens" else ""
        return ok, (f"the answer is {size} {unit}{estimate} "
                    f"({'at most' if longest else 'at least'} {limit})")
    return test


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|sec|m|min)?\s*$")
_SCALE = {"ms": 0.001, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, None: 1.0}


def max_duration(seconds: float) -> Check:
    """The interaction took at most ``seconds``."""
    if not isinstance(seconds, int | float) or isinstance(seconds, bool) or seconds <= 0:
        raise ConfigError(f"max_duration needs a duration > 0, got {seconds!r}")
    shown = f"{seconds:g}s"
    return Check(f"max_duration_{shown.replace('.', '_')}", f"the run takes at most {shown}",
                 "max_duration", (float(seconds),), uses_steps=False)


def _duration(run: ScorerRun, seconds: float) -> Verdict:
    if run.duration_ns is None:
        raise ScorerInputError("max_duration: the run's duration is unknown (a run given as "
                               "data without duration_ns)")
    took = run.duration_ns / 1e9
    return took <= seconds, f"the run took {took:.3g} s (at most {seconds:g} s)"


def max_tokens(limit: int) -> Check:
    """The run's LLM calls used at most ``limit`` tokens in all (input and output)."""
    return Check(f"max_tokens_{_count(limit, 'max_tokens')}",
                 f"the run uses at most {limit} tokens", "max_tokens", (limit,))


def _tokens(run: ScorerRun, limit: int) -> Verdict:
    reported = [s for s in run.llm_steps
                if s.input_tokens is not None or s.output_tokens is not None]
    if not reported:
        raise ScorerInputError("max_tokens: no LLM call of the run reports its usage "
                               "(gen_ai.usage.input_tokens / output_tokens)")
    used = sum(step.tokens for step in reported)
    return _summed(run, used <= limit, f"{used} tokens in {len(reported)} LLM call(s) "
                                       f"(at most {limit})")


def _summed(run: ScorerRun, ok: bool, said: str) -> Verdict:
    """A sum over the kept steps: over the limit fails; under it, with steps left out, is
    not decided."""
    if ok and run.steps_dropped:
        return None, f"not decided: {said}, and {run.steps_dropped} steps were left out"
    return ok, said


def max_llm_calls(limit: int) -> Check:
    """The run made at most ``limit`` LLM calls."""
    return Check(f"max_llm_calls_{_count(limit, 'max_llm_calls')}",
                 f"the run makes at most {limit} LLM calls", "max_llm_calls", (limit,))


def _llm_calls(run: ScorerRun, limit: int) -> Verdict:
    count = len(run.llm_steps)
    return _summed(run, count <= limit, f"{count} LLM call(s) (at most {limit})")


def max_cost(usd: float) -> Check:
    """The run's LLM calls cost at most ``usd`` US dollars, priced by litellm's price map."""
    if not isinstance(usd, int | float) or isinstance(usd, bool) or usd < 0:
        raise ConfigError(f"max_cost needs an amount >= 0 (US dollars), got {usd!r}")
    if not _prices():
        raise ConfigError("max_cost needs litellm's price map, and the installed litellm "
                          "ships none")
    return Check(f"max_cost_{f'{usd:g}'.replace('.', '_')}",
                 f"the run costs at most ${usd:g}", "max_cost", (float(usd),))


@functools.lru_cache(maxsize=1)
def _prices() -> Mapping[str, Any]:
    """litellm's price map, the copy its package ships (read, not imported: seconds saved)."""
    spec = importlib.util.find_spec("litellm")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / "model_prices_and_context_window_backup.json"
        if path.is_file():
            loaded = json.loads(path.read_text(encoding="utf-8"))
            return loaded if isinstance(loaded, dict) else {}
    return {}


@functools.lru_cache(maxsize=1024)
def _price(model: str) -> tuple[float, float] | None:
    prices = _prices()
    for name in (model, model.split("/", 1)[-1]):
        entry = prices.get(name)
        if isinstance(entry, Mapping) and "input_cost_per_token" in entry:
            return (float(entry.get("input_cost_per_token") or 0),
                    float(entry.get("output_cost_per_token") or 0))
    return None


def _cost(run: ScorerRun, usd: float) -> Verdict:
    total = 0.0
    priced = 0
    unpriced: dict[str, int] = {}
    for step in run.llm_steps:
        if step.input_tokens is None and step.output_tokens is None:
            unpriced[step.name] = unpriced.get(step.name, 0) + 1
            continue
        price = _price(step.name)
        if price is None:
            unpriced[step.name] = unpriced.get(step.name, 0) + 1
            continue
        priced += 1
        total += (step.input_tokens or 0) * price[0] + (step.output_tokens or 0) * price[1]
    if not priced:
        raise ScorerInputError("max_cost: no LLM call of the run has both its usage and a "
                               f"price ({_listed(unpriced) or 'no LLM call'})")
    said = f"${total:.6f} for {priced} LLM call(s) (at most ${usd:g})"
    if unpriced:
        said += f"; an estimate: {_listed(unpriced)} left out (no usage or no price)"
    return _summed(run, total <= usd, said)


def _listed(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{count} call(s) of {name[:60]!r}" for name, count in
                     list(counts.items())[:5])


def _count(value: Any, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ConfigError(f"{name} needs a count >= 0, got {value!r}")
    return value


def _whole(arg: str, name: str) -> int:
    try:
        return int(arg)
    except ValueError:
        raise ConfigError(f"check {name} needs a whole number, got {arg!r}") from None


def _length_argument(kind: str, make: Callable[[int, str], Check]) -> Callable[[str], Check]:
    def build(arg: str) -> Check:
        number, _, unit = arg.partition(" ")
        spelled = _UNIT_SPELLINGS.get(unit.strip().lower() or "chars")
        if spelled is None:
            raise ConfigError(f"check {kind} counts {', '.join(UNITS)}, got {unit.strip()!r} "
                              f"(e.g. '{kind} 200 words')")
        return make(_whole(number, kind), spelled)
    return build


def _duration_argument(arg: str) -> Check:
    matched = _DURATION.match(arg)
    if matched is None:
        raise ConfigError(f"check max_duration needs a duration (5s, 800ms, 2m), got {arg!r}")
    return max_duration(float(matched.group(1)) * _SCALE[matched.group(2)])


def _amount(arg: str) -> Check:
    try:
        return max_cost(float(arg.strip().lstrip("$")))
    except ValueError:
        raise ConfigError(f"check max_cost needs an amount in US dollars, got {arg!r}") from None


ROWS = (
    CheckRow("max_length", _length_argument("max_length", max_length), _length_test(True)),
    CheckRow("min_length", _length_argument("min_length", min_length), _length_test(False)),
    CheckRow("max_duration", _duration_argument, _duration),
    CheckRow("max_tokens", lambda arg: max_tokens(_whole(arg, "max_tokens")), _tokens),
    CheckRow("max_cost", _amount, _cost),
    CheckRow("max_llm_calls", lambda arg: max_llm_calls(_whole(arg, "max_llm_calls")),
             _llm_calls),
)
