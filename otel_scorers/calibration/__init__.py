"""How far to trust a judge: labelled cases judged, and agreement measured.

- :mod:`.golden`: the bundled golden set (package data, schema version 1).
- :mod:`.metrics`: per-case outcomes; verdict agreement, Cohen's kappa, alignment error, bands.
- :mod:`.runner`: the cases judged concurrently; before/after few-shot examples.
- :mod:`.paired`: the cases judged with a companion scorer, apart and in fused calls.

``otel-scorers calibrate`` is the command line over these.
"""

from otel_scorers.calibration.golden import GOLDEN_VERSION, agent_cases, bundled_cases
from otel_scorers.calibration.metrics import Outcome, cohen_kappa, summarize
from otel_scorers.calibration.paired import compare_fused
from otel_scorers.calibration.runner import calibrate, compare, judge_cases

__all__ = ["GOLDEN_VERSION", "Outcome", "agent_cases", "bundled_cases", "calibrate", "cohen_kappa",
           "compare",
           "compare_fused", "judge_cases", "summarize"]
