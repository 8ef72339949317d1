"""Redaction of judged text before it leaves the process.

A redactor is any ``Callable[[str], str]``. :class:`RegexRedactor` is the built-in one: it
replaces e-mail addresses, phone numbers, payment-card numbers (Luhn-checked, so order numbers
survive) and secrets with ``[REDACTED:<kind>]``. Secrets: PEM private-key blocks, OpenAI /
Anthropic / Stripe / GitHub / Slack / Google keys, AWS access key ids and secret access keys
(40 characters of mixed case and digits, not plain hex), JWTs, bearer tokens, HTTP Basic
credentials (``Authorization: Basic ...`` and ``user:password@`` in URLs) and ``key=value``
pairs named like secrets. It runs on every text field sent to the judge, before fencing and
truncation, and on judge error messages.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable

__all__ = ["DEFAULT_REDACTION_KINDS", "Redactor", "RegexRedactor", "environment_secrets",
           "mask_secrets"]

Redactor = Callable[[str], str]

_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")
_CARD = re.compile(r"(?<![\d-])(?:\d[ -]?){12,18}\d(?![\d-])")
_PHONE = re.compile(
    r"(?<![\w+])(?:"
    r"\+\d{1,3}[ .-]?(?:\(?\d{1,4}\)?[ .-]?){1,4}\d{2,4}"   # international: +44 20 7946 0958
    r"|\(\d{2,4}\)[ .-]?\d{3,4}[ .-]?\d{3,4}"              # area code: (415) 555-0132
    r"|\d{3}[ .-]\d{3,4}[ .-]\d{4}"                          # plain: 415-555-0132
    r")(?!\w)"
)
#: PEM private-key markers. A block is found by scanning from marker to marker (linear in the
#: text), never by one ``BEGIN.*?END`` pattern: that is quadratic on repeated BEGIN lines with
#: no END, and it runs under the GIL on the application's threads.
_PEM_BEGIN = re.compile(r"-----BEGIN (?:[A-Z0-9]+ )?(?:[A-Z0-9]+ )?PRIVATE KEY-----")
_PEM_END = re.compile(r"-----END (?:[A-Z0-9]+ )?(?:[A-Z0-9]+ )?PRIVATE KEY-----")
_URL_USERINFO = re.compile(r"(?<=://)[^/\s:@]+:[^/\s@]+(?=@)")
#: 40 characters of base64 alphabet standing alone: an AWS secret access key when it mixes
#: upper case, lower case and digits (a hex digest or a word run does not).
_AWS_SECRET = re.compile(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
#: Secret patterns, each starting with literal text so that the regex engine skips to its
#: candidates instead of trying every position (a leading ``\b`` would defeat that: the word
#: boundary on the left is checked by :func:`_redact_secret` instead). Python's ``re``
#: backtracks, so none may nest quantifiers: each is linear in the text.
_SECRET_PATTERNS = (
    r"sk-(?:proj-|ant-)?[A-Za-z0-9_-]{16,}",      # OpenAI / Anthropic style keys
    r"[sr]k_(?:live|test)_[0-9A-Za-z]{10,}",      # Stripe secret and restricted keys
    r"whsec_[0-9A-Za-z]{16,}",                    # Stripe webhook secrets
    r"[Bb][Aa][Ss][Ii][Cc]\s+[A-Za-z0-9+/]{8,}={0,2}",  # HTTP Basic credentials
    r"AKIA[0-9A-Z]{16}\b",                        # AWS access key id
    r"gh[pousr]_[A-Za-z0-9]{30,}\b",              # GitHub tokens
    r"xox[abprs]-[A-Za-z0-9-]{10,}",              # Slack tokens
    r"AIza[0-9A-Za-z_-]{35}\b",                   # Google API keys
    r"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",  # JWTs
    r"[Bb][Ee][Aa][Rr][Ee][Rr]\s+[A-Za-z0-9._~+/-]{16,}=*",  # bearer tokens
)
_SECRETS = tuple(re.compile(pattern) for pattern in _SECRET_PATTERNS)
#: ``key=value`` pairs named like secrets (no word boundary: ``my_api_key=...`` counts).
_NAMED_SECRET = re.compile(
    r"(?i:(?:api[_-]?key|secret|token|password)[\"']?\s*[:=]\s*[\"']?[^\s\"',;]{8,})")

DEFAULT_REDACTION_KINDS = ("secret", "email", "card", "phone")


def _luhn_ok(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char)
        if index % 2 == 1:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0


def _redact_pem(text: str) -> str:
    """Replace each private-key block with one marker, in one pass. A BEGIN with no END
    redacts to the end of the text: an unterminated key is still a key."""
    if "PRIVATE KEY-----" not in text:
        return text
    out: list[str] = []
    position = 0
    while (begin := _PEM_BEGIN.search(text, position)) is not None:
        out.append(text[position:begin.start()])
        out.append("[REDACTED:secret]")
        end = _PEM_END.search(text, begin.end())
        if end is None:
            return "".join(out)
        position = end.end()
    out.append(text[position:])
    return "".join(out)


def _redact_card(match: re.Match[str]) -> str:
    digits = re.sub(r"\D", "", match.group(0))
    return "[REDACTED:card]" if 13 <= len(digits) <= 19 and _luhn_ok(digits) else match.group(0)


def _redact_secret(match: re.Match[str]) -> str:
    """A secret pattern's match, redacted when it starts at a word boundary."""
    start = match.start()
    if start and (match.string[start - 1].isalnum() or match.string[start - 1] == "_"):
        return match.group(0)
    return "[REDACTED:secret]"


