from __future__ import annotations

import subprocess
import sys

import otel_scorers

EXPECTED = [
    "AlignmentAnalysis", "BaseScorer", "ChecksScorer", "ConfigError", "CorrectionResult",
    "Criterion", "EnvConfigError", "FaithfulnessScorer", "JudgeAuthError", "JudgeClient",
    "JudgeConnectionError", "JudgeError",
    "JudgeOutputError",
    "JudgeRateLimitError", "JudgeRequestError", "JudgeResponseError", "JudgeServerError",
    "JudgeTimeoutError", "JudgeTruncatedError", "JudgeUsage", "Message", "MultiTurnScorer",
    "OtelScorersError",
    "PromptAlignmentScorer", "RegexRedactor", "RetryPolicy", "RubricAnalysis", "RubricScorer",
    "ScoreResult", "Scorer", "ScorerInputError", "ScorerRun", "ScoringSpanProcessor", "Step",
    "ToolUseScorer", "TrajectoryScorer", "Turn", "__version__", "aself_correct", "checks",
    "create_prompt_alignment_scorer_llm", "create_rubric_scorer", "install", "is_task_complete",
    "parse_rubric", "self_correct", "session_run",
]


def test_public_api_is_pinned() -> None:
    assert otel_scorers.__all__ == EXPECTED
    assert otel_scorers.__all__ == sorted(otel_scorers.__all__, key=str)
    for name in otel_scorers.__all__:
        assert hasattr(otel_scorers, name), name


def test_import_does_not_load_litellm_or_the_pipeline() -> None:
    # What is loaded, not how long it takes: a timing bound would fail on a busy machine (the
    # import time is a benchmark figure, bench/run.py).
    code = ("import sys; import otel_scorers; "
            "from otel_scorers import RubricScorer, PromptAlignmentScorer; "
            "RubricScorer('openai/x', '- a'); PromptAlignmentScorer('openai/x'); "
            "print('litellm' in sys.modules, 'otel_scorers.pipeline.processor' in sys.modules); "
            "otel_scorers.ScoringSpanProcessor; "
            "print('otel_scorers.pipeline.processor' in sys.modules, 'litellm' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "False", "True", "False"]


def test_error_types_are_stable() -> None:
    from otel_scorers import errors
    assert {cls.error_type for cls in errors.ERROR_TYPES.values()} == {
        "internal_error", "config_error", "invalid_input", "judge_error", "timeout",
        "connection_error", "rate_limited", "server_error", "auth", "request_rejected",
        "invalid_response", "invalid_output", "truncated_output"}
