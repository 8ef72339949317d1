from __future__ import annotations

import pytest

from otel_scorers import RegexRedactor
from otel_scorers.judge.fence import Fence, truncate


@pytest.mark.parametrize(("text", "expected"), [
    ("mail me at a.b-c+d@mail.example.org now", "mail me at [REDACTED:email] now"),
    ("call +44 20 7946 0958 today", "call [REDACTED:phone] today"),
    ("call (415) 555-0132", "call [REDACTED:phone]"),
    ("card 4242-4242-4242-4242 ok", "card [REDACTED:card] ok"),
    ("key sk-ant-api03-abcdefghijklmnop_qrstu", "key [REDACTED:secret]"),
    ("token ghp_abcdefghijklmnopqrstuvwxyz0123456789", "token [REDACTED:secret]"),
    ("Authorization: Bearer abcdefghijklmnop.qrstuvwx", "Authorization: [REDACTED:secret]"),
    ('config api_key="s3cr3t-value-123"', "config [REDACTED:secret]\""),
])
def test_builtin_patterns(text: str, expected: str) -> None:
    assert RegexRedactor()(text) == expected


PEM = ("-----BEGIN RSA PRIVATE KEY-----\n"
       "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
       "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n"
       "-----END RSA PRIVATE KEY-----")


@pytest.mark.parametrize(("text", "expected"), [
    # the gaps a review found: AWS secret access keys, Stripe keys, HTTP Basic, PEM blocks
    ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
     "aws_secret_access_key = [REDACTED:secret]"),
    ("AWS wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY here", "AWS [REDACTED:secret] here"),
    ("stripe sk_live_51HxYzAbCdEfGhIjKlMnOpQr", "stripe [REDACTED:secret]"),
    ("restricted rk_live_51HxYzAbCdEfGhIjKlMnOp", "restricted [REDACTED:secret]"),
    ("hook whsec_abcdefghijklmnopqrstuvwx", "hook [REDACTED:secret]"),
    ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "Authorization: [REDACTED:secret]"),
    ("db at postgres://admin:hunter22@db.internal:5432/app",
     "db at postgres://[REDACTED:secret]@db.internal:5432/app"),
    (f"the key:\n{PEM}\nend", "the key:\n[REDACTED:secret]\nend"),
])
def test_secret_kinds_that_once_passed_through(text: str, expected: str) -> None:
    assert RegexRedactor()(text) == expected


@pytest.mark.parametrize("text", [
    "commit 3f786850e387550fdab836ed7e6dc881de23001b merged",  # a 40-hex digest: no secret
    "see https://example.com/docs/page for details",          # a URL without credentials
    "AbcdefghijAbcdefghijAbcdefghijAbcdefghij",                 # 40 letters, no digit
])
def test_look_alikes_survive(text: str) -> None:
    assert RegexRedactor()(text) == text


@pytest.mark.parametrize("text", [
    "order 1234 5678 9012 3456 shipped",     # fails the Luhn check: not a card
    "version 1.5.2 released in 2024",
    "the answer is 42",
    "def f(n): return n * 2",
])
def test_ordinary_text_survives(text: str) -> None:
    assert RegexRedactor()(text) == text


def test_kinds_and_extra_patterns() -> None:
    redactor = RegexRedactor(kinds=["email"], extra_patterns=[("ssn", r"\b\d{3}-\d{2}-\d{4}\b")])
    assert redactor("x@y.io 123-45-6789 +1 415-555-0132") == (
        "[REDACTED:email] [REDACTED:ssn] +1 415-555-0132")
    with pytest.raises(ValueError):
        RegexRedactor(kinds=["dna"])


def test_truncate_keeps_head_and_tail() -> None:
    text = "A" * 100 + "B" * 100
    cut = truncate(text, 60)
    assert cut.startswith("A" * 40) and cut.endswith("B" * 20)
    assert "140 characters truncated" in cut
    assert truncate("short", 60) == "short"


def test_fence_nonce_never_occurs_in_content() -> None:
    fence = Fence(["some text"])
    wrapped = fence.wrap("field", "payload")
    assert wrapped.startswith(f"<<<{fence.nonce} BEGIN field>>>")
    assert wrapped.endswith(f"<<<{fence.nonce} END field>>>")
    assert fence.declaration().endswith(fence.nonce)
