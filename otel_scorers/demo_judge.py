"""What the demo may say about its judge's answers, and the one step to real verdicts.

The embedded judge (``local/smollm2``) is measured on the shipped rubric golden set by
``calibrate`` (:data:`EMBEDDED`, with the command that reproduces it). Its informedness
(TPR + TNR - 1) is not above :data:`MIN_INFORMEDNESS` (0.2, the rule the corrected pass rate
uses: docs/calibration.md), so the demo shows none of its answers as a pass, a fail or a label:
it cannot tell them apart. Any other judge (a key, a local OpenAI-compatible server) is the
user's own: its answers are shown as its verdicts, with the command that measures it.
"""

from __future__ import annotations

import json
import urllib.request
from dataclasses import dataclass

__all__ = ["EMBEDDED", "LOCAL_SERVERS", "MIN_INFORMEDNESS", "Standing", "closing_lines",
           "local_servers", "standing"]

#: Informedness at or below this tells nothing (the corrected pass rate's rule).
MIN_INFORMEDNESS = 0.2
#: Usual loopback addresses of local OpenAI-compatible servers.
LOCAL_SERVERS = (("Ollama", "http://127.0.0.1:11434/v1"),
                 ("llama.cpp server", "http://127.0.0.1:8080/v1"),
                 ("vLLM", "http://127.0.0.1:8000/v1"))


@dataclass(frozen=True)
class Standing:
    """A judge's measured agreement on the rubric golden set (``None``: not measured here)."""

    informedness: float | None
    low: float | None = None
    high: float | None = None
    cases: int = 0
    command: str = ""

    @property
    def tells_apart(self) -> bool:
        """Whether its verdicts may be shown as verdicts (unmeasured: the user's judge)."""
        return self.informedness is None or self.informedness > MIN_INFORMEDNESS


#: ``otel-scorers calibrate --model local/smollm2 --scorer rubric --concurrency 1 --timeout 240``
#: on 2 shared cores (2026-12-08, 5 min 1 s; the prompts are deterministic since that day, the
#: fence nonce derived from the texts, and the model answers a prompt the same): 37 cases, no
#: error; TPR 0.059 (1 of 17, Wilson 95% 0.011 to 0.270), TNR 0.90 (18 of 20, 0.699 to 0.972):
#: it fails almost every run. Informedness -0.041; its interval here is the Wilson bounds
#: combined (TPR low + TNR low - 1 to TPR high + TNR high - 1). (2026-12-07, random nonces: TPR
#: 0.059, TNR 1.0, informedness 0.059.)
EMBEDDED = Standing(informedness=-0.041, low=-0.290, high=0.242, cases=37,
                    command="otel-scorers calibrate --model local/smollm2 --scorer rubric")


def standing(model: str) -> Standing:
    from otel_scorers.judge.client import DEFAULT_LOCAL_MODEL

    return EMBEDDED if model == DEFAULT_LOCAL_MODEL else Standing(
        informedness=None, command=f"otel-scorers calibrate --model {model}")


def local_servers(timeout_s: float = 0.3) -> list[tuple[str, str, str]]:
    """The local OpenAI-compatible servers answering on their usual loopback port: (name, API
    base, first model listed). Asked only here, at the demo's end, with a short timeout."""
    found = []
    for name, base in LOCAL_SERVERS:
        try:
            with urllib.request.urlopen(f"{base}/models", timeout=timeout_s) as answer:
                data = json.loads(answer.read(65_536)).get("data") or []
        except (OSError, ValueError, AttributeError):
            continue
        models = [str(m["id"]) for m in data
                  if isinstance(m, dict) and isinstance(m.get("id"), str)]
        if models:
            found.append((name, base, models[0][:100]))
    return found


def closing_lines(model: str, telemetry_file: str | None) -> list[str]:
    """The demo's last lines: the one step to real verdicts, and from a result to its cause."""
    lines = []
    if standing(model).tells_apart:
        lines.append(f"Verdicts above are {model}'s; how far to trust them: "
                     f"{standing(model).command}")
    else:
        lines.append("Real verdicts, one step: export OTEL_SCORERS_JUDGE_MODEL=openai/gpt-5-mini "
                     "(and OPENAI_API_KEY) and run the demo again, or use a local "
                     "OpenAI-compatible server (Ollama, llama.cpp's server, vLLM): "
                     "make demo JUDGE=openai/<model> JUDGE_API_BASE=http://127.0.0.1:<port>/v1")
        for name, base, first in local_servers():
            lines.append(f"  found {name} at {base}: make demo JUDGE=openai/{first} "
                         f"JUDGE_API_BASE={base}")
    if telemetry_file:
        lines.append(f"From a failure to its cause: otel-scorers report {telemetry_file}")
    return lines
