"""Personal data in the answer, as a quick check (a row of
:mod:`~otel_scorers.scorers.check_rows`): ``no_pii`` holds when the answer shows none of the
kinds asked for.

``no_pii`` looks for every built-in kind; ``no_pii email, card`` for those named; an item
``name=REGEX`` adds a pattern of your own (``no_pii email, employee=EMP-\\d{6}``; items are
split on commas outside brackets and braces, so ``\\d{2,4}`` stays whole). The kinds:

- ``email``, ``phone`` and ``card`` (13 to 19 digits passing the Luhn check, so order numbers
  are not cards): the project's redaction detectors (:mod:`otel_scorers.judge.redact`), the
  same patterns that keep these out of judge prompts;
- ``iban``: two letters, two check digits and up to 30 letters or digits (written whole or
  in groups of four) passing the ISO 13616 mod-97 check;
- ``ip``: an IPv4 or IPv6 address, as the standard library's ``ipaddress`` reads it (a
  dotted version number with four parts reads as one too).

The reason says which kind was found, how often and at which character of the answer, never
the value itself: the reason lands on spans, events, logs and backends. A pattern of your own
is searched with the ``regex`` module under the budget ``matches`` has
(:data:`~otel_scorers.scorers.checks.MATCH_TIMEOUT_S`; past it, an ``invalid_input`` error
result).
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Callable, Iterator
from typing import Any

import regex

from otel_scorers.errors import ConfigError, ScorerInputError
from otel_scorers.judge.redact import _CARD, _EMAIL, _PHONE, _luhn_ok
from otel_scorers.scorers.check_rows import CheckRow
from otel_scorers.scorers.checks import MATCH_TIMEOUT_S, Check, Verdict
from otel_scorers.scorers.run import ScorerRun

__all__ = ["KINDS", "ROWS", "find_pii", "no_pii"]

_IBAN = re.compile(
    r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?(?![A-Za-z0-9])")
_IPV4 = re.compile(r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?![\d.])")
_IPV6 = re.compile(r"(?<![\w:])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:])")


def _iban_ok(text: str) -> bool:
    code = text.replace(" ", "")
    if not 15 <= len(code) <= 34:
        return False
    moved = code[4:] + code[:4]
    return int("".join(str(int(char, 36)) for char in moved)) % 97 == 1


def _ip_ok(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _digits_ok(text: str) -> bool:
    digits = re.sub(r"\D", "", text)
    return 13 <= len(digits) <= 19 and _luhn_ok(digits)


def _ipv6_ok(text: str) -> bool:
    return any(char not in ":" for char in text) and _ip_ok(text)


#: Each built-in kind: its patterns and what a candidate must pass. Earlier kinds claim their
#: characters first (an e-mail's digits are not a phone's), as the redactor orders them.
_DETECTORS: dict[str, tuple[tuple[Any, Callable[[str], bool] | None], ...]] = {
    "email": ((_EMAIL, None),),
    "iban": ((_IBAN, _iban_ok),),
    "card": ((_CARD, _digits_ok),),
    "ip": ((_IPV4, _ip_ok), (_IPV6, _ipv6_ok)),
    "phone": ((_PHONE, None),),
}
KINDS = tuple(_DETECTORS)


def find_pii(text: str, kinds: tuple[str, ...] = KINDS,
             patterns: tuple[tuple[str, str], ...] = ()) -> dict[str, list[int]]:
    """Where each kind is found in ``text``: the character offsets of its matches, by kind
    (never the values)."""
    found: dict[str, list[int]] = {}
    claimed: list[tuple[int, int]] = []
    for kind, start, end in _matches(text, kinds, patterns):
        if any(start < right and left < end for left, right in claimed):
            continue
        claimed.append((start, end))
        found.setdefault(kind, []).append(start)
    return found


#: Cheap tests first (C-speed translations and substring searches, a few microseconds on
#: kilobytes): a pattern runs only where its test finds a candidate. Each test holds wherever
#: its pattern can match (a superset), so nothing is missed: digits written 0 (an IPv4
#: address holds ``0.0``), separators dropped too (a card holds 13 digits in a row, a phone
#: without ``+`` 8), hex digits written 0 (an IPv6 address holds ``0:0`` or ``::``), capitals
#: written A (an IBAN starts ``AA00``). The views are bytes, translated by a table: the text
#: itself when it is ASCII; else the text with every digit written 0 first (the patterns'
#: ``\d`` is any Unicode digit: a card in full-width digits passes the Luhn check), as UTF-8,
#: where an ASCII needle is found exactly where it is in the text.
_ANY_DIGIT = re.compile(r"\d")
_DIGIT_TABLE = bytes.maketrans(b"0123456789", b"0" * 10)
#: Each view: its table, and the characters it drops.
_TABLES = {
    "digits": (_DIGIT_TABLE, b""), "compact": (_DIGIT_TABLE, b" .-()"),
    "hex": (bytes.maketrans(b"0123456789abcdefABCDEF", b"0" * 22), b""),
    "capitals": (bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
                                 b"A" * 26 + b"0" * 10), b""),
}


class _Views:
    """The translated views of one text, each made on first use."""

    def __init__(self, text: str) -> None:
        self.base = (text.encode("ascii") if text.isascii() else
                     _ANY_DIGIT.sub("0", text).encode("utf-8", "surrogatepass"))
        self._made: dict[str, bytes] = {}

    def view(self, name: str) -> bytes:
        made = self._made.get(name)
        if made is None:
            table, dropped = _TABLES[name]
            made = self._made[name] = self.base.translate(table, dropped)
        return made


_WORTH: dict[int, Callable[[_Views], bool]] = {
    id(_EMAIL): lambda v: b"@" in v.base,
    id(_IBAN): lambda v: b"AA00" in v.view("capitals"),
    id(_CARD): lambda v: b"0" * 13 in v.view("compact"),
    id(_IPV4): lambda v: b"." in v.base and b"0.0" in v.view("digits"),
    id(_IPV6): lambda v: b"::" in v.base or b"0:0" in v.view("hex"),
    id(_PHONE): lambda v: b"+" in v.base or b"0" * 8 in v.view("compact"),
}


def _matches(text: str, kinds: tuple[str, ...], patterns: tuple[tuple[str, str], ...]
             ) -> Iterator[tuple[str, int, int]]:
    views = _Views(text)
    for kind in (k for k in KINDS if k in kinds):
        for pattern, valid in _DETECTORS[kind]:
            if not _WORTH[id(pattern)](views):
                continue
            for match in pattern.finditer(text):
                if valid is None or valid(match.group(0)):
                    yield kind, match.start(), match.end()
    for name, pattern in patterns:
        try:
            hits = list(_compiled(pattern).finditer(text, concurrent=True,
                                                    timeout=MATCH_TIMEOUT_S))
        except TimeoutError:
            raise ScorerInputError(
                f"no_pii: the pattern of {name!r} gave up after {MATCH_TIMEOUT_S:g} s on this "
                f"answer of {len(text)} characters (nested repeats): simplify it") from None
        yield from ((name, hit.start(), hit.end()) for hit in hits if hit.end() > hit.start())


@functools.lru_cache(maxsize=64)
def _compiled(pattern: str) -> Any:
    return regex.compile(pattern, flags=regex.VERSION0)


def no_pii(kinds: tuple[str, ...] = KINDS, patterns: tuple[tuple[str, str], ...] = ()) -> Check:
    """The answer shows none of ``kinds`` (built-in detectors) nor ``patterns`` (``(name,
    regex)`` pairs of your own)."""
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        raise ConfigError(f"no_pii knows {', '.join(KINDS)} (and name=REGEX), got {unknown}")
    for name, pattern in patterns:
        if not re.fullmatch(r"\w+", name):
            raise ConfigError(f"no_pii: a pattern's name is a word, got {name!r}")
        try:
            _compiled(pattern)
        except (regex.error, TypeError) as exc:
            raise ConfigError(f"no_pii: the pattern of {name!r} is not a regular expression: "
                              f"{exc}") from None
    names = (*kinds, *(name for name, _ in patterns))
    ident = "no_pii" if tuple(kinds) == KINDS and not patterns else "no_pii_" + "_".join(names)
    return Check(ident[:60], f"the answer shows no {', '.join(names)}", "no_pii",
                 (tuple(kinds), tuple(patterns)), uses_steps=False)


def _no_pii(run: ScorerRun, kinds: tuple[str, ...], patterns: tuple[tuple[str, str], ...]
            ) -> Verdict:
    found = find_pii(run.response, kinds, patterns)
    if not found:
        return True, f"none found ({', '.join((*kinds, *(n for n, _ in patterns)))})"
    return False, "found: " + "; ".join(
        f"{kind} x{len(at)} at character{'s' if len(at) > 1 else ''} "
        + ", ".join(str(offset) for offset in at[:5]) + (", ..." if len(at) > 5 else "")
        for kind, at in found.items())


def _items(arg: str) -> list[str]:
    """``arg`` split on commas outside ``[]``, ``{}`` and ``()``."""
    items: list[str] = []
    current: list[str] = []
    depth = 0
    for char in arg:
        if char in "[{(":
            depth += 1
        elif char in "]})":
            depth = max(0, depth - 1)
        if char == "," and depth == 0:
            items.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    items.append("".join(current).strip())
    return [item for item in items if item]


def _build(arg: str) -> Check:
    kinds: list[str] = []
    patterns: list[tuple[str, str]] = []
    for item in _items(arg):
        name, equals, pattern = item.partition("=")
        if equals:
            patterns.append((name.strip(), pattern.strip()))
        else:
            kinds.append(item.lower())
    return no_pii(tuple(kinds) if kinds else (KINDS if not patterns else ()), tuple(patterns))


ROWS = (CheckRow("no_pii", _build, _no_pii, aliases=("nopii",)),)
