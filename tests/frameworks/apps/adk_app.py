"""Google ADK with its native OpenTelemetry tracing (the global tracer and logger providers),
its LLM through LiteLLM (``LiteLlm("openai/gpt-4o-mini")``) pointed at the scripted LLM.

ADK 2.x emits the GenAI-semconv-aligned schema (``ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN`` unset:
version 2): ``invoke_agent``, ``generate_content`` (inference) and ``execute_tool`` spans. Their
content is gated by ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` (``NO_CONTENT`` by
default; ``SPAN_ONLY`` / ``SPAN_AND_EVENT`` put it on the spans). The legacy knob
``ADK_CAPTURE_MESSAGE_CONTENT_IN_SPANS`` (default on) only gates the schema-1 ``gcp.vertex.agent.*``
attributes.

Variants: ``content`` (``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY``),
``no_content`` (the default: nothing captured).
"""

from __future__ import annotations

import asyncio
import os

from harness import App, Expected

CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


def run(variant: str, app: App) -> Expected:
    if variant == "content":
        os.environ[CONTENT_ENV] = "SPAN_ONLY"
    else:
        os.environ.pop(CONTENT_ENV, None)
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    os.environ["OPENAI_API_KEY"] = "app-key"
    from google.adk.agents import LlmAgent
    from google.adk.models.lite_llm import LiteLlm
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    scenario = app.scenario

    def get_weather(city: str) -> str:
        """The current weather in a city."""
        return scenario.tool_result(city)

    model = LiteLlm(model="openai/gpt-4o-mini", api_base=app.llm.url, api_key="app-key")
    agent = LlmAgent(name="weather", model=model, instruction=scenario.instructions,
                     tools=[get_weather])
    runner = InMemoryRunner(agent=agent, app_name="weather_app")

    async def ask(question: str) -> str:
        session = await runner.session_service.create_session(app_name="weather_app",
                                                              user_id="user")
        final = ""
        async for event in runner.run_async(
                user_id="user", session_id=session.id,
                new_message=types.Content(role="user", parts=[types.Part(text=question)])):
            if event.is_final_response() and event.content and event.content.parts:
                final = "".join(part.text or "" for part in event.content.parts)
        return final

    async def main() -> list[str]:
        outputs = [await ask(question) for question in scenario.questions]
        await runner.close()
        return outputs

    outputs = asyncio.run(main())
    assert outputs == list(scenario.answers), outputs
    if variant == "content":
        return Expected(list(scenario.questions), list(scenario.answers),
                        system=scenario.instructions)
    return Expected(list(scenario.questions), list(scenario.answers), content=False,
                    reason="no_content", fix=CONTENT_ENV)
