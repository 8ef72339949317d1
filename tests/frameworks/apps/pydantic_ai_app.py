"""Pydantic AI with its native OpenTelemetry instrumentation (``Agent.instrument_all`` with
``InstrumentationSettings`` on the harness's tracer provider, the default data format version).

Variants: ``content`` (``include_content=True``), ``no_content`` (``include_content=False``:
prompts, completions and tool arguments/results left out of the telemetry), ``structured``
(content, and the answer a ``WeatherReport`` object asked for with ``NativeOutput``: OpenAI's
``response_format`` JSON schema, recorded in ``model_request_parameters.output_object``).
"""

from __future__ import annotations

from harness import App, Expected


def run(variant: str, app: App) -> Expected:
    from pydantic_ai import Agent, InstrumentationSettings
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    content = variant in ("content", "structured")
    # the default data format version (5 in pydantic-ai-slim 2.68)
    Agent.instrument_all(InstrumentationSettings(tracer_provider=app.tracer_provider,
                                                 include_content=content))
    scenario = app.scenario

    def get_weather(city: str) -> str:
        """The current weather in a city."""
        return scenario.tool_result(city)

    model = OpenAIChatModel("gpt-4o-mini",
                            provider=OpenAIProvider(base_url=app.llm.url, api_key="app-key"))
    if variant == "structured":
        from pydantic import BaseModel
        from pydantic_ai import NativeOutput

        class WeatherReport(BaseModel):
            city: str
            summary: str
            temperature_c: int

        agent = Agent(model, instructions=scenario.instructions, tools=[get_weather],
                      output_type=NativeOutput(WeatherReport))
        reports = [agent.run_sync(question).output for question in scenario.questions]
        assert [r.summary for r in reports] == list(scenario.answers), reports
        answers = [scenario.structured_answer(i) for i in range(len(scenario.questions))]
        return Expected(list(scenario.questions), answers, system=scenario.instructions)
    agent = Agent(model, instructions=scenario.instructions, tools=[get_weather])
    outputs = [str(agent.run_sync(question).output) for question in scenario.questions]
    assert outputs == list(scenario.answers), outputs
    if content:
        return Expected(list(scenario.questions), list(scenario.answers),
                        system=scenario.instructions)
    return Expected(list(scenario.questions), list(scenario.answers), content=False,
                    reason="no_content", fix="include_content=True")
