"""How each scorer is doing, and the one line that says so when it is not.

A monitoring tool that fails silently is the worst kind: the first judge failure of each kind
(auth, connection, rejected request, rate limit, server error, timeout, unreadable answers) is
logged once per judge, not once per scorer (scorers sharing a judge share its causes), with what
to change and what was tried (the model, the endpoint without credentials), and then only
counted; the first success after such a failure is logged once too. :meth:`Health.view` is
the per-scorer picture (Mastra's scorer health is the anchor): decisions by reason, judge
calls, tokens and spend, failures by kind, the last error with its time.
"""

from __future__ import annotations

import functools
import logging
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from otel_scorers.http import shown_url
from otel_scorers.policy import ContentPolicy
from otel_scorers.scorers.result import ScoreResult

__all__ = ["Health", "LogOnce", "fix_for", "judge_endpoint", "judges_of", "mode_of", "report"]

#: What stands for an error's text the content policy keeps in
WITHHELD = "(the error text is withheld by the content policy: reasons, exported_content)"

logger = logging.getLogger("otel_scorers.health")

#: Error kinds that stop every evaluation until someone acts: logged as errors.
_BLOCKING = frozenset({"auth", "connection_error", "request_rejected"})
_WINDOW = 20


def fix_for(error_type: str, message: str, mode: str | None = None) -> str:
    """What to change for a judge failure of ``error_type`` (its message may already say);
    ``mode``: the structured-output mode in use (the fix names another one)."""
    if error_type == "auth":
        return "the line above names the variable to set"
    if error_type == "connection_error":
        return ("check that the judge is up and reachable from this process "
                "(OTEL_SCORERS_JUDGE_API_BASE; proxies: HTTPS_PROXY / NO_PROXY)")
    if error_type == "request_rejected":
        if "otel-scorers[local]" in message:
            return "install the embedded judge, or set OTEL_SCORERS_JUDGE_MODEL"
        return ("check the model name and the request options (OTEL_SCORERS_JUDGE_MODEL, "
                "judge.structured_output); otel-scorers check-config --ping tries one call")
    if error_type == "rate_limited":
        return ("the judge's rate limit: lower OTEL_SCORERS_CONCURRENCY or "
                "OTEL_SCORERS_SAMPLE_RATIO, or cap evaluations with OTEL_SCORERS_RATE_LIMIT")
    if error_type == "server_error":
        return "the judge server failed: its own logs say why; calls are retried with backoff"
    if error_type == "timeout":
        return ("raise OTEL_SCORERS_JUDGE_TIMEOUT (per call) or "
                "OTEL_SCORERS_EVALUATION_TIMEOUT, or lower OTEL_SCORERS_CONCURRENCY")
    if error_type == "truncated":
        return "raise OTEL_SCORERS_JUDGE_MAX_TOKENS, or shorten the rubric"
    if error_type == "invalid_input":  # the run, not the judge: a code check's too
        return ("the run lacks what the scorer needs or passes a check's bound, as said: "
                "docs/agent-scorers.md says what each check reads")
    other = {"json_object": "json_schema (or prompt)", "prompt": "json_object",
             "json_object_schema": "json_object"}.get(mode or "", "json_object")
    used = f" (in use: {mode})" if mode else ""
    return (f"the judge's answers do not fit the schema{used}: try "
            f"OTEL_SCORERS_JUDGE_STRUCTURED_OUTPUT={other} or a stronger judge model "
            "(otel-scorers calibrate measures it)")


def judges_of(scorers: Sequence[Any]) -> list[Any]:
    """The distinct judges of ``scorers`` (by model, endpoint and mode), in order."""
    seen: dict[tuple[str, str | None], Any] = {}
    for scorer in scorers:
        judge = getattr(scorer, "judge", None)
        if judge is not None:
            seen.setdefault((judge_endpoint(judge), mode_of(judge)), judge)
    return list(seen.values())


def mode_of(judge: Any) -> str | None:
    """The structured-output mode ``judge`` uses, when known."""
    mode = getattr(judge, "mode_in_use", None) or getattr(judge, "structured_output", None)
    return None if mode in (None, "auto") else str(mode)


def judge_endpoint(judge: Any) -> str:
    """The judge as it may be printed: its model and its endpoint without credentials."""
    base = getattr(judge, "api_base", None)
    return _endpoint(str(getattr(judge, "model", "?")), str(base) if base else None)


@functools.lru_cache(maxsize=256)
def _endpoint(model: str, base: str | None) -> str:  # (read once per result)
    return f"{model} at {shown_url(base)}" if base else model


@dataclass
class _Scorer:
    calls: int = 0
    retries: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    failures: Counter[str] = field(default_factory=Counter)
    last_error: dict[str, Any] | None = None
    recent: deque[str | None] = field(default_factory=lambda: deque(maxlen=_WINDOW))


