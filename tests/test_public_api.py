from __future__ import annotations

import subprocess
import sys

import otel_scorers

EXPECTED = [
    "AlignmentAnalysis", "BaseScorer", "ConfigError", "CorrectionResult", "Criterion",
    "JudgeClient", "JudgeConnectionError", "JudgeError", "JudgeOutputError",
    "JudgeRateLimitError", "JudgeRequestError", "JudgeResponseError", "JudgeServerError",
    "JudgeTimeoutError", "JudgeTruncatedError", "JudgeUsage", "Message", "OtelScorersError",
    "PromptAlignmentScorer", "RegexRedactor", "RetryPolicy", "RubricAnalysis", "RubricScorer",
    "ScoreResult", "Scorer", "ScorerInputError", "ScorerRun", "__version__", "aself_correct",
    "create_prompt_alignment_scorer_llm", "create_rubric_scorer", "is_task_complete",
    "parse_rubric", "self_correct",
]


def test_public_api_is_pinned() -> None:
    assert otel_scorers.__all__ == EXPECTED
    assert otel_scorers.__all__ == sorted(otel_scorers.__all__, key=str)
    for name in otel_scorers.__all__:
        assert hasattr(otel_scorers, name), name


def test_import_is_cheap_and_does_not_load_litellm() -> None:
    code = ("import sys, time; t = time.perf_counter(); import otel_scorers; "
            "from otel_scorers import RubricScorer, PromptAlignmentScorer; "
            "RubricScorer('openai/x', '- a'); PromptAlignmentScorer('openai/x'); "
            "print(time.perf_counter() - t, 'litellm' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out[1] == "False"
    assert float(out[0]) < 2.0


def test_error_types_are_stable() -> None:
    from otel_scorers import errors
    assert {cls.error_type for cls in errors.ERROR_TYPES.values()} == {
        "internal_error", "config_error", "invalid_input", "judge_error", "timeout",
        "connection_error", "rate_limited", "server_error", "request_rejected",
        "invalid_response", "invalid_output", "truncated_output"}
