"""LangGraph: one tool-calling agent, built by LangChain's ``create_agent`` or by LangGraph's
prebuilt ``create_react_agent``, its model ``langchain_openai.ChatOpenAI``.

Variants ``<instrumentation>:<create_agent|react>``: ``openinference``
(openinference-instrumentation-langchain), ``openllmetry`` (Traceloop's
opentelemetry-instrumentation-langchain, content on: ``TRACELOOP_TRACE_CONTENT=true``).
"""

from __future__ import annotations

import os
import warnings
from typing import Any

from harness import App, Expected


def instrument(name: str, app: App) -> None:
    if name == "openinference":
        from openinference.instrumentation.langchain import LangChainInstrumentor

        LangChainInstrumentor().instrument(tracer_provider=app.tracer_provider)
    elif name == "openllmetry":
        os.environ["TRACELOOP_TRACE_CONTENT"] = "true"
        from opentelemetry.instrumentation.langchain import LangchainInstrumentor

        LangchainInstrumentor().instrument(tracer_provider=app.tracer_provider)
    else:
        raise ValueError(f"unknown instrumentation {name!r}")


def run(variant: str, app: App) -> Expected:
    instrumentation, shape = variant.split(":")
    os.environ["OPENAI_API_KEY"] = "app-key"
    os.environ["LANGSMITH_TRACING"] = "false"  # no LangSmith tracer to api.smith.langchain.com
    instrument(instrumentation, app)
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    scenario = app.scenario

    @tool
    def get_weather(city: str) -> str:
        """The current weather in a city."""
        return scenario.tool_result(city)

    model = ChatOpenAI(model="gpt-4o-mini", base_url=app.llm.url, api_key="app-key")
    agent: Any
    if shape == "create_agent":
        from langchain.agents import create_agent

        agent = create_agent(model=model, tools=[get_weather],
                             system_prompt=scenario.instructions, name=scenario.agent_name)
    elif shape == "react":
        with warnings.catch_warnings():  # deprecated in LangGraph 1 for create_agent
            warnings.simplefilter("ignore")
            from langgraph.prebuilt import create_react_agent

            agent = create_react_agent(model, tools=[get_weather], prompt=scenario.instructions,
                                       name=scenario.agent_name)
    else:
        raise ValueError(f"unknown shape {shape!r}")

    outputs = []
    for question in scenario.questions:
        state = agent.invoke({"messages": [{"role": "user", "content": question}]})
        outputs.append(str(state["messages"][-1].content))
    assert outputs == list(scenario.answers), outputs
    return Expected(list(scenario.questions), list(scenario.answers),
                    system=scenario.instructions)