def _redact_aws(match: re.Match[str]) -> str:
    value = match.group(0)
    mixed = (any(c.isupper() for c in value) and any(c.islower() for c in value)
             and any(c.isdigit() for c in value))
    return "[REDACTED:secret]" if mixed else value


class RegexRedactor:
    """Replace PII and secrets with ``[REDACTED:<kind>]`` markers.

    ``kinds`` chooses among ``secret``, ``email``, ``card`` and ``phone`` (all by default);
    ``extra_patterns`` adds ``(name, regex)`` pairs of your own.
    """

    def __init__(self, kinds: Iterable[str] = DEFAULT_REDACTION_KINDS,
                 extra_patterns: Iterable[tuple[str, str]] = ()) -> None:
        chosen = tuple(kinds)
        unknown = set(chosen) - set(DEFAULT_REDACTION_KINDS)
        if unknown:
            raise ValueError(f"unknown redaction kinds: {sorted(unknown)}")
        self.kinds = chosen
        self._extra = tuple((name, re.compile(pattern)) for name, pattern in extra_patterns)

    def __call__(self, text: str) -> str:
        # Order matters: secrets and e-mails first so their digits are not taken for phones;
        # PEM blocks before everything (their base64 lines would be cut up by the others).
        if "secret" in self.kinds:
            text = _redact_pem(text)
            text = _URL_USERINFO.sub("[REDACTED:secret]", text)
            text = _NAMED_SECRET.sub("[REDACTED:secret]", text)
            for pattern in _SECRETS:
                text = pattern.sub(_redact_secret, text)
            text = _AWS_SECRET.sub(_redact_aws, text)
        if "email" in self.kinds:
            text = _EMAIL.sub("[REDACTED:email]", text)
        for name, pattern in self._extra:
            text = pattern.sub(f"[REDACTED:{name}]", text)
        if "card" in self.kinds:
            text = _CARD.sub(_redact_card, text)
        if "phone" in self.kinds:
            text = _PHONE.sub("[REDACTED:phone]", text)
        return text

    def __repr__(self) -> str:
        return f"RegexRedactor(kinds={self.kinds!r})"


_SECRET_NAME = re.compile(r"(?:API_KEY|_KEY|TOKEN|SECRET|PASSWORD|PASSWD)$", re.IGNORECASE)
_PROXY_NAMES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
                "all_proxy")
#: A piece of a secret this long (or longer) found in a text is masked too: a provider that
#: echoes a prefix, a suffix or the middle of a key gives it away.
PARTIAL_SECRET_CHARS = 10


def environment_secrets() -> list[str]:
    """Values of environment variables named like credentials (``*_API_KEY``, ``*_TOKEN``,
    ``*SECRET``, ``*PASSWORD``), 8 characters or longer, and the credentials of the proxy
    variables (``HTTPS_PROXY=http://user:password@host``): never to be echoed."""
    found = [value for name, value in os.environ.items()
             if len(value) >= 8 and _SECRET_NAME.search(name)]
    for name in _PROXY_NAMES:
        value = os.environ.get(name)
        if value and "@" in value:
            found.extend(_url_credentials(value))
    return found


def _url_credentials(url: str) -> list[str]:
    from urllib.parse import unquote, urlsplit

    try:
        parts = urlsplit(url)
        user, password = parts.username, parts.password
    except ValueError:
        return []
    out = [unquote(v) for v in (password,) if v]
    if user and password:
        out.append(f"{unquote(user)}:{unquote(password)}")
    return out


def _base64_cores(secret: str) -> list[str]:
    """What any base64 text holding ``secret`` contains, at each of the three alignments (an
    ``Authorization: Basic base64(user:key)`` header echoed back, say)."""
    import base64

    raw = secret.encode("utf-8", "replace")
    cores = []
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + raw).decode()
        lead = -(-offset * 4 // 3)  # characters touched by the padding bytes in front
        core = encoded[lead + (1 if offset else 0):len(encoded) - 4]
        if len(core) >= PARTIAL_SECRET_CHARS:
            cores.append(core)
    return cores


def mask_secrets(text: str, secrets: Iterable[str], *, min_length: int = 8) -> str:
    """``text`` with every secret (of ``min_length`` or more) masked as ``****``: whole
    occurrences, any piece of :data:`PARTIAL_SECRET_CHARS` or more characters of it (a prefix
    or the middle of a key, echoed), and its base64 forms (inside a Basic credential).
    Linear in the text: each secret's pieces are looked up by their 10-character grams."""
    chosen = {s for s in secrets if len(s) >= min_length}
    for secret in sorted(chosen, key=len, reverse=True):  # a secret containing another: whole
        text = text.replace(secret, "****")
    spans = _partial_spans(text, [piece for secret in chosen
                                  for piece in (secret, *_base64_cores(secret))])
    if not spans:
        return text
    out, position = [], 0
    for start, end in spans:
        out.append(text[position:start])
        out.append("****")
        position = end
    out.append(text[position:])
    return "".join(out)


def _partial_spans(text: str, secrets: list[str]) -> list[tuple[int, int]]:
    """Merged ``(start, end)`` spans of ``text`` that are pieces of a secret (10+ chars)."""
    n = PARTIAL_SECRET_CHARS
    grams = {secret[i:i + n] for secret in secrets if len(secret) >= n
             for i in range(len(secret) - n + 1)}
    if not grams:
        return []
    spans: list[tuple[int, int]] = []
    for i in range(len(text) - n + 1):
        if text[i:i + n] in grams:
            if spans and i <= spans[-1][1]:
                spans[-1] = (spans[-1][0], i + n)
            else:
                spans.append((i, i + n))
    return spans
