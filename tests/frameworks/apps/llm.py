"""The agent's LLM for the framework matrix: an OpenAI-compatible server on 127.0.0.1 that plays
the scenario (question -> a tool call -> a one-sentence answer) for whatever framework calls it.

It reads each request as a framework sends it: the question is found by its text anywhere in
the messages, a tool result by the result text the scenario's tool returns, a handoff by the
``transfer_to_*`` tool the triage agent is offered. It answers plain JSON or, when the request
asks for ``stream``, server-sent events in OpenAI's chunk format (strands and LlamaIndex stream).
Standard library only: it runs in every framework's virtual environment.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Scenario:
    """Three runs of one agent: each a question, the tool's result, the final answer."""

    questions: tuple[str, ...] = ("What is the weather in Paris?",
                                  "What is the weather in Tokyo?",
                                  "What is the weather in Lima?")
    cities: tuple[str, ...] = ("Paris", "Tokyo", "Lima")
    answers: tuple[str, ...] = ("It is sunny and 21 degrees in Paris right now.",
                                "It is raining and 14 degrees in Tokyo right now.",
                                "It is cloudy and 18 degrees in Lima right now.")
    instructions: str = ("You are a weather assistant. Always call the get_weather tool, then "
                         "answer in one sentence.")
    triage_instructions: str = ("You are a triage agent. Hand weather questions to the weather "
                                "agent.")
    #: the name the apps give their agent where the framework takes one (an agents filter
    #: by this name must keep their interactions)
    agent_name: str = "weather_bot"

    def structured_answer(self, index: int) -> str:
        """The answer as the JSON object a structured-output run asks for (WeatherReport:
        ``city``, ``summary``, ``temperature_c``)."""
        temperature = (21, 14, 18)[index]
        return json.dumps({"city": self.cities[index], "summary": self.answers[index],
                           "temperature_c": temperature})

    def tool_result(self, city: str) -> str:
        index = self.cities.index(city) if city in self.cities else 0
        weather = ("sunny, 21 C", "raining, 14 C", "cloudy, 18 C")[index]
        return f"Weather report for {city}: {weather}."


@dataclass
class Plan:
    """How this framework wants its turns: the tool to call, the tool that carries the final
    answer (smolagents' ``final_answer``), the handoff tool of a triage agent."""

    tool: str = "get_weather"
    final_tool: str | None = None
    handoff_tool: str | None = None
    requests: list[Mapping[str, Any]] = field(default_factory=list)


def _texts(messages: Sequence[Any]) -> list[tuple[str, str]]:
    """``(role, text)`` of chat messages, or of Responses API input items (a tool's output
    item reads as a ``tool`` message)."""
    out = []
    for message in messages:
        if not isinstance(message, Mapping):
            continue
        content = message.get("content")
        if message.get("type") == "function_call_output":
            out.append(("tool", str(message.get("output", ""))))
            continue
        if isinstance(content, list):
            content = "\n".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
        out.append((str(message.get("role", "")), str(content or "")))
    return out


def _tool_names(body: Mapping[str, Any]) -> list[str]:
    names = []
    for tool in body.get("tools") or ():
        if not isinstance(tool, Mapping):
            continue
        function = tool.get("function")
        name = function.get("name") if isinstance(function, Mapping) else tool.get("name")
        if name:
            names.append(str(name))
    return names