class Health:
    """Judge health per scorer (see the module docstring). Thread-safe enough: updated on the
    library's event loop only."""

    def __init__(self, *, clock: Callable[[], float] = time.time,
                 policy: ContentPolicy | None = None) -> None:
        self._clock = clock
        #: what of an error's text may be shown (an error may quote the request: it is run
        #: content, shown only as the content policy lets run text out)
        self.policy = policy or ContentPolicy()
        self._scorers: dict[str, _Scorer] = {}
        #: per judge (its model and endpoint): failure kinds said and not yet recovered from,
        #: and every kind said in this process
        self._open: dict[str, set[str]] = {}
        self._said: set[tuple[str, str]] = set()

    def reset_after_fork(self) -> None:
        self._scorers = {}
        self._open = {}
        self._said = set()

    def timed_out(self) -> list[str]:
        """The judges whose calls are timing out now (said and not recovered from)."""
        return sorted(judge for judge, kinds in self._open.items() if "timeout" in kinds)

    def record(self, scorer: str, result: ScoreResult, judge: Any) -> None:
        """One finished evaluation of ``scorer`` (a cached one is no judge call)."""
        state = self._scorers.setdefault(scorer, _Scorer())
        usage = result.judge
        if usage is not None and not result.cached:
            state.calls += usage.calls
            state.retries += usage.retries
            state.tokens += usage.total_tokens
            state.cost_usd += usage.cost_usd or 0.0
        error = result.error
        if result.cached:
            return
        state.recent.append(error.type if error is not None else None)
        if error is None:
            endpoint = judge_endpoint(judge)
            said = self._open.get(endpoint)
            if said and result.skipped is None:
                logger.warning("otel-scorers: scorer %s judges again (%s answered after %s)",
                               scorer, endpoint, ", ".join(sorted(said)))
                said.clear()
            return
        state.failures[error.type] += 1
        message = self.policy.run_text(error.message) or WITHHELD
        state.last_error = {"type": error.type, "message": message, "at": self._clock()}
        self._say(scorer, state, error.type, message, judge)

    def _say(self, scorer: str, state: _Scorer, kind: str, message: str, judge: Any) -> None:
        """One line per cause: the first failure of each kind of a judge (whichever scorer
        met it first; the others that use the judge share the line)."""
        endpoint = judge_endpoint(judge)
        said = self._open.setdefault(endpoint, set())
        if kind in said:
            return
        said.add(kind)
        key = (endpoint, kind)
        first = key not in self._said
        self._said.add(key)
        if not first and kind not in _BLOCKING:
            return  # said once already in this process; a relapse is only counted
        level = logging.ERROR if kind in _BLOCKING else logging.WARNING
        logger.log(level, "otel-scorers: scorer %s cannot judge (%s) with %s: %s. To fix: %s. "
                   "Further failures of this kind, of every scorer using this judge, are "
                   "counted (decision error, error_type %s), not logged.", scorer, kind,
                   endpoint, message[:500],
                   fix_for(kind, message, mode_of(judge)), kind)

    def view(self, decisions: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
        """Per scorer: its decisions (with reasons), judge calls, tokens, spend, failures by
        kind and the last error (``at``: Unix seconds)."""
        out: dict[str, Any] = {}
        for name, counted in decisions.items():
            state = self._scorers.get(name, _Scorer())
            out[name] = {
                "decisions": dict(counted),
                "judge": {"calls": state.calls, "retries": state.retries,
                          "tokens": state.tokens, "cost_usd": round(state.cost_usd, 6)},
                "failures": dict(state.failures),
                "last_error": state.last_error,
            }
        return out


class LogOnce:
    """``log_once(key, message)``: a warning once per key and process (with the traceback
    for the keys of unexpected failures)."""

    def __init__(self, log: logging.Logger) -> None:
        self._log, self._said = log, set[str]()

    def __call__(self, key: str, message: str) -> None:
        if key not in self._said:
            self._said.add(key)
            self._log.warning(message, exc_info=key in ("on_end", "capture")
                              or key.startswith("score:"))


def report(health: Health, decisions: Mapping[str, Mapping[str, Any]], *, pending: int,
           sessions: Any = None, turn_records_dropped: int = 0, sinks: Any = None,
           disabled_because: Sequence[str] = (),
           canaries: Mapping[str, Any] | None = None, batch: Any = None) -> dict[str, Any]:
    """A processor's ``health()``: per scorer its decisions with their reasons
    (``filtered: {no_content: 3}``, ``error: {auth: 2}``), judge calls, retries, tokens and
    spend, failures by kind and the last error with its time; ``pending``: runs not decided
    yet (queued, in flight); ``sessions``: sessions held and not judged yet; the result
    backends' counts; the judge canaries' counts and live rates; and why scoring is off, when
    it is."""
    out: dict[str, Any] = {"scorers": health.view(decisions), "pending": pending}
    if sessions is not None:
        out["sessions"] = sessions.health()
    if turn_records_dropped:
        out["turn_records_dropped"] = turn_records_dropped
    if sinks is not None:
        out["sinks"] = sinks.totals()
    if canaries:
        out["canaries"] = dict(canaries)
    if batch is not None:  # the batch lane: spooled, submitted, emitted, retried, failed
        out["batch"] = batch.report()
    if disabled_because:
        out["disabled_because"] = list(disabled_because)
    return out
