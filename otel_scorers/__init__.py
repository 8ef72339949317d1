"""otel-scorers: judge AI-agent runs live inside the OpenTelemetry pipeline.

Importing this package is cheap: litellm (seconds to import) is loaded on the first judge call.
"""

from otel_scorers.errors import (
    ConfigError,
    JudgeConnectionError,
    JudgeError,
    JudgeOutputError,
    JudgeRateLimitError,
    JudgeRequestError,
    JudgeResponseError,
    JudgeServerError,
    JudgeTimeoutError,
    JudgeTruncatedError,
    OtelScorersError,
    ScorerInputError,
)
from otel_scorers.judge import JudgeClient, JudgeUsage, RegexRedactor, RetryPolicy
from otel_scorers.scorers import (
    AlignmentAnalysis,
    BaseScorer,
    CorrectionResult,
    Criterion,
    Message,
    PromptAlignmentScorer,
    RubricAnalysis,
    RubricScorer,
    Scorer,
    ScoreResult,
    ScorerRun,
    aself_correct,
    create_prompt_alignment_scorer_llm,
    create_rubric_scorer,
    is_task_complete,
    parse_rubric,
    self_correct,
)

__version__ = "0.1.0"

__all__ = [
    "AlignmentAnalysis",
    "BaseScorer",
    "ConfigError",
    "CorrectionResult",
    "Criterion",
    "JudgeClient",
    "JudgeConnectionError",
    "JudgeError",
    "JudgeOutputError",
    "JudgeRateLimitError",
    "JudgeRequestError",
    "JudgeResponseError",
    "JudgeServerError",
    "JudgeTimeoutError",
    "JudgeTruncatedError",
    "JudgeUsage",
    "Message",
    "OtelScorersError",
    "PromptAlignmentScorer",
    "RegexRedactor",
    "RetryPolicy",
    "RubricAnalysis",
    "RubricScorer",
    "ScoreResult",
    "Scorer",
    "ScorerInputError",
    "ScorerRun",
    "__version__",
    "aself_correct",
    "create_prompt_alignment_scorer_llm",
    "create_rubric_scorer",
    "is_task_complete",
    "parse_rubric",
    "self_correct",
]