class AppLLM:
    """The scripted agent LLM (see the module docstring)."""

    def __init__(self, scenario: Scenario, plan: Plan | None = None) -> None:
        self.scenario = scenario
        self.plan = plan or Plan()
        self._httpd: ThreadingHTTPServer | None = None
        self._count = 0
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def start(self) -> AppLLM:
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()

    # -- the scenario ----------------------------------------------------------------------
    def decide(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """The assistant message for one request: a tool call, a handoff or the answer."""
        self.plan.requests.append(body)
        scenario = self.scenario
        items = body.get("messages") or body.get("input") or []
        texts = _texts([{"role": "user", "content": items}] if isinstance(items, str) else items)
        joined = "\n".join(text for _, text in texts)
        index = next((i for i, q in enumerate(scenario.questions) if q in joined), 0)
        city = scenario.cities[index]
        tools = _tool_names(body)
        if scenario.tool_result(city) in joined:
            answer = (scenario.structured_answer(index) if _asks_for_schema(body)
                      else scenario.answers[index])
            if self.plan.final_tool and self.plan.final_tool in tools:
                return self._call(self.plan.final_tool, {"answer": answer})
            return {"role": "assistant", "content": answer}
        handoff = next((t for t in tools if t.startswith("transfer_to_")), None)
        if handoff is not None and self.plan.tool not in tools:
            return self._call(handoff, {})
        return self._call(self.plan.tool, {"city": city})

    def _call(self, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        with self._lock:
            self._count += 1
            call_id = f"call_{self._count}"
        return {"role": "assistant", "content": None, "tool_calls": [{
            "id": call_id, "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)}}]}


def _asks_for_schema(body: Mapping[str, Any]) -> bool:
    """Whether the request asks for an answer fitting a JSON schema: Chat Completions'
    ``response_format`` or the Responses API's ``text.format``, of type ``json_schema``."""
    text = body.get("text")
    formats = [body.get("response_format"), text.get("format") if isinstance(text, Mapping)
               else None]
    return any(isinstance(f, Mapping) and f.get("type") == "json_schema" for f in formats)


def _completion(message: Mapping[str, Any], model: str) -> bytes:
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    return json.dumps({
        "id": f"chatcmpl-{int(time.time() * 1e6)}", "object": "chat.completion",
        "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 42, "completion_tokens": 12, "total_tokens": 54}}).encode()


def _response(message: Mapping[str, Any], model: str, request: Mapping[str, Any]) -> bytes:
    """The Responses API's answer (``POST /v1/responses``, the OpenAI Agents SDK's default)."""
    stamp = int(time.time() * 1e6)
    if message.get("tool_calls"):
        output = [{"type": "function_call", "id": f"fc_{call['id']}", "call_id": call["id"],
                   "name": call["function"]["name"], "arguments": call["function"]["arguments"],
                   "status": "completed"} for call in message["tool_calls"]]
    else:
        output = [{"type": "message", "id": f"msg_{stamp}", "status": "completed",
                   "role": "assistant", "content": [{"type": "output_text", "annotations": [],
                                                     "text": str(message.get("content"))}]}]
    return json.dumps({
        "id": f"resp_{stamp}", "object": "response", "created_at": int(time.time()),
        "model": model, "status": "completed", "output": output, "parallel_tool_calls": True,
        "tool_choice": "auto", "tools": request.get("tools") or [],
        # the real API echoes the request's instructions and text format (instrumentations
        # read them there)
        **({"text": request["text"]} if isinstance(request.get("text"), Mapping) else {}),
        "instructions": request.get("instructions"), "usage": {
            "input_tokens": 42, "output_tokens": 12, "total_tokens": 54,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0}}}).encode()


def _chunks(message: Mapping[str, Any], model: str) -> list[bytes]:
    base = {"id": f"chatcmpl-{int(time.time() * 1e6)}", "object": "chat.completion.chunk",
            "created": int(time.time()), "model": model}
    events: list[dict[str, Any]] = [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                     "finish_reason": None}]
    if message.get("tool_calls"):
        for position, call in enumerate(message["tool_calls"]):
            events.append({"index": 0, "finish_reason": None, "delta": {"tool_calls": [{
                "index": position, "id": call["id"], "type": "function",
                "function": {"name": call["function"]["name"],
                             "arguments": call["function"]["arguments"]}}]}})
        finish = "tool_calls"
    else:
        text = str(message.get("content") or "")
        middle = len(text) // 2
        events += [{"index": 0, "delta": {"content": part}, "finish_reason": None}
                   for part in (text[:middle], text[middle:])]
        finish = "stop"
    events.append({"index": 0, "delta": {}, "finish_reason": finish})
    out = [json.dumps({**base, "choices": [event]}).encode() for event in events]
    out.append(json.dumps({**base, "choices": [], "usage": {
        "prompt_tokens": 42, "completion_tokens": 12, "total_tokens": 54}}).encode())
    return out


def _handler(llm: AppLLM) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0") or 0))
            body = json.loads(raw or b"{}")
            message = llm.decide(body)
            model = str(body.get("model", "app-model"))
            if body.get("stream"):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                for chunk in _chunks(message, model):
                    self.wfile.write(b"data: " + chunk + b"\n\n")
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True
                return
            responses = self.path.rstrip("/").endswith("/responses")
            payload = _response(message, model, body) if responses else _completion(message, model)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self) -> None:  # /v1/models, asked by some clients
            payload = json.dumps({"object": "list", "data": [
                {"id": "app-model", "object": "model", "owned_by": "test"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler
