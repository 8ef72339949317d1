"""The judge's batch lane: requests written to a durable spool, sent through a provider's batch
API (OpenAI's files and batches endpoints, which OpenAI-compatible servers mirror) at about half
the price, and answered hours later through the scorer's own parsing.

- :class:`~otel_scorers.judge.spool.Spool`: the requests and submitted batches on disk,
  durable, bounded, shared by a server's workers (one leads).
- :class:`BatchAPI`: the calls (upload the JSONL input, create the batch with its metadata,
  retrieve, find by metadata and cancel it, download an output file chunk by chunk), bounded
  reads, the key never shown; the output files are read line by line by
  :mod:`~otel_scorers.judge.batch_output`.
- :func:`request_of` and :func:`replay`: a scorer's judgement made in two halves. The scorer
  runs once with a transport that records its first request and asks nothing (the request goes
  to the spool), and again, when the batch is in, with a transport that answers that request from
  the batch's output line: the same prompt building, parsing and result as a live call. A
  scorer that needs a second call (a corrective re-ask after a broken answer) makes it live,
  at the standard price, counted as a call of the result.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from otel_scorers import http, safe_json
from otel_scorers.errors import (
    ConfigError,
    JudgeConnectionError,
    JudgeRequestError,
    JudgeResponseError,
)
from otel_scorers.judge import batch_output
from otel_scorers.judge.openai_compatible import DirectTransport, env_proxy, split_proxy
from otel_scorers.judge.transport import ChatRequest, ChatResponse

__all__ = ["FINISHED", "MAX_BATCH_BYTES", "BatchAPI", "answers", "api_for", "batch_body",
           "batch_lines", "replay", "request_of"]

#: Pages of 100 batches :meth:`BatchAPI.find` reads at most (the 500 most recent).
FIND_PAGES = 5
#: The most of one API answer (a batch object) read.
MAX_ANSWER_BYTES = 1024 * 1024
#: OpenAI's API, the endpoint of an ``openai/<model>`` judge without an ``api_base``.
OPENAI_BASE = "https://api.openai.com/v1"
#: The most bytes of one batch's input file the lane sends (OpenAI takes up to 200 MB and
#: 50,000 requests per batch; the lane's memory at a submit is about this much).
MAX_BATCH_BYTES = 100 * 1024 * 1024
#: A batch the provider reports in one of these states is over (its files say what came back).
FINISHED = frozenset({"completed", "failed", "expired", "cancelled"})


class BatchAPI:
    """OpenAI's files and batches endpoints at ``api_base`` (``.../v1``)."""

    def __init__(self, api_base: str, api_key: str | None) -> None:
        self.base = api_base.rstrip("/")
        key = api_key or os.environ.get("OPENAI_API_KEY")
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}
        # the judge's proxy (HTTPS_PROXY / HTTP_PROXY unless NO_PROXY exempts the host), read
        # once, its credentials apart from the URL that errors may name
        proxy = env_proxy(self.base)
        self._proxy: tuple[Any, Any] = split_proxy(proxy) if proxy else (None, None)

    def __repr__(self) -> str:
        return f"BatchAPI({http.shown_url(self.base)!r})"

    @contextlib.asynccontextmanager
    async def _answer(self, method: str, path: str, *, data: Any = None,
                      json_body: Any = None) -> AsyncIterator[Any]:
        """The provider's answer to one call (its status not yet checked)."""
        import aiohttp

        session = http.shared("batches", lambda: aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=300)))
        try:
            async with session.request(method, self.base + path, data=data, json=json_body,
                                       headers=self._headers, allow_redirects=False,
                                       proxy=self._proxy[0], proxy_auth=self._proxy[1]
                                       ) as answer:
                yield answer
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise JudgeConnectionError(
                f"could not reach the batch API at {http.shown_url(self.base)}: "
                f"{type(exc).__name__}") from None

    @staticmethod
    def _check(answer: Any, method: str, path: str) -> None:
        if not 200 <= answer.status < 300:
            raise JudgeRequestError(f"batch API {method} {path} answered HTTP "
                                    f"{answer.status}", status_code=answer.status)

    async def _request(self, method: str, path: str, *, data: Any = None,
                       json_body: Any = None, limit: int = MAX_ANSWER_BYTES) -> bytes:
        try:
            async with self._answer(method, path, data=data, json_body=json_body) as answer:
                self._check(answer, method, path)
                return await http.read_bounded(answer, limit)
        except http.TooLarge:
            raise JudgeResponseError(f"batch API answered more than {limit} bytes") from None

    async def _json(self, method: str, path: str, **options: Any) -> dict[str, Any]:
        raw = await self._request(method, path, **options)
        try:
            answer = safe_json.loads(raw)
        except ValueError:
            raise JudgeResponseError(f"batch API answered {path} with no JSON") from None
        if not isinstance(answer, dict):
            raise JudgeResponseError(f"batch API answered {path} with no object")
        return answer

    async def upload(self, lines: bytes | Path) -> str:
        """A batch's JSONL input uploaded: bytes, or a file read as it is sent (a batch of
        100 MB is never whole in memory)."""
        import aiohttp

        with contextlib.ExitStack() as stack:
            data = stack.enter_context(lines.open("rb")) if isinstance(lines, Path) else lines
            form = aiohttp.FormData()
            form.add_field("purpose", "batch")
            form.add_field("file", data, filename="otel-scorers-batch.jsonl",
                           content_type="application/jsonl")
            ident = (await self._json("POST", "/files", data=form)).get("id")
        if not isinstance(ident, str):
            raise JudgeResponseError("batch API gave the uploaded file no id")
        return ident

    async def create(self, file_id: str, window: str,
                     metadata: Mapping[str, str] | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"input_file_id": file_id, "endpoint": "/v1/chat/completions",
                                "completion_window": window}
        if metadata:
            body["metadata"] = dict(metadata)
        return await self._json("POST", "/batches", json_body=body)

    async def cancel(self, batch_id: str) -> None:
        """Ask the provider to stop ``batch_id`` (what it finished is still billed)."""
        await self._json("POST", f"/batches/{_safe_id(batch_id)}/cancel")

    async def find(self, key: str, value: str) -> str | None:
        """The id of the most recent batch whose ``metadata[key]`` is ``value``, among the
        provider's ``FIND_PAGES`` pages of 100 most recent batches (``None``: not there)."""
        after = ""
        for _ in range(FIND_PAGES):
            page = await self._json("GET", "/batches?limit=100" + (
                f"&after={_safe_id(after)}" if after else ""))
            data = page.get("data")
            for batch in data if isinstance(data, list) else ():
                metadata = batch.get("metadata") if isinstance(batch, dict) else None
                if isinstance(metadata, dict) and metadata.get(key) == value and \
                        isinstance(batch.get("id"), str):
                    return str(batch["id"])
            last = page.get("last_id")
            if not page.get("has_more") or not isinstance(last, str) or not last or \
                    last == after:
                return None
            after = last
        return None

    async def retrieve(self, batch_id: str) -> dict[str, Any]:
        return await self._json("GET", f"/batches/{_safe_id(batch_id)}")

    async def download(self, file_id: str, into: IO[bytes], limit: int) -> bool:
        """A file's content written to ``into`` as it arrives, at most ``limit`` bytes:
        ``False`` when the file is longer (the rest is never read)."""
        path = f"/files/{_safe_id(file_id)}/content"
        size = 0
        async with self._answer("GET", path) as answer:
            self._check(answer, "GET", path)
            async for chunk in answer.content.iter_chunked(65_536):
                if size + len(chunk) > limit:
                    into.write(chunk[:limit - size])
                    return False
                into.write(chunk)
                size += len(chunk)
        return True


