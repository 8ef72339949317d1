"""``no_pii``: the kinds of personal data the redaction detectors know (e-mail, phone, card
with the Luhn check) and IBAN (mod 97), IP addresses and patterns of one's own, found in the
answer; the reason says which kind and where, and the value itself appears in no span, event,
metric, log line or backend write of the live pipeline."""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Iterator, Sequence

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from otel_scorers import ChecksScorer, ConfigError, checks, registry
from otel_scorers.backends.base import Evaluated
from otel_scorers.config.settings import StrictModel
from otel_scorers.pipeline import ScoringSpanProcessor
from otel_scorers.policy import ContentPolicy
from otel_scorers.registry import Backend, option
from otel_scorers.scorers import personal
from otel_scorers.scorers.personal import find_pii
from otel_scorers.scorers.run import ScorerRun
from tests.support import Telemetry, end_agent_span

EMAIL, CARD, IBAN, IP, PHONE = ("jane.doe@example.com", "4111 1111 1111 1111",
                                "DE89 3704 0044 0532 0130 00", "203.0.113.7", "+44 20 7946 0958")


def run_of(output: str) -> ScorerRun:
    return ScorerRun.coerce({"input": "Who?", "output": output})


def test_each_kind_is_found_with_where_never_what() -> None:
    text = (f"Mail {EMAIL}, card {CARD}, IBAN {IBAN}, server {IP} or 2001:db8::1, "
            f"phone {PHONE}.")
    found = find_pii(text)
    assert set(found) == {"email", "card", "iban", "ip", "phone"}, found
    assert found["email"] == [text.index(EMAIL)] and len(found["ip"]) == 2
    held, why = checks.parse_check("no_pii")(run_of(text))
    assert held is False
    for value in (EMAIL, CARD, IBAN, IP, PHONE, "2001:db8::1"):
        assert value not in why
    assert f"email x1 at character {text.index(EMAIL)}" in why


def test_near_misses_are_not_personal_data() -> None:
    text = ("Order 1234567890123 (no Luhn), DE00 3704 0044 0532 0130 00 (bad check digits), "
            "at 12:30:45 on version 1.2.3, in room 42.")
    assert find_pii(text) == {}
    assert checks.parse_check("no_pii")(run_of(text))[0] is True


def test_named_kinds_and_own_patterns() -> None:
    check = checks.parse_check(r"no_pii email, employee=EMP-\d{4,6}")
    assert check.id == "no_pii_email_employee"
    held, why = check(run_of(f"EMP-12345 wrote; card {CARD}"))
    assert held is False and "employee x1 at character 0" in why and "card" not in why
    with pytest.raises(ConfigError, match="no_pii knows"):
        checks.parse_check("no_pii passport")
    with pytest.raises(ConfigError, match="not a regular expression"):
        checks.parse_check("no_pii bad=(")


def test_an_own_pattern_gives_up_within_the_budget() -> None:
    result = ChecksScorer([r"no_pii slow=(a|aa)+$"]).run(run_of("a" * 5_000 + "b"))
    assert result.error is not None and result.error.type == "invalid_input"
    assert "gave up" in result.reason


# -- the value appears nowhere the pipeline writes ------------------------------------------------
WRITTEN: list[str] = []


class TapeSettings(StrictModel):
    on: bool = option(False, "write every result, whole, to the tape",
                      env="OTEL_SCORERS_TAPE_ON")


class TapeSink:
    """A backend that keeps everything it is given, as JSON text."""

    name = "tape"
    max_batch = 10

    def __init__(self, policy: ContentPolicy) -> None:
        self.policy = policy

    async def write(self, batch: Sequence[Evaluated]) -> None:
        WRITTEN.extend(item.result.model_dump_json() + repr(item) for item in batch)


TAPE = Backend(name="tape", title="Tape", settings=TapeSettings,
               enabled=lambda block: bool(block.on),
               writer=lambda block, policy: TapeSink(policy), describe=lambda block: "tape")


@pytest.fixture
def tape() -> Iterator[None]:
    registry.register(TAPE)
    WRITTEN.clear()
    yield
    registry.unregister("tape")


