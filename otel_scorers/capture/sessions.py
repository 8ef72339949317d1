"""Which conversation an interaction belongs to: its session key.

The key is read from the interaction's spans: the GenAI convention ``gen_ai.conversation.id``,
OpenInference's ``session.id`` (set on every span by ``using_session``), or attributes of your
own (``sessions.key_attributes``), the first found winning; the interaction's own span first,
then the agent spans inside it. A key is an id, never content: it is kept to
:data:`MAX_KEY_CHARS` characters, and an empty one is no key.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["DEFAULT_SESSION_KEYS", "MAX_KEY_CHARS", "session_key"]

#: The attributes a session key is read from by default, in order.
DEFAULT_SESSION_KEYS: tuple[str, ...] = ("gen_ai.conversation.id", "session.id")
MAX_KEY_CHARS = 256


def session_key(attributes: Iterable[Mapping[str, Any]], keys: Sequence[str]) -> str | None:
    """The first session key found in ``attributes`` (mappings, in order of precedence)."""
    for attrs in attributes:
        for key in keys:
            value = attrs.get(key)
            if isinstance(value, bool) or value is None:
                continue
            if isinstance(value, str | int):
                text = str(value).strip()
                if text:
                    return text[:MAX_KEY_CHARS]
    return None