def _safe_id(ident: str) -> str:
    """A provider's object id as a path segment (what a hostile answer puts there stays one)."""
    import urllib.parse

    return urllib.parse.quote(ident[:200], safe="")


class _Deferred(JudgeRequestError):
    """Raised by the recording transport: nothing is asked now (never retried)."""


class _Recording:
    """A transport that records the first request and asks nothing."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.requests: list[ChatRequest] = []

    async def complete(self, request: ChatRequest) -> ChatResponse:
        self.requests.append(request)
        raise _Deferred("deferred to the batch lane")

    def __getattr__(self, name: str) -> Any:  # structured_mode, priced, key_variables
        return getattr(self.inner, name)


class _Replaying:
    """A transport that answers the first request from a batch output line's body (priced at
    the price map's batch rates) and any later one live."""

    def __init__(self, inner: Any, model: str, body: Mapping[str, Any]) -> None:
        self.inner, self.model, self.body, self.used = inner, model, body, False

    async def complete(self, request: ChatRequest) -> ChatResponse:
        if self.used:
            return await self.inner.complete(request)  # type: ignore[no-any-return]
        self.used = True
        reader = DirectTransport(self.model, "http://batch.invalid/v1", None)
        return reader._answer(200, {}, json.dumps(self.body).encode(), "batches")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _with_transport(scorer: Any, transport: Any) -> Any:
    """A shallow copy of ``scorer`` whose judge calls go through ``transport``."""
    judge = copy.copy(scorer.judge)
    judge.transport = transport
    twin = copy.copy(scorer)
    twin.judge = judge
    return twin


