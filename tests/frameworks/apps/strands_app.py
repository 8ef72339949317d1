"""Strands Agents with its native OpenTelemetry tracing (``strands.telemetry``), which traces
through the global tracer provider (its ``Tracer`` singleton reads
``trace_api.get_tracer_provider()`` and ``OTEL_SEMCONV_STABILITY_OPT_IN`` when first created).

Variants: ``events`` (the default conventions: the conversation on span events such as
``gen_ai.user.message`` / ``gen_ai.choice``), ``operation_details`` (the opt-in latest GenAI
conventions, ``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental``: the conversation on
``gen_ai.client.inference.operation.details`` span events).
"""

from __future__ import annotations

import os

from harness import App, Expected


def run(variant: str, app: App) -> Expected:
    if variant == "operation_details":
        os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
    else:
        os.environ.pop("OTEL_SEMCONV_STABILITY_OPT_IN", None)
    import strands
    from strands.models.openai import OpenAIModel

    scenario = app.scenario

    @strands.tool
    def get_weather(city: str) -> str:
        """The current weather in a city.

        Args:
            city: The city.
        """
        return scenario.tool_result(city)

    model = OpenAIModel(client_args={"base_url": app.llm.url, "api_key": "app-key"},
                        model_id="gpt-4o-mini")
    outputs = []
    for question in scenario.questions:
        # a fresh agent per run: each question its own conversation
        agent = strands.Agent(model=model, tools=[get_weather],
                              system_prompt=scenario.instructions, callback_handler=None)
        outputs.append(str(agent(question)).strip())
    assert outputs == list(scenario.answers), outputs
    return Expected(list(scenario.questions), list(scenario.answers),
                    system=scenario.instructions)
