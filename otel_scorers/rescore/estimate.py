"""``rescore --dry-run``: what judging would take (calls, tokens, cost), no judge called."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from otel_scorers.errors import ScorerInputError
from otel_scorers.judge.client import JudgeClient, load_litellm
from otel_scorers.judge.schema import answer_schema
from otel_scorers.pipeline.processor import ScoringSpanProcessor
from otel_scorers.rescore.runs import RunRef
from otel_scorers.scorers.base import LLMScorer, Question
from otel_scorers.scorers.result import ScoreResult

__all__ = ["DryRunEstimate", "estimate"]

logger = logging.getLogger(__name__)


@dataclass
class DryRunEstimate:
    """What a run would judge (runs by agent, the first 20 by id) and cost: judge calls and
    tokens (input counted with the judge model's tokenizer through litellm; output estimated
    from the answer schema), and USD where litellm knows the model's price."""

    runs: int = 0
    #: sessions the session scorers would judge (once each)
    sessions: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0
    models: set[str] = field(default_factory=set)
    by_agent: dict[str, int] = field(default_factory=dict)
    first_runs: list[dict[str, Any]] = field(default_factory=list)
    hint: str | None = None
    #: Per scorer, the agents whose runs it would skip without calling the judge (no rubric).
    no_rubric: dict[str, set[str]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"runs": self.runs, **({"sessions": self.sessions} if self.sessions else {}),
                "runs_by_agent": self.by_agent,
                "first_runs": self.first_runs, "not_judged": self.skipped,
                **({"hint": self.hint} if self.hint else {}),
                "judge_calls": self.calls,
                "estimated_input_tokens": self.input_tokens,
                "estimated_output_tokens": self.output_tokens,
                "estimated_cost_usd": (None if self.cost_usd is None
                                       else round(self.cost_usd, 6)),
                "models": sorted(self.models)}


def _schema_tokens(node: Any) -> int:
    """Answer tokens from a JSON schema: ~30 per free-text string, ~3 per other leaf, plus
    ~3 per key. A deliberate estimate (answers vary), printed as such."""
    if not isinstance(node, dict):
        return 0
    kind = node.get("type")
    if kind == "object" or "properties" in node:
        return sum(3 + _schema_tokens(child) for child in node.get("properties", {}).values())
    if kind == "array":
        return 2 * _schema_tokens(node.get("items", {}))
    if kind == "string" and "enum" not in node:
        return 30
    return 3


def estimate(processor: ScoringSpanProcessor, runs: Iterable[RunRef]) -> DryRunEstimate:
    """Judge calls, tokens and cost ``runs`` would take; no judge is called."""
    from otel_scorers.rescore.sessions import FileSessions

    litellm = load_litellm()
    result = DryRunEstimate()
    sessions = FileSessions(processor) if processor.on_demand.session_scorers else None
    by_name = {str(getattr(scorer, "name", "")): scorer for scorer in processor.scorers}
    turn_scorers = [scorer for name, scorer in by_name.items()
                    if name not in processor.on_demand.session_scorers]
    for ref in runs:
        result.runs += 1
        captured = processor.on_demand.capture(ref.span, descendants=ref.descendants,
                                               nested=ref.nested, agent=ref.agent,
                                               links=ref.links)
        agent = captured.agent or "(unnamed)"
        result.by_agent[agent] = result.by_agent.get(agent, 0) + 1
        if len(result.first_runs) < 20:
            result.first_runs.append({"trace_id": ref.trace_id, "span_id": ref.span_id,
                                      "span_name": ref.span.name, "agent": captured.agent})
        if captured.run is None:
            reason = captured.reason or "no_content"
            result.skipped[reason] = result.skipped.get(reason, 0) + 1
            continue
        if sessions is not None and ref.session is not None:
            sessions.add(ref, captured.run, captured.agent)
        for scorer in turn_scorers:
            client = getattr(scorer, "judge", None)
            if isinstance(client, JudgeClient):
                _add_call(result, litellm, scorer, client, captured.run, agent)
    for job in sessions.due(final=True) if sessions is not None else ():
        result.sessions += 1
        for slot in job.slots:
            client = getattr(slot.scorer, "judge", None)
            if isinstance(client, JudgeClient):
                _add_call(result, litellm, slot.scorer, client, job.run,
                          job.agent or "(unnamed)")
    _no_rubric_hint(result)
    return result