def batch_body(request: ChatRequest, model: str) -> dict[str, Any]:
    """The chat-completions body of ``request`` as a batch input line carries it."""
    body: dict[str, Any] = {"model": model.split("/", 1)[-1],
                            "messages": [dict(m) for m in request.messages],
                            "temperature": request.temperature, "max_tokens": request.max_tokens}
    if request.response_format is not None:
        body["response_format"] = dict(request.response_format)
    return body


async def request_of(scorer: Any, run: Any) -> dict[str, Any] | None:
    """The body of the first judge request ``scorer`` makes for ``run`` (``None``: it asks
    the judge nothing: a code scorer, or a run it skips)."""
    recording = _Recording(scorer.judge.transport)
    await _with_transport(scorer, recording).arun(run)
    if not recording.requests:
        return None
    return batch_body(recording.requests[0], scorer.judge.model)


async def replay(scorer: Any, run: Any, body: Mapping[str, Any]) -> Any:
    """``scorer``'s result for ``run`` with its first request answered by ``body`` (a batch
    output line's chat completion), its usage marked as the batch tier's."""
    result = await _with_transport(scorer, _Replaying(scorer.judge.transport,
                                                      scorer.judge.model, body)).arun(run)
    if result.judge is None:
        return result
    return result.model_copy(update={"judge": result.judge.model_copy(
        update={"service_tier": "batch"})})


def api_for(judges: Sequence[Any], what: str) -> BatchAPI:
    """The batch API of ``judges`` (``what`` uses them: named in the error): each an
    ``openai/<model>`` judge, all at one endpoint (OpenAI's by default)."""
    bases = {judge.api_base or OPENAI_BASE for judge in judges}
    if any(not str(judge.model).startswith("openai/") for judge in judges) or len(bases) > 1:
        raise ConfigError(f"{what} needs every judging scorer on one openai/<model> judge "
                          "endpoint (OpenAI, or an OpenAI-compatible server with the files and "
                          "batches endpoints)")
    return BatchAPI(bases.pop() if bases else OPENAI_BASE,
                    judges[0]._api_key if judges else None)


def batch_lines(bodies: Mapping[str, Mapping[str, Any]]) -> bytes:
    """The JSONL input of a batch: one chat-completions request per ``custom_id``."""
    return b"".join(json.dumps({"custom_id": ident, "method": "POST",
                                "url": "/v1/chat/completions", "body": body},
                               separators=(",", ":")).encode() + b"\n"
                    for ident, body in bodies.items())


async def answers(api: BatchAPI, state: Mapping[str, Any]
                  ) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """A finished batch's answers by ``custom_id`` (the chat completions) and its requests
    that got none, with why: ``batch_expired`` (OpenAI's code for a request that expired with
    its batch) or ``batch_failed`` (read line by line: :mod:`.batch_output`)."""
    answered, failed, _ = await batch_output.answers(api, state)
    return answered, failed