def test_a_found_value_is_in_no_span_event_metric_log_or_backend_write(
        tape: None, telemetry: Telemetry, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SCORERS_TAPE_ON", "true")
    answer = f"Write to {EMAIL} or pay {CARD} to {IBAN} from {IP}."
    # the application's own span carries the answer; everything the scorer emits must not
    processor = ScoringSpanProcessor(
        [ChecksScorer(["no_pii", "max_length 10 words"])],
        tracer_provider=telemetry.tracer_provider, meter_provider=telemetry.meter_provider,
        logger_provider=telemetry.logger_provider)
    assert not processor.disabled_because, processor.disabled_because
    telemetry.tracer_provider.add_span_processor(processor)
    telemetry.tracer_provider.add_span_processor(SimpleSpanProcessor(telemetry.spans_out))
    try:
        with caplog.at_level(logging.DEBUG, logger="otel_scorers"):
            end_agent_span(telemetry, prompt="How do I pay?", answer=answer)
            assert processor.force_flush(20_000)
        assert processor.stats()["checks"]["scored"] == 1
        (span,) = telemetry.evaluation_spans("checks")
        assert span.attributes["gen_ai.evaluation.score.label"] == "fail"
        emitted = [json.dumps(dict(span.attributes or {}), default=str),
                   *(json.dumps(dict(e.attributes or {}), default=str) for e in span.events),
                   *(str(r.log_record.body) + json.dumps(dict(r.log_record.attributes or {}),
                                                         default=str)
                     for r in telemetry.logs()),
                   json.dumps(telemetry.metrics(), default=str),
                   *(r.getMessage() for r in caplog.records), *WRITTEN]
        assert WRITTEN, "the backend wrote nothing"
        assert any("email x1 at character" in text for text in emitted)
        for value in (EMAIL, CARD, IBAN, IP, "jane.doe", "0532 0130"):
            leaks = [text[:200] for text in emitted if value in text]
            assert not leaks, (value, leaks)
    finally:
        processor.shutdown()


def unfiltered(text: str) -> dict[str, list[int]]:
    """What every pattern finds in ``text``, run with no cheap test first."""
    found: dict[str, list[int]] = {}
    claimed: list[tuple[int, int]] = []
    for kind in personal.KINDS:
        for pattern, valid in personal._DETECTORS[kind]:
            for m in pattern.finditer(text):
                if (valid is None or valid(m.group(0))) and not any(
                        m.start() < r and left < m.end() for left, r in claimed):
                    claimed.append((m.start(), m.end()))
                    found.setdefault(kind, []).append(m.start())
    return found


EDGES = (["4111-1111-1111-1111", "(415) 555-0132", "415.555.0132", "+1 (415) 555 0132",
          "GB82 WEST 1234 5698 7654 32", "10.0.0.1", "fe80::1", "a:b:c:d:e:f:1:2", "x@y.io",
          "12:30", "1.2.3", "SKU-0001", " ", "-", ".", "(", ")", ":", "+", "@"],
         "0123456789abcdefABCXYZ .-()+:@")
#: ``\d`` is any Unicode digit: full-width and Arabic-Indic ones, beside other letters and spaces
OTHER_DIGITS = (["4111 1111 1111 1111", "\uff14\uff11\uff11\uff11" * 4, "(415) 555-0132",
                 "\u0664\u0661\u0665\u0665\u0665\u0665\u0660\u0661\u0663\u0662", "+\u0661 415",
                 "DE89 3704 0044 0532 0130 00", "10.0.0.1", "fe80::1", "x@y.io", "é", "\u3000"],
                "0123456789abcdefABC .-()+:@é\u0663\uff10")


@pytest.mark.parametrize("pieces, alphabet", [EDGES, OTHER_DIGITS], ids=["edges", "other_digits"])
def test_the_cheap_tests_first_never_miss_what_the_patterns_find(pieces: list[str],
                                                                 alphabet: str) -> None:
    """Each pattern runs only where a cheap test finds a candidate: on texts built to sit at
    the edges (separators, parentheses, hex, capitals; digits that are not ASCII), what is
    found equals what the patterns find run on every text."""
    rng = random.Random(55)
    for _ in range(3_000):
        parts = [rng.choice(pieces) if rng.random() < 0.4 else
                 "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12)))
                 for _ in range(rng.randint(1, 6))]
        text = rng.choice(["", " ", "-"]).join(parts)
        assert find_pii(text) == unfiltered(text), text


def test_personal_data_in_other_digits_is_found() -> None:
    """``\\d`` is any Unicode digit: a card in full-width digits passes the Luhn check and a
    phone in Arabic-Indic digits fits the pattern, so the cheap tests must not skip them."""
    card = " ".join(["\uff14\uff11\uff11\uff11"] + ["\uff11" * 4] * 3)  # 4111 1111 1111 1111
    phone = "(\u0664\u0661\u0665) \u0665\u0665\u0665-\u0660\u0661\u0663\u0662"
    found = find_pii(f"card {card}, phone {phone} \ud800")
    assert set(found) == {"card", "phone"}
