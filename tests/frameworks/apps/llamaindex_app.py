"""LlamaIndex: a workflow ``FunctionAgent`` with one tool, its LLM an ``OpenAILike`` chat model.

Variant ``openinference:function_agent``: openinference-instrumentation-llama-index (spans from
LlamaIndex's own instrumentation dispatcher: the workflow run, its steps, the LLM calls, the
tool calls).
"""

from __future__ import annotations

import asyncio
import os

from harness import App, Expected


def run(variant: str, app: App) -> Expected:
    instrumentation, shape = variant.split(":")
    assert (instrumentation, shape) == ("openinference", "function_agent"), variant
    os.environ["OPENAI_API_KEY"] = "app-key"
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

    LlamaIndexInstrumentor().instrument(tracer_provider=app.tracer_provider)
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.tools import FunctionTool
    from llama_index.llms.openai_like import OpenAILike

    scenario = app.scenario

    def get_weather(city: str) -> str:
        """The current weather in a city."""
        return scenario.tool_result(city)

    llm = OpenAILike(model="gpt-4o-mini", api_base=app.llm.url, api_key="app-key",
                     is_chat_model=True, is_function_calling_model=True)
    agent = FunctionAgent(tools=[FunctionTool.from_defaults(get_weather)], llm=llm,
                          system_prompt=scenario.instructions, name=scenario.agent_name)

    async def main() -> list[str]:
        outputs = []
        for question in scenario.questions:
            result = await agent.run(user_msg=question)
            outputs.append(str(result.response.content))
        return outputs

    outputs = asyncio.run(main())
    assert outputs == list(scenario.answers), outputs
    return Expected(list(scenario.questions), list(scenario.answers),
                    system=scenario.instructions)
