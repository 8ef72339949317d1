"""The scorers: rubric, prompt alignment, the shared result types and the correction loop."""

from otel_scorers.scorers.alignment import (
    AlignmentAnalysis,
    PromptAlignmentScorer,
    create_prompt_alignment_scorer_llm,
)
from otel_scorers.scorers.base import BaseScorer, LLMScorer, Scorer
from otel_scorers.scorers.result import ScoreError, ScoreResult
from otel_scorers.scorers.rubric import (
    Criterion,
    CriterionVerdict,
    RubricAnalysis,
    RubricScorer,
    create_rubric_scorer,
    parse_rubric,
)
from otel_scorers.scorers.run import Message, ScorerRun
from otel_scorers.scorers.self_correction import (
    CorrectionResult,
    CorrectionStep,
    aself_correct,
    is_task_complete,
    self_correct,
)

__all__ = [
    "AlignmentAnalysis",
    "BaseScorer",
    "CorrectionResult",
    "CorrectionStep",
    "Criterion",
    "CriterionVerdict",
    "LLMScorer",
    "Message",
    "PromptAlignmentScorer",
    "RubricAnalysis",
    "RubricScorer",
    "ScoreError",
    "ScoreResult",
    "Scorer",
    "ScorerRun",
    "aself_correct",
    "create_prompt_alignment_scorer_llm",
    "create_rubric_scorer",
    "is_task_complete",
    "parse_rubric",
    "self_correct",
]
