"""The app of the ``exported_content: strip`` tests: an agent run whose conversation is on its
own span (GenAI attributes), on the chat span and log records of the real openai-v2
instrumentation, and on spans of the other conventions capture reads.

``python -m tests.strip_app LLM_URL`` runs it under the global providers (zero-code) and
prints the scoring decisions.
"""

from __future__ import annotations

import json
import sys
from typing import Any

PROMPT = "What is the capital of Zanzibaria?"
ANSWER = "Zanzibaria's capital is Quuxtown."
SYSTEM = "You are the Zanzibaria geography desk."


def run_agent(tracer: Any, llm_url: str) -> None:
    import openai

    client = openai.OpenAI(base_url=llm_url, api_key="app-key")
    attributes = {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "geo",
        "gen_ai.system_instructions": json.dumps([{"type": "text", "content": SYSTEM}]),
        "gen_ai.input.messages": json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": PROMPT}]}]),
        "gen_ai.output.messages": json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": ANSWER}]}]),
    }
    with tracer.start_as_current_span("invoke_agent geo", attributes=attributes):
        client.chat.completions.create(model="gpt-4o-mini", messages=[
            {"role": "system", "content": SYSTEM}, {"role": "user", "content": PROMPT}])
        with tracer.start_as_current_span("retrieval", attributes={
                "openinference.span.kind": "RETRIEVER", "input.value": PROMPT,
                "output.value": "Zanzibaria hush-hush notes",
                "traceloop.entity.input": PROMPT, "traceloop.entity.output": ANSWER,
                "llm.input_messages.0.message.content": PROMPT}):
            pass


def main(llm_url: str) -> None:
    from opentelemetry import trace

    from otel_scorers.zero_code import ScoringInstrumentor

    run_agent(trace.get_tracer("app"), llm_url)
    processor = ScoringInstrumentor._processor
    if processor is None:
        print("scoring was not enabled")
        return
    processor.force_flush(60_000)
    print("stats", json.dumps(processor.stats()), "scored" if all(
        s.get("scored") for s in processor.stats().values()) else "NOT scored")


if __name__ == "__main__":
    main(sys.argv[1])
