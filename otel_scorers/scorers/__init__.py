"""The scorers: rubric and prompt alignment (judged), trajectory and quick checks (code), tool
use and faithfulness (judged, over what the agent did), the multi-turn judge of whole
conversations, the shared result types and the
correction loop."""

from otel_scorers.scorers import checks
from otel_scorers.scorers.alignment import (
    AlignmentAnalysis,
    PromptAlignmentScorer,
    create_prompt_alignment_scorer_llm,
)
from otel_scorers.scorers.base import BaseScorer, LLMScorer, Scorer
from otel_scorers.scorers.checks import Check
from otel_scorers.scorers.checks_scorer import ChecksScorer
from otel_scorers.scorers.faithfulness import FaithfulnessScorer
from otel_scorers.scorers.multi_turn import MultiTurnScorer
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
from otel_scorers.scorers.session import session_run
from otel_scorers.scorers.steps import Step, ToolCall, ToolDefinition
from otel_scorers.scorers.tool_use import ToolUseScorer
from otel_scorers.scorers.trajectory import ExpectedStep, TrajectoryScorer
from otel_scorers.scorers.turns import Turn

__all__ = [
    "AlignmentAnalysis",
    "BaseScorer",
    "Check",
    "ChecksScorer",
    "CorrectionResult",
    "CorrectionStep",
    "Criterion",
    "CriterionVerdict",
    "ExpectedStep",
    "FaithfulnessScorer",
    "LLMScorer",
    "Message",
    "MultiTurnScorer",
    "PromptAlignmentScorer",
    "RubricAnalysis",
    "RubricScorer",
    "ScoreError",
    "ScoreResult",
    "Scorer",
    "ScorerRun",
    "Step",
    "ToolCall",
    "ToolDefinition",
    "ToolUseScorer",
    "TrajectoryScorer",
    "Turn",
    "aself_correct",
    "checks",
    "create_prompt_alignment_scorer_llm",
    "create_rubric_scorer",
    "is_task_complete",
    "parse_rubric",
    "self_correct",
    "session_run",
]
