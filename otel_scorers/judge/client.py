"""The judge client: one structured LLM call through litellm, done carefully.

A :class:`JudgeRequest` holds trusted instructions, untrusted text fields and the pydantic model
of the expected answer. :meth:`JudgeClient.judge` redacts and truncates every field, fences it
with a per-call nonce, asks the model for JSON (a JSON schema where the provider supports
structured output, JSON mode plus the schema in the prompt otherwise), retries transient
failures with jittered backoff, re-asks once when the answer breaks the schema, and returns the
parsed answer with token usage, cost and latency. Failures raise :class:`JudgeError`
subclasses, each carrying the usage spent so far.

litellm is imported on first use (its import takes seconds); the import runs in a worker
thread so the event loop stays responsive. An OpenAI-compatible endpoint is called directly
instead (:mod:`.openai_compatible`), and inside an evaluation with fused calls a question may go
out with other scorers' (:mod:`.fused`).

The module is under 400 lines on purpose: one call's retries, re-ask, error mapping, transports
and message rendering share the client's state and read best in one place; provider details,
schemas, fences, usage and retry policy are in their own modules.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Generic, Literal, TypeVar, get_args

from pydantic import BaseModel, ValidationError

from otel_scorers.background_loop import on_loop
from otel_scorers.errors import (
    ConfigError,
    JudgeAuthError,
    JudgeError,
    JudgeOutputError,
    JudgeTimeoutError,
)
from otel_scorers.judge.fence import FENCE_RULES, Fence, truncate
from otel_scorers.judge.fused import MEMBER
from otel_scorers.judge.openai_compatible import DirectTransport, applies
from otel_scorers.judge.provider import (
    content_of,
    cost_of,
    load_litellm,
    suppress_instrumentation,
)
from otel_scorers.judge.redact import Redactor, RegexRedactor, environment_secrets, mask_secrets
from otel_scorers.judge.retry import RetryPolicy, classify_exception
from otel_scorers.judge.schema import answer_schema, correction, parse_answer, problems
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

T = TypeVar("T", bound=BaseModel)
StructuredOutput = Literal["auto", "json_schema", "json_object", "json_object_schema", "prompt"]
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
    """A judge model reached through litellm.

    ``model`` is any litellm model string (``openai/gpt-5-mini``, ``anthropic/...``,
    ``ollama/...``, ``openai/<name>`` with an OpenAI-compatible ``api_base``). When it is not
    given, ``OTEL_SCORERS_JUDGE_MODEL`` is read, then the embedded local model is used.
    ``structured_output`` picks how JSON is requested: ``auto`` asks litellm whether the model
    supports JSON schemas; ``json_object_schema`` is llama.cpp's server form.
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
        transport: Literal["auto", "litellm"] = "auto",
    ) -> None:
        resolved = model or os.environ.get(ENV_MODEL) or DEFAULT_LOCAL_MODEL
        if "/" not in resolved and not resolved.startswith(("gpt-", "o1", "o3", "o4", "claude")):
            logger.debug("judge model %r has no provider prefix; litellm will infer one", resolved)
        if structured_output not in get_args(StructuredOutput):
            raise ConfigError(f"structured_output must be one of {get_args(StructuredOutput)}")
        for name, value in (("timeout_s", timeout_s), ("total_timeout_s", total_timeout_s),
                            ("max_tokens", max_tokens), ("max_field_chars", max_field_chars)):
            if value <= 0:
                raise ConfigError(f"{name} must be > 0, got {value!r}")
        if not 0.0 <= temperature <= 2.0:
            raise ConfigError(f"temperature must be within [0, 2], got {temperature!r}")
        self.model = resolved
        # each field on its own: the argument, else its environment variable
        self.api_base = api_base or os.environ.get(ENV_API_BASE) or None
        self._api_key = api_key or os.environ.get(ENV_API_KEY) or None
        if self.api_base and resolved == DEFAULT_LOCAL_MODEL and not model:
            raise ConfigError(
                f"a judge API base ({ENV_API_BASE} or api_base) is set but no judge model: set "
                f"{ENV_MODEL} (e.g. openai/<model name> for an OpenAI-compatible server); "
                "without one the embedded local model would be used and the URL ignored")
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.timeout_s = timeout_s
        self.total_timeout_s = total_timeout_s
        self.retry = retry or RetryPolicy()
        self.structured_output: StructuredOutput = structured_output
        self.redactor: Redactor | None = RegexRedactor() if redactor is True else (
            redactor or None)
        self.max_field_chars = max_field_chars
        self.extra_params = dict(extra_params or {})
        if transport not in ("auto", "litellm"):
            raise ConfigError(f"transport must be 'auto' or 'litellm', got {transport!r}")
        #: The direct transport for an OpenAI-compatible endpoint (see
        #: :mod:`otel_scorers.judge.openai_compatible`), else ``None``: litellm.
        self.direct: DirectTransport | None = None
        if transport == "auto" and self.api_base and applies(resolved, self.api_base,
                                                              self.extra_params):
            self.direct = DirectTransport(resolved, self.api_base, self._api_key)

    def __repr__(self) -> str:
        return f"JudgeClient(model={self.model!r}, api_base={self.api_base!r})"

    @property
    def fingerprint(self) -> str:
        """Identifies everything about this client that can change a judgement (cache keys)."""
        parts = [self.model, self.api_base or "", str(self.temperature), str(self.max_tokens),
                 self.structured_output, str(self.max_field_chars), repr(self.redactor),
                 json.dumps(self.extra_params, sort_keys=True, default=str)]
        return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:16]

    def scrubbed(self, error: JudgeError) -> JudgeError:
        """``error`` with its message cleaned of secrets: the configured API key and any
        key-like environment value are masked, then the redactor (if any) runs on it. A
        provider answering 401 often quotes the key it was given; that text becomes an
        attribute, an event, a CLI line."""
        message = mask_secrets(str(error), [self._api_key or "", *environment_secrets()])
        if self.redactor is not None:
            message = self.redactor(message)
        if isinstance(error, JudgeAuthError):
            message = f"{self.key_hint(missing=error.missing)}; {message}"
        error.args = (message,)
        return error

    def key_hint(self, *, missing: bool) -> str:
        """What to set for this judge's key: the provider's variable and this library's."""
        names = []
        try:
            found = load_litellm().validate_environment(model=self.model)
            names = [n for n in found.get("missing_keys", []) if n.endswith("_KEY")]
        except Exception:  # an unknown provider: litellm cannot say
            names = []
        variables = " or ".join([*names, ENV_API_KEY])
        state = "is missing" if missing else "was rejected"
        return f"the judge's API key for {self.model} {state}: set {variables}"

    def priced(self) -> bool:
        """Whether litellm's price table knows this model (loads litellm: seconds, once)."""
        if self.model.startswith("local/"):
            return True  # the embedded model costs nothing
        if self.direct is not None:
            return self.direct.priced()
        litellm = load_litellm()
        try:
            litellm.cost_per_token(model=self.model, prompt_tokens=1000, completion_tokens=0)
        except Exception:
            return False
        return True

    # -- the call -----------------------------------------------------------------------------
    @property
    def fusion_key(self) -> str:
        """Clients with equal keys may answer for each other in one fused call: the
        fingerprint plus the key (never shown; hashed)."""
        key = hashlib.sha256((self._api_key or "").encode()).hexdigest()[:16]
        return f"{self.fingerprint}:{key}"

    async def judge(self, request: JudgeRequest[T]) -> Judgement[T]:
        """Ask the judge once (plus retries and at most one corrective re-ask).

        The call runs on the library's background event loop whatever loop awaits it (see
        :func:`otel_scorers.background_loop.on_loop`); cancelling the caller cancels the call.
        Inside an evaluation with fused calls on, the question may wait for the other scorers
        of the run and go out with theirs (:mod:`otel_scorers.judge.fused`).
        """
        member = MEMBER.get()
        if member is not None and member.batch.accepts(member, self, request):
            result: Judgement[T] = await member.batch.ask(member, self, request)
            return result
        return await self.judge_alone(request)

    async def judge_alone(self, request: JudgeRequest[T]) -> Judgement[T]:
        """:meth:`judge`, never fused."""
        return await on_loop(self._judge(request))

    async def _judge(self, request: JudgeRequest[T]) -> Judgement[T]:
        deadline = time.monotonic() + self.total_timeout_s
        # the direct transport needs no litellm (nor its import, seconds and a large heap)
        litellm = None if self.direct is not None else await asyncio.to_thread(load_litellm)
        meter = Meter(self.model)  # latency counts the judge, not the one-time import
        try:
            mode = self._mode(litellm)
            messages = self.render(request, mode)
            with suppress_instrumentation():
                content = await self._complete(litellm, messages, request, mode, meter, deadline)
                try:
                    return Judgement(parse_answer(content, request.answer_model), meter.freeze(),
                                     content)
                except (ValidationError, ValueError) as first:
                    logger.debug("judge answer invalid, re-asking once: %s", first)
                    meter.reasks += 1
                    messages = [*messages, {"role": "assistant", "content": content},
                                {"role": "user", "content": correction(first)}]
                    content = await self._complete(litellm, messages, request, mode, meter,
                                                   deadline)
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
            schema = json.dumps(answer_schema(request.answer_model), separators=(",", ":"))
            system += ("\n\nAnswer with one JSON object and nothing else. It must match this "
                       f"JSON Schema exactly (every property, in this order):\n{schema}")
        else:  # the provider enforces the schema: no need to spend tokens on it
            system += "\n\nAnswer with the JSON object the response format defines."
        body = "\n\n".join(fence.wrap(name, text)
                           for (name, _), text in zip(request.fields, texts, strict=True))
        user = f"{fence.declaration()}\n\n{body}\n\n{request.task.strip()}".strip()
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def _prepare(self, text: str) -> str:
        if self.redactor is not None:
            text = self.redactor(text)
        return truncate(text, self.max_field_chars)

    def structured_mode(self, litellm: ModuleType | None) -> StructuredOutput:
        """How this client asks for JSON: ``json_schema`` when the provider enforces a schema
        (litellm knows), else JSON mode with the schema in the prompt."""
        return self._mode(litellm)

    def _mode(self, litellm: ModuleType | None) -> StructuredOutput:
        if self.structured_output != "auto":
            return self.structured_output
        if self.model.startswith("local/"):
            return "json_object_schema"
        if self.direct is not None:
            return "json_schema" if self.direct.supports_schema() else "json_object"
        if litellm is None:
            litellm = load_litellm()
        try:
            supported = bool(litellm.supports_response_schema(model=self.model))
        except Exception:  # an unknown model string: fall back to JSON mode
            supported = False
        return "json_schema" if supported else "json_object"

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

    async def _complete(self, litellm: ModuleType | None, messages: list[dict[str, str]],
                        request: JudgeRequest[Any], mode: StructuredOutput, meter: Meter,
                        deadline: float) -> str:
        kwargs: dict[str, Any] = {
            "model": self.model, "messages": messages, "temperature": self.temperature,
            "max_tokens": self.max_tokens, "timeout": self.timeout_s, "max_retries": 0,
            "num_retries": 0, "drop_params": True, **self.extra_params,
        }
        response_format = self._response_format(request.answer_model, mode)
        if response_format is not None:
            kwargs["response_format"] = response_format
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self._api_key:
            kwargs["api_key"] = self._api_key
        attempt = 0
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise JudgeTimeoutError(f"judge deadline of {self.total_timeout_s:g}s spent")
            meter.calls += 1
            direct = self.direct
            try:
                call = direct.complete(kwargs) if direct is not None else \
                    litellm.acompletion(**kwargs)  # type: ignore[union-attr]
                response = await asyncio.wait_for(call, timeout=min(self.timeout_s + 5.0,
                                                                    remaining))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                error = self.scrubbed(classify_exception(exc))
                if not self.retry.should_retry(error, attempt):
                    raise error from None  # the original may quote the key: not chained
                delay = self.retry.delay_s(error, attempt)
                if delay is None or time.monotonic() + delay >= deadline:
                    raise error from None
                logger.debug("judge attempt %d failed (%s); retrying in %.2fs", attempt + 1,
                             error.error_type, delay)
                attempt += 1
                meter.retries += 1
                await asyncio.sleep(delay)
                continue
            free = self.model.startswith("local/")  # the embedded model costs nothing
            cost = direct.cost(response) if direct is not None else (
                0.0 if free else cost_of(litellm, response))  # type: ignore[arg-type]
            meter.add(response, cost)
            return content_of(response)
