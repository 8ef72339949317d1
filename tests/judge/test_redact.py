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


def test_pem_blocks_are_cut_one_by_one_and_an_unterminated_key_to_the_end() -> None:
    redact = RegexRedactor()
    assert redact(f"{PEM}\nbetween\n{PEM}") == "[REDACTED:secret]\nbetween\n[REDACTED:secret]"
    assert redact("keep\n-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkq") == (
        "keep\n[REDACTED:secret]")
    assert redact("-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n"
                  "-----END OPENSSH PRIVATE KEY----- after") == "[REDACTED:secret] after"


MB = 1 << 20

#: Inputs built to make a backtracking pattern go quadratic (issue 25: 200 KB of repeated BEGIN
#: lines stalled every application thread ~5 s), each about 1 MB.
PATHOLOGICAL = {
    "pem_begins": "-----BEGIN PRIVATE KEY-----\n",
    "pem_rsa_begins": "-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA ",
    "letters": "a",
    "at_signs": "a@",
    "domains": "a@a.",
    "dots": "a.",
    "digits_spaced": "1 ",
    "digits_dashed": "1-",
    "digits": "1234567890",
    "phone_plus": "+1 ",
    "phone_parens": "(1)",
    "secret_names": "token: ",
    "secret_equals": "password=",
    "bearer": "bearer ",
    "basic": "Basic ",
    "url_userinfo": "://a:",
    "jwt_heads": "eyJaaaaaaaaa.",
    "key_prefixes": "sk-",
    "slack": "xoxb-",
    "base64": "A1a/",
    "spaces_after_name": "token" + " " * 64,
}


def _best_of_3(call: object) -> float:
    import time

    best = float("inf")
    for _ in range(3):  # the best of three, in this thread's CPU time: a busy machine (other
        # processes on the 2 cores) adds wall time, not the CPU a pattern costs
        started = time.thread_time()
        call()  # type: ignore[operator]
        best = min(best, time.thread_time() - started)
    return best


@pytest.mark.parametrize("name", sorted(PATHOLOGICAL))
def test_the_judge_redacts_1_mb_of_hostile_input_in_under_0_2_s(name: str) -> None:
    """What runs on the application's threads: the judge redacts what it will send (the
    truncated field, with a margin around each cut), so the cost does not grow with the text."""
    from otel_scorers.judge.client import JudgeClient

    unit = PATHOLOGICAL[name]
    text = unit * (MB // len(unit))
    judge = JudgeClient("openai/x", api_key="k", redactor=True)
    best = _best_of_3(lambda: judge._prepare(text))
    assert best < 0.2, f"{name}: {best:.3f} s for 1 MB"


@pytest.mark.parametrize("name", sorted(PATHOLOGICAL))
def test_every_pattern_is_linear(name: str) -> None:
    """The redactor itself on all of the text: 4x the input takes about 4x the time (a
    quadratic pattern takes 16x)."""
    unit = PATHOLOGICAL[name]
    redact = RegexRedactor()
    small = unit * ((MB // 4) // len(unit))
    large = unit * (MB // len(unit))
    ratio = _best_of_3(lambda: redact(large)) / max(_best_of_3(lambda: redact(small)), 1e-4)
    assert ratio < 8, f"{name}: 4x the input took {ratio:.1f}x the time"


def test_what_truncation_keeps_is_redacted_even_across_the_cut() -> None:
    from otel_scorers.judge.fence import REDACTION_MARGIN, redact_truncate

    key = "sk-proj-" + "A1b2C3d4" * 4
    filler = "x " * (REDACTION_MARGIN * 3)
    limit = 3_000
    head = (limit * 2) // 3
    # a key across the head's cut and one across the tail's, in a text far over the limit
    text = "a" * (head - 10) + " " + key + " " + filler + " " + key + " " + "b" * 900
    out = redact_truncate(text, limit, RegexRedactor())
    assert "A1b2C3d4" not in out and "sk-proj" not in out
    assert "characters truncated by otel-scorers" in out
    assert len(out) < limit + 100
    # an unterminated private key in the kept head is redacted to the window's end
    pem = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC" + "Q" * 5_000
    out = redact_truncate(pem + filler, limit, RegexRedactor())
    assert "MIIEvQ" not in out and out.startswith("[REDACTED:secret]")
