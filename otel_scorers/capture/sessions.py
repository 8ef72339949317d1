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

__all__ = ["DEFAULT_SESSION_KEYS", "MAX_KEY_CHARS", "conversation_of", "scope_of",
           "scoped_key", "session_key"]

#: The attributes a session key is read from by default, in order.
DEFAULT_SESSION_KEYS: tuple[str, ...] = ("gen_ai.conversation.id", "session.id")
MAX_KEY_CHARS = 256
#: Characters of a key's scope, and what separates the scope from the conversation id in a
#: scoped key (a control character no scope keeps).
MAX_SCOPE_CHARS = 128
SCOPE_SEPARATOR = "\x1f"


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


def scope_of(resource: Mapping[str, Any] | None, names: Sequence[str]) -> str | None:
    """The scope of the session keys a resource's spans carry: the values of ``names`` (for
    example ``service.name``) it has, joined by ``/``; ``None`` when it has none of them."""
    if not resource or not names:
        return None
    values = [str(resource[name]) for name in names
              if isinstance(resource.get(name), str | int) and str(resource[name]).strip()]
    if not values:
        return None
    return "/".join(values).replace(SCOPE_SEPARATOR, "")[:MAX_SCOPE_CHARS]


def scoped_key(key: str | None, scope: str | None) -> str | None:
    """``key`` within ``scope``: two services whose conversation ids collide hold two sessions,
    and one cannot add turns to (or read the verdict of) the other's."""
    if key is None or not scope:
        return key
    return f"{scope}{SCOPE_SEPARATOR}{key}"


def conversation_of(key: str) -> tuple[str | None, str]:
    """A scoped key's scope and conversation id (``None``: the key is not scoped)."""
    scope, sep, conversation = key.partition(SCOPE_SEPARATOR)
    return (scope, conversation) if sep else (None, key)
