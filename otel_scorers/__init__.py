"""otel-scorers: judge AI-agent runs live inside the OpenTelemetry pipeline.

The public face: the scorers, the judge client, the errors and :class:`ScoringSpanProcessor`.
Importing this package is cheap: litellm (seconds to import) is loaded on the first judge call,
and the span processor (with the OTel SDK pipeline behind it) on first access.
"""

from typing import TYPE_CHECKING, Any

from otel_scorers._version import __version__
from otel_scorers.errors import (
    ConfigError,
    EnvConfigError,
    JudgeAuthError,
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
    ChecksScorer,
    CorrectionResult,
    Criterion,
    FaithfulnessScorer,
    Message,
    MultiTurnScorer,
    PromptAlignmentScorer,
    RubricAnalysis,
    RubricScorer,
    Scorer,
    ScoreResult,
    ScorerRun,
    Step,
    ToolUseScorer,
    TrajectoryScorer,
    Turn,
    aself_correct,
    checks,
    create_prompt_alignment_scorer_llm,
    create_rubric_scorer,
    is_task_complete,
    parse_rubric,
    self_correct,
    session_run,
)

if TYPE_CHECKING:
    from otel_scorers.pipeline.install import install
    from otel_scorers.pipeline.processor import ScoringSpanProcessor

__all__ = [
    "AlignmentAnalysis",
    "BaseScorer",
    "ChecksScorer",
    "ConfigError",
    "CorrectionResult",
    "Criterion",
    "EnvConfigError",
    "FaithfulnessScorer",
    "JudgeAuthError",
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
    "MultiTurnScorer",
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
    "ScoringSpanProcessor",
    "Step",
    "ToolUseScorer",
    "TrajectoryScorer",
    "Turn",
    "__version__",
    "aself_correct",
    "checks",
    "create_prompt_alignment_scorer_llm",
    "create_rubric_scorer",
    "install",
    "is_task_complete",
    "parse_rubric",
    "self_correct",
    "session_run",
]


def __getattr__(name: str) -> Any:
    """``ScoringSpanProcessor`` and ``install`` are imported on first access (they pull in
    the SDK pipeline)."""
    if name == "ScoringSpanProcessor":
        from otel_scorers.pipeline.processor import ScoringSpanProcessor

        return ScoringSpanProcessor
    if name == "install":
        from otel_scorers.pipeline.install import install

        return install
    raise AttributeError(f"module 'otel_scorers' has no attribute {name!r}")
