"""smolagents: a ``ToolCallingAgent`` with one tool, its model an ``OpenAIServerModel``.

Variant ``openinference:tool_calling``: openinference-instrumentation-smolagents. The agent gives
its final answer by calling its ``final_answer`` tool (see :func:`plan`); its system prompt is
smolagents' own long template with the scenario's instructions inserted into it.
"""

from __future__ import annotations

import os

from harness import App, Expected
from llm import Plan


def plan(variant: str) -> Plan:
    return Plan(final_tool="final_answer")


def run(variant: str, app: App) -> Expected:
    instrumentation, shape = variant.split(":")
    assert (instrumentation, shape) == ("openinference", "tool_calling"), variant
    os.environ["OPENAI_API_KEY"] = "app-key"
    from openinference.instrumentation.smolagents import SmolagentsInstrumentor

    SmolagentsInstrumentor().instrument(tracer_provider=app.tracer_provider)
    from smolagents import OpenAIServerModel, ToolCallingAgent, tool

    scenario = app.scenario

    @tool
    def get_weather(city: str) -> str:
        """The current weather in a city.

        Args:
            city: The city to report the weather of.
        """
        return scenario.tool_result(city)

    model = OpenAIServerModel(model_id="gpt-4o-mini", api_base=app.llm.url, api_key="app-key")
    agent = ToolCallingAgent(tools=[get_weather], model=model, name=scenario.agent_name,
                             instructions=scenario.instructions, verbosity_level=0)
    outputs = [str(agent.run(question)) for question in scenario.questions]
    assert outputs == list(scenario.answers), outputs
    return Expected(list(scenario.questions), list(scenario.answers),
                    system=scenario.instructions)