def _add_call(result: DryRunEstimate, litellm: Any, scorer: Any, client: JudgeClient,
              run: Any, agent: str) -> None:
    messages, schema, skipped = _render(scorer, client, run)
    if skipped is not None:  # counted per scorer: "rubric: no_rubric"
        key = f"{getattr(scorer, 'name', scorer)}: {skipped}"
        result.skipped[key] = result.skipped.get(key, 0) + 1
        if skipped == "no_rubric":
            result.no_rubric.setdefault(str(getattr(scorer, "name", scorer)), set()).add(agent)
    if messages is None:
        return
    result.calls += 1
    result.models.add(client.model)
    try:
        tokens_in = int(litellm.token_counter(model=client.model, messages=messages))
    except Exception:
        tokens_in = sum(len(m["content"]) for m in messages) // 4
    tokens_out = _schema_tokens(schema)
    result.input_tokens += tokens_in
    result.output_tokens += tokens_out
    if result.cost_usd is not None:
        try:
            cost_in, cost_out = litellm.cost_per_token(
                model=client.model, prompt_tokens=tokens_in, completion_tokens=tokens_out)
            result.cost_usd += float(cost_in) + float(cost_out)
        except Exception:
            result.cost_usd = None  # a model litellm has no price for


def _render(scorer: Any, client: JudgeClient, run: Any
            ) -> tuple[list[dict[str, str]] | None, dict[str, Any], str | None]:
    """The messages ``scorer`` would send for ``run``, its answer schema, and why it would
    not call the judge (``no_rubric``, ``invalid_input``; messages None then). A scorer that
    does not say what it would ask gives (None, {}, None): not counted, nothing known."""
    if not isinstance(scorer, LLMScorer):
        return None, {}, None
    try:
        asked = scorer.question_for(run)
    except ScorerInputError as exc:
        logger.debug("dry run: %s would not call the judge: %s", scorer, exc)
        return None, {}, ScorerInputError.error_type
    if isinstance(asked, ScoreResult):
        return None, {}, (asked.skipped or (asked.error.type if asked.error else None)
                          or "answered_without_judge")
    if not isinstance(asked, Question):
        return None, {}, None
    messages = client.render(asked.request, client.structured_mode())
    return messages, answer_schema(asked.request.answer_model), None


def _no_rubric_hint(result: DryRunEstimate) -> None:
    """Say, before any money is spent, that a rubric scorer would skip runs (no criteria)."""
    if not result.no_rubric:
        return
    parts = [f"rubric scorer {name!r} has no rubric for agent(s) "
             + ", ".join(sorted(agents)[:5]) + (" ..." if len(agents) > 5 else "")
             for name, agents in sorted(result.no_rubric.items())]
    result.hint = "; ".join(filter(None, [result.hint, *parts])) + (
        ": those runs would be skipped (score by default, no judge call). To fix: give it "
        "criteria, rubrics: {<agent>: '- ...'} in the config file, or OTEL_SCORERS_RUBRIC "
        "for every agent")


def add_hint(result: DryRunEstimate, unselected: int) -> None:
    """Say why an LLM-level trace has nothing to judge (spans with content, no run)."""
    if not unselected:
        return
    result.skipped["content_spans_not_selected"] = unselected
    if not result.runs:
        result.hint = (
            f"{unselected} spans carry GenAI content but none is an agent run selected for "
            "scoring: to score each LLM call, set include_llm_spans: true (selection) or "
            "OTEL_SCORERS_INCLUDE_LLM_SPANS=true")
