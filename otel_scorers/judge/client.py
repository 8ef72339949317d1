"""The judge client: one structured LLM call, done carefully, over whichever transport.

A :class:`JudgeRequest` holds trusted instructions, untrusted text fields and the pydantic model
of the expected answer. :meth:`JudgeClient.judge` redacts and truncates every field, fences it
with a per-call nonce, asks the model for JSON (a JSON schema where the provider supports
structured output, JSON mode plus the schema in the prompt otherwise), retries transient
failures with jittered backoff, re-asks once when the answer breaks the schema, and returns the
parsed answer with token usage, cost and latency. Failures raise :class:`JudgeError`
subclasses, each carrying the usage spent so far.

The call itself goes through the client's one :class:`~otel_scorers.judge.transport.Transport`
(litellm, the direct OpenAI-compatible transport or the embedded model, chosen once by
:func:`transport_for`); the client never asks which one it holds.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar, get_args

from pydantic import BaseModel, ValidationError

from otel_scorers.background_loop import on_loop, within
from otel_scorers.config.environment import judge_environment
from otel_scorers.errors import (
    ConfigError,
    EnvConfigError,
    JudgeAuthError,
    JudgeError,
    JudgeOutputError,
    JudgeTimeoutError,
    JudgeTruncatedError,
)
from otel_scorers.judge.fence import FENCE_RULES, Fence, redact_truncate, truncate
from otel_scorers.judge.provider import load_litellm, suppress_instrumentation
from otel_scorers.judge.redact import Redactor, RegexRedactor, environment_secrets, mask_secrets
from otel_scorers.judge.retry import RetryPolicy, capacity_refusal, classify_exception
from otel_scorers.judge.schema import answer_schema, correction, parse_answer, problems, schema_text
from otel_scorers.judge.transport import ChatRequest, StructuredOutput, Transport
from otel_scorers.judge.transports import transport_for
from otel_scorers.judge.usage import JudgeUsage, Meter

__all__ = [
    "DEFAULT_LOCAL_MODEL",
    "JudgeClient",
    "JudgeRequest",
    "JudgeUsage",
    "Judgement",
    "StructuredOutput",
    "load_litellm",
    "suppress_instrumentation",
]

logger = logging.getLogger(__name__)
#: An error message's longest form in telemetry and on the CLI (a provider may answer with a
#: page of HTML, or worse): head and tail are kept.
MAX_ERROR_CHARS = 2_000

T = TypeVar("T", bound=BaseModel)
DEFAULT_LOCAL_MODEL = "local/smollm2"
ENV_MODEL = "OTEL_SCORERS_JUDGE_MODEL"
ENV_API_BASE = "OTEL_SCORERS_JUDGE_API_BASE"
ENV_API_KEY = "OTEL_SCORERS_JUDGE_API_KEY"


@dataclass(frozen=True)
class JudgeRequest(Generic[T]):
    """One judgement to ask for.

    ``instructions`` are this library's own (trusted) words; ``fields`` are ``(name, text)``
    pairs of untrusted text, fenced one by one; ``task`` closes the user message.
    """

    instructions: str
    fields: Sequence[tuple[str, str]]
    answer_model: type[T]
    task: str = ""
    #: A scorer's few-shot block, already fenced (``scorers.examples``): appended to the system
    #: prompt, identical from call to call.
    examples: str = ""


@dataclass(frozen=True)
class Judgement(Generic[T]):
    value: T
    usage: JudgeUsage
    raw: str = ""


class JudgeClient:
    """A judge model, called through one transport (litellm, an OpenAI-compatible endpoint
    over HTTP directly, or the embedded model in process).

    ``model`` is any litellm model string (``openai/gpt-5-mini``, ``anthropic/...``,
    ``ollama/...``, ``openai/<name>`` with an OpenAI-compatible ``api_base``) or ``local/...``
    (the embedded model, the default). ``structured_output`` picks how JSON is requested:
    ``auto`` asks the transport whether the model enforces JSON schemas;
    ``json_object_schema`` is llama.cpp's form. ``transport``: ``auto`` (see
    :func:`transport_for`), ``litellm``, or a :class:`~otel_scorers.judge.transport.Transport`
    of your own. The client reads no environment: :meth:`from_environment` fills what is not
    given from the ``OTEL_SCORERS_JUDGE_*`` variables (as the scorers built in code do), and
    the settings path (``pipeline.build.judge_from``) builds it from resolved settings.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        temperature: float = 0.0,
        max_tokens: int = 2048,
        timeout_s: float = 60.0,
        total_timeout_s: float = 180.0,
        retry: RetryPolicy | None = None,
        structured_output: StructuredOutput = "auto",
        redactor: Redactor | bool | None = None,
        max_field_chars: int = 12_000,
        extra_params: Mapping[str, Any] | None = None,
        transport: Literal["auto", "litellm"] | Transport | None = None,
        service_tier: Literal["standard", "flex"] = "standard",
        flex_fallback: Literal["standard", "wait"] = "standard",
    ) -> None:
        _check(structured_output, temperature, timeout_s=timeout_s, total_timeout_s=total_timeout_s,
               max_tokens=max_tokens, max_field_chars=max_field_chars)
        #: an unreadable environment (:meth:`from_environment`), raised by the first judgement
        self._env_error: EnvConfigError | None = None
        self._fingerprint: tuple[tuple[Any, ...], str] | None = None
        self.model = model or DEFAULT_LOCAL_MODEL
        self.api_base = api_base or None
        self._api_key = api_key or None
        if self.api_base and not model:
            raise ConfigError(
                f"a judge API base ({ENV_API_BASE} or api_base) is set but no judge model: set "
                f"{ENV_MODEL} (e.g. openai/<model name> for an OpenAI-compatible server); "
                "without one the embedded local model would be used and the URL ignored")
        self.temperature, self.max_tokens, self.timeout_s = temperature, max_tokens, timeout_s
        self.total_timeout_s = total_timeout_s
        self.retry = retry or RetryPolicy()
        self.structured_output: StructuredOutput = structured_output
        self.redactor: Redactor | None = RegexRedactor() if redactor is True else (
            redactor or None)
        self.max_field_chars = max_field_chars
        self.extra_params = dict(extra_params or {})
        #: What carries the calls (see :mod:`otel_scorers.judge.transport`).
        self.transport: Transport = transport_for(
            self.model, api_base=self.api_base, api_key=self._api_key,
            extra_params=self.extra_params, choice=transport or "auto")
        self._mode: StructuredOutput | None = (
            None if structured_output == "auto" else self.structured_output)
        if service_tier not in ("standard", "flex") or flex_fallback not in ("standard", "wait"):
            raise ConfigError(f"service_tier is standard or flex and flex_fallback standard or "
                              f"wait, got {service_tier!r} and {flex_fallback!r}")
        #: The provider tier asked for (``flex``: OpenAI's, about half the price, slower,
        #: sometimes refused for capacity) and what a capacity refusal does: ``standard``
        #: asks again at once at the standard tier, ``wait`` retries at flex with the retry
        #: policy's backoff within the deadline (then a ``rate_limited`` error). Counted either
        #: way (``JudgeUsage.flex_refusals``). Providers without tiers ignore the field.
        self.service_tier, self.flex_fallback = service_tier, flex_fallback

    @property
    def mode_in_use(self) -> StructuredOutput | None:
        """The structured-output mode the calls use (``None``: ``auto``, not resolved yet)."""
        return self._mode

    @classmethod
    def from_environment(cls, model: str | None = None, **options: Any) -> JudgeClient:
        """A judge whose options not given (``None`` or absent) are read from the
        ``OTEL_SCORERS_JUDGE_*`` variables (and ``OTEL_SCORERS_REDACT``): argument, then
        variable, then default. A bad variable never breaks the application's start: the
        first judgement raises it (a processor has turned scoring off with the reason)."""
        error: EnvConfigError | None = None
        try:
            env = judge_environment()
        except EnvConfigError as exc:
            error, env = exc, {}
        given = {key: value for key, value in options.items() if value is not None}
        read = {"api_base": env.get("api_base"), "api_key": env.get("api_key"),
                "temperature": env.get("temperature"), "max_tokens": env.get("max_tokens"),
                "timeout_s": env.get("timeout_s"),
                "structured_output": env.get("structured_output"),
                "transport": env.get("transport"), "redactor": env.get("redact") or None,
                "retry": RetryPolicy(max_retries=env["max_retries"])
                if env.get("max_retries") is not None else None}
        client = cls(model or env.get("model"),
                     **{**{k: v for k, v in read.items() if v is not None}, **given})
        client._env_error = error
        return client

    def __repr__(self) -> str:
        return f"JudgeClient(model={self.model!r}, api_base={self.api_base!r})"

    @property
    def fingerprint(self) -> str:
        """Identifies everything about this client that can change a judgement (cache keys;
        read once per result, hashed once per configuration)."""
        key = (self.model, self.api_base or "", self.temperature, self.max_tokens,
               self.structured_output, self.max_field_chars, self.redactor,  # (held: no id
               repr(self.extra_params))  # of a freed redactor ever matches a new one)
        if self._fingerprint is None or self._fingerprint[0] != key:
            parts = [*map(str, key[:6]), repr(self.redactor),
                     json.dumps(self.extra_params, sort_keys=True, default=str)]
            digest = hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:16]
            self._fingerprint = (key, digest)
        return self._fingerprint[1]

    def scrubbed(self, error: JudgeError) -> JudgeError:
        """``error`` with its message cleaned of secrets: the configured API key and any
        key-like environment value are masked, then the redactor (if any) runs on it. A
        provider answering 401 often quotes the key it was given; that text becomes an
        attribute, an event, a CLI line."""
        secrets = [self._api_key or "", *environment_secrets()]
        redactor = self.redactor

        def clean(text: str) -> str:
            text = mask_secrets(text, secrets)
            return redactor(text) if redactor is not None else text

        # a hostile provider's message is cut first: what is kept (and a margin) is cleaned
        message = redact_truncate(str(error), MAX_ERROR_CHARS, clean)
        if isinstance(error, JudgeAuthError):
            message = f"{self.key_hint(missing=error.missing)}; {message}"
        error.args = (message,)
        return error

    def key_hint(self, *, missing: bool) -> str:
        """What to set for this judge's key: the provider's variable and this library's."""
        try:
            names = self.transport.key_variables()
        except Exception:
            names = []
        variables = " or ".join([*names, ENV_API_KEY])
        state = "is missing" if missing else "was rejected"
        return f"the judge's API key for {self.model} {state}: set {variables}"

    def priced(self) -> bool:
        """Whether this judge's calls have a known price (the litellm transport loads litellm:
        seconds, once)."""
        return self.transport.priced()

    def structured_mode(self) -> StructuredOutput:
        """How this client asks for JSON: ``json_schema`` when the provider enforces a schema,
        else JSON mode with the schema in the prompt (may load litellm: call off the loop)."""
        if self._mode is None:
            self._mode = self.transport.structured_mode()
        return self._mode

    # -- the call -----------------------------------------------------------------------------
    @property
    def fusion_key(self) -> str:
        """Clients with equal keys may answer for each other in one fused call: the
        fingerprint plus the key (never shown; hashed)."""
        key = hashlib.sha256((self._api_key or "").encode()).hexdigest()[:16]
        return f"{self.fingerprint}:{key}:{self.service_tier}"

    async def judge(self, request: JudgeRequest[T]) -> Judgement[T]:
        """Ask the judge once (plus retries and at most one corrective re-ask).

        The call runs on the library's background event loop whatever loop awaits it (see
        :func:`otel_scorers.background_loop.on_loop`); cancelling the caller cancels the call.
        """
        return await on_loop(self._judge(request))

    async def _judge(self, request: JudgeRequest[T]) -> Judgement[T]:
        if self._env_error is not None:
            raise self._env_error
        deadline = time.monotonic() + self.total_timeout_s
        # the first call may load litellm (seconds): off the loop, and before the meter starts
        mode = self._mode if self._mode is not None else await asyncio.to_thread(
            self.structured_mode)
        meter = Meter(self.model)  # latency counts the judge, not the one-time import
        meter.truncated = tuple(name for name, text in request.fields
                                if len(text) > self.max_field_chars)
        try:
            messages = self.render(request, mode)
            with suppress_instrumentation():
                content = await self._complete(messages, request, mode, meter, deadline)
                try:
                    return Judgement(parse_answer(content, request.answer_model), meter.freeze(),
                                     content)
                except (ValidationError, ValueError) as first:
                    logger.debug("judge answer invalid, re-asking once: %s", first)
                    meter.reasks += 1
                    messages = [*messages, {"role": "assistant", "content": content},
                                {"role": "user", "content": correction(first)}]
                    content = await self._complete(messages, request, mode, meter, deadline)
                    try:
                        value = parse_answer(content, request.answer_model)
                    except (ValidationError, ValueError) as second:
                        error = JudgeOutputError(
                            "judge answer did not match the schema after one corrective "
                            f"re-ask: {problems(second)}")
                        error.raw = content
                        raise error from second
                    return Judgement(value, meter.freeze(), content)
        except JudgeError as error:
            error.usage = meter.freeze()
            raise

    def render(self, request: JudgeRequest[Any], mode: StructuredOutput) -> list[dict[str, str]]:
        """The chat messages for ``request``: trusted system text, fenced untrusted fields."""
        texts = [self._prepare(text) for _, text in request.fields]
        fence = Fence(texts)
        system = f"{request.instructions.strip()}\n\n{FENCE_RULES}"
        if request.examples:
            system += f"\n\n{request.examples}"
        if mode in ("json_object", "prompt"):
            system += ("\n\nAnswer with one JSON object and nothing else. It must match this "
                       "JSON Schema exactly (every property, in this order):\n"
                       + schema_text(request.answer_model))
        else:  # the provider enforces the schema: no need to spend tokens on it
            system += "\n\nAnswer with the JSON object the response format defines."
        body = "\n\n".join(fence.wrap(name, text)
                           for (name, _), text in zip(request.fields, texts, strict=True))
        user = f"{fence.declaration()}\n\n{body}\n\n{request.task.strip()}".strip()
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def _prepare(self, text: str) -> str:
        if self.redactor is not None:
            return redact_truncate(text, self.max_field_chars, self.redactor)
        return truncate(text, self.max_field_chars)

    def _response_format(self, model: type[BaseModel], mode: StructuredOutput) -> Any:
        if mode == "json_schema":
            return {"type": "json_schema", "json_schema": {
                "name": model.__name__, "schema": answer_schema(model, strict=True),
                "strict": True}}
        if mode == "json_object":
            return {"type": "json_object"}
        if mode == "json_object_schema":
            return {"type": "json_object", "schema": answer_schema(model)}
        return None

    async def _complete(self, messages: list[dict[str, str]], request: JudgeRequest[Any],
                        mode: StructuredOutput, meter: Meter, deadline: float) -> str:
        """One answer's text: the transport called, transient failures retried with backoff
        within the deadline (an error's message is cleaned of secrets first)."""
        chat = ChatRequest(messages=messages, temperature=self.temperature,
                           max_tokens=self.max_tokens, timeout_s=self.timeout_s,
                           response_format=self._response_format(request.answer_model, mode),
                           service_tier="flex" if self.service_tier == "flex" else None)
        attempt = 0
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise JudgeTimeoutError(f"judge deadline of {self.total_timeout_s:g}s spent")
            meter.calls += 1
            call = self.transport.complete(chat)  # a bounded transport ends it at timeout_s
            try:  # (else a timer here: the deadline's rest, or timeout_s and 5 s to spare)
                answer = await (call if remaining > self.timeout_s and getattr(
                    self.transport, "bounded", False) else within(
                        call, min(self.timeout_s + 5.0, remaining)))
            except Exception as exc:  # (a cancellation is not one: it goes up)
                error = self.scrubbed(classify_exception(exc))
                if chat.service_tier is not None and capacity_refusal(error):
                    meter.flex_refusals += 1
                    if self.flex_fallback == "standard":  # the same call, standard tier, now
                        chat = dataclasses.replace(chat, service_tier=None)
                        continue
                delay = self.retry.delay_s(error, attempt) \
                    if self.retry.should_retry(error, attempt) else None
                if delay is None or time.monotonic() + delay >= deadline:
                    raise error from None  # the original may quote the key: not chained
                logger.debug("judge attempt %d failed (%s); retrying in %.2fs", attempt + 1,
                             error.error_type, delay)
                attempt += 1
                meter.retries += 1
                await asyncio.sleep(delay)
                continue
            prompt_tokens, completion_tokens = answer.prompt_tokens, answer.completion_tokens
            if not prompt_tokens and not completion_tokens:
                # no usage reported (some servers, proxies and local models): estimated from
                # the sizes, ~4 characters a token, so that the token budget still counts
                prompt_tokens = sum(len(str(m.get("content", ""))) for m in messages) // 4 + 1
                completion_tokens = len(answer.content or "") // 4 + 1
                meter.estimated = True
            meter.add(prompt_tokens, completion_tokens, answer.cost_usd, answer.cached_tokens)
            meter.service_tier = chat.service_tier or "standard"
            if answer.finish_reason == "length":
                raise JudgeTruncatedError("judge answer was cut at max_tokens (finish_reason="
                                          "length); raise max_tokens or shorten the rubric")
            return answer.content or ""


def _check(structured_output: str, temperature: float, **positive: float) -> None:
    """A bad option is a :class:`ConfigError` naming it."""
    if structured_output not in get_args(StructuredOutput):
        raise ConfigError(f"structured_output must be one of {get_args(StructuredOutput)}")
    for name, value in positive.items():
        if value <= 0:
            raise ConfigError(f"{name} must be > 0, got {value!r}")
    if not 0.0 <= temperature <= 2.0:
        raise ConfigError(f"temperature must be within [0, 2], got {temperature!r}")
