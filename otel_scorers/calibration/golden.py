"""The bundled golden set: labelled cases for both scorers across several domains.

``golden-v1.jsonl`` (package data) follows schema version 1 of
:mod:`otel_scorers.scorers.cases`. Its rubric cases expect per-criterion verdicts (required and
optional); its prompt-alignment cases expect dimension bands and an overall score and band, in
user, system and both modes. They come from the seed documents' examples and cases written for
this project (support, coding, research, data extraction, multilingual), with hard ones: verbose
but wrong, short but right, format-only misses, partial compliance, and answers that try to
instruct the judge. A new version of the set gets a new file name, so reports stay comparable.
"""

from __future__ import annotations

from importlib import resources

from otel_scorers.scorers.cases import LabelledCase, parse_cases

__all__ = ["AGENT_GOLDEN_FILE", "GOLDEN_FILE", "GOLDEN_VERSION", "agent_cases", "bundled_cases"]

GOLDEN_VERSION = "v1"
GOLDEN_FILE = f"golden-{GOLDEN_VERSION}.jsonl"
#: The golden set of the agent scorers (tool use, faithfulness: ``calibrate --cases agents``):
#: a set of its own, so that reports on the rubric and alignment set stay comparable.
AGENT_GOLDEN_FILE = "golden-agents-v1.jsonl"


def bundled_cases() -> list[LabelledCase]:
    """The rubric and prompt-alignment golden set."""
    return _read(GOLDEN_FILE)


def agent_cases() -> list[LabelledCase]:
    """The tool-use and faithfulness golden set (Mastra's documented faithfulness examples
    among them, ``source: mastra:...``)."""
    return _read(AGENT_GOLDEN_FILE)


def _read(name: str) -> list[LabelledCase]:
    text = resources.files("otel_scorers.calibration").joinpath(name).read_text("utf-8")
    return list(parse_cases(text.splitlines(), origin=f"bundled {name}"))
