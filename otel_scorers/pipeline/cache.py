"""A small thread-safe TTL + LRU cache of judgements, keyed by the scorer's judge input."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any

from otel_scorers.scorers.result import ScoreResult

__all__ = ["ResultCache"]


class ResultCache:
    """Identical judge inputs within ``ttl_s`` get the stored result (``ttl_s <= 0``: off)."""

    def __init__(self, ttl_s: float, max_entries: int = 10_000, *, clock: Any = time.monotonic
                 ) -> None:
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._clock = clock
        self._entries: OrderedDict[str, tuple[float, ScoreResult]] = OrderedDict()
        self._lock = threading.Lock()

    def reset_after_fork(self) -> None:
        """In a forked child: a fresh lock; the parent's judgements are dropped."""
        self._lock = threading.Lock()
        self._entries = OrderedDict()

    @property
    def enabled(self) -> bool:
        return self.ttl_s > 0 and self.max_entries > 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> ScoreResult | None:
        if not self.enabled:
            return None
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            stored_at, result = entry
            if self._clock() - stored_at > self.ttl_s:
                del self._entries[key]
                return None
            self._entries.move_to_end(key)
            return result

    def put(self, key: str, result: ScoreResult) -> None:
        """Store a judged result (errors are never cached: the next run retries; skipped
        evaluations judged nothing)."""
        if not self.enabled or result.error is not None or result.skipped is not None:
            return
        with self._lock:
            self._entries[key] = (self._clock(), result)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
