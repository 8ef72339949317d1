"""What the gateway does so that it can face a network: authentication, TLS, no leaked secrets.

- **Bearer tokens** (as the Collector's ``bearertokenauth`` extension): when a token is set, a
  request to ``/v1/*`` (HTTP) or an export call (gRPC) must carry ``Authorization: Bearer
  <token>``; the comparison is constant-time (:func:`hmac.compare_digest`). The token comes
  from a file (``--token-file``, read at start-up, surrounding whitespace ignored; an
  empty or malformed file is an error, never "no authentication") or from
  ``OTEL_SCORERS_GATEWAY_TOKEN``, never from the command line (it would show in ``ps``).
  ``/health`` and ``/metrics`` stay open for probes and scrapes and carry no secrets.
- **TLS** for both listeners from a certificate chain and key file (PEM).
- **Secrets never echoed**: the upstream URL is shown without ``user:password@``; the values of
  ``--upstream-header`` are masked in anything the gateway prints, logs or answers.
"""

from __future__ import annotations

import hmac
import os
import re
import ssl
from collections.abc import Iterable, Mapping
from pathlib import Path
from urllib.parse import urlsplit

from otel_scorers.judge.redact import mask_secrets

__all__ = ["ENV_TOKEN", "BearerAuth", "mask", "safe_url", "server_tls", "token_from",
           "url_secrets"]

ENV_TOKEN = "OTEL_SCORERS_GATEWAY_TOKEN"


class BearerAuth:
    """Checks ``Authorization`` header values against one token, in constant time."""

    def __init__(self, token: str) -> None:
        if len(token) < 16:
            raise ValueError("the gateway token must be at least 16 characters")
        self._expected = f"Bearer {token}".encode()

    def allows(self, header: str | None) -> bool:
        if not header:
            return False
        return hmac.compare_digest(header.strip().encode("utf-8", "replace"), self._expected)


#: What a bearer token may hold (RFC 6750 ``b64token``): a file or variable with anything else
#: (several lines, spaces, control characters) is a mistake, not a token.
_TOKEN = re.compile(r"[A-Za-z0-9._~+/-]+=*")


def token_from(path: str | None, env: Mapping[str, str] | None = None) -> str | None:
    """The receiver token: the file's content, else ``OTEL_SCORERS_GATEWAY_TOKEN``; ``None``
    only when neither is given. A given source must hold a valid token (16 or more characters
    of the RFC 6750 alphabet, surrounding whitespace ignored): an empty or whitespace-only
    file never means "no authentication" (ValueError, exit 2 at ``serve``)."""
    if path:
        try:
            value = Path(path).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            raise ValueError(f"cannot read the token file {path}: {reason}") from exc
        return _valid_token(value, f"the token file {path}")
    raw = (env if env is not None else os.environ).get(ENV_TOKEN)
    if raw is None or raw == "":
        return None
    return _valid_token(raw.strip(), ENV_TOKEN)


def _valid_token(value: str, source: str) -> str:
    if not value:
        raise ValueError(f"{source} is empty: it must hold the bearer token (16 or more "
                         "characters); to run without authentication, give no token at all")
    if _TOKEN.fullmatch(value) is None:
        raise ValueError(f"{source} does not hold one bearer token: use one line of letters, "
                         "digits and -._~+/ (e.g. `openssl rand -hex 32`)")
    if len(value) < 16:
        raise ValueError(f"{source} holds a token of {len(value)} characters: use 16 or more "
                         "(e.g. `openssl rand -hex 32`)")
    return value


def server_tls(cert: str | None, key: str | None) -> ssl.SSLContext | None:
    """A server TLS context (TLS 1.2 or later) from PEM files; ``None`` without a cert."""
    if not cert and not key:
        return None
    if not (cert and key):
        raise ValueError("TLS needs both --tls-cert and --tls-key")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:  # never OpenSSL's passphrase prompt: a service has no terminal to answer it
        context.load_cert_chain(cert, key, password=_no_passphrase)
    except _Encrypted:
        raise ValueError(f"the TLS key {key} is encrypted (it asks for a passphrase, and the "
                         "gRPC listener cannot take one): give the gateway an unencrypted key "
                         "file readable only by it, e.g. `openssl pkey -in KEY -out "
                         "gateway-key.pem` then `chmod 600 gateway-key.pem`") from None
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"cannot load the TLS certificate and key: {exc}") from exc
    return context


class _Encrypted(Exception):
    """The key asked for a passphrase."""


def _no_passphrase() -> str:
    raise _Encrypted


def safe_url(url: str) -> str:
    """``url`` as it may be printed: its credentials masked (``http.shown_url``)."""
    from otel_scorers.http import shown_url

    return shown_url(url)


def url_secrets(url: str) -> list[str]:
    """The password of ``url``'s authority, as written and percent-decoded."""
    from urllib.parse import unquote

    try:
        password = urlsplit(url).password
    except ValueError:
        return []
    return [password, unquote(password)] if password else []


def mask(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of each secret (4 characters or more) replaced."""
    return mask_secrets(text, secrets, min_length=4)
