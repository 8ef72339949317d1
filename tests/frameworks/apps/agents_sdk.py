"""The OpenAI Agents SDK: one agent with a tool, or a triage agent handing off to it.

Variants ``<instrumentation>:<single|handoff|structured>`` (``structured``: the one agent
with ``output_type=WeatherReport``, the Responses API's ``text.format`` JSON schema):
``openinference``
(openinference-instrumentation-openai-agents), ``openllmetry`` (Traceloop's
opentelemetry-instrumentation-openai-agents), ``otel_v2`` (the OpenTelemetry GenAI
instrumentation, content on span attributes).
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

from harness import App, Expected


def instrument(name: str, app: App) -> None:
    if name == "openinference":
        from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor
    elif name == "openllmetry":
        os.environ.setdefault("TRACELOOP_TRACE_CONTENT", "true")
        from opentelemetry.instrumentation.openai_agents import OpenAIAgentsInstrumentor
    else:
        os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
        os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "SPAN_ONLY"
        from opentelemetry.instrumentation.openai_agents import OpenAIAgentsInstrumentor
    import agents

    agents.set_trace_processors([])  # not the SDK's own exporter to api.openai.com
    OpenAIAgentsInstrumentor().instrument(tracer_provider=app.tracer_provider)


def run(variant: str, app: App) -> Expected:
    instrumentation, shape = variant.split(":")
    os.environ["OPENAI_API_KEY"] = "app-key"
    instrument(instrumentation, app)
    import agents
    from openai import AsyncOpenAI

    scenario = app.scenario
    # the SDK's default model API (Responses), its client pointed at the scripted LLM
    agents.set_default_openai_client(AsyncOpenAI(base_url=app.llm.url, api_key="app-key"),
                                     use_for_tracing=False)
    model = "gpt-4o-mini"

    @agents.function_tool
    def get_weather(city: str) -> str:
        """The current weather in a city."""
        return scenario.tool_result(city)

    output: dict[str, Any] = {}
    if shape == "structured":
        from pydantic import BaseModel

        class WeatherReport(BaseModel):
            city: str
            summary: str
            temperature_c: int

        output["output_type"] = WeatherReport
    weather = agents.Agent(name="weather", instructions=scenario.instructions, model=model,
                           tools=[get_weather], **output)
    entry: Any = weather
    if shape == "handoff":
        entry = agents.Agent(name="triage", instructions=scenario.triage_instructions,
                             model=model, handoffs=[weather])

    async def main() -> list[Any]:
        return [(await agents.Runner.run(entry, question)).final_output
                for question in scenario.questions]

    outputs = asyncio.run(main())
    answers = list(scenario.answers)
    if shape == "structured":  # the final outputs are WeatherReports; the answers their JSON
        answers = [scenario.structured_answer(i) for i in range(len(scenario.questions))]
        assert [json.loads(answer) for answer in answers] == [
            report.model_dump() for report in outputs], outputs
    else:
        assert [str(output) for output in outputs] == answers, outputs
    # the OTel v2 instrumentation (0.1.0) records no instructions: the SDK sends them apart
    # from the Responses API input, where it looks for system messages
    return Expected(list(scenario.questions), answers,
                    system=None if instrumentation == "otel_v2" else scenario.instructions)
