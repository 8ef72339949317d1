"""An app traced by opentelemetry-instrumentation-openai-v2 on its legacy path: content as the
older per-message log events (``gen_ai.system.message``, ``gen_ai.user.message``,
``gen_ai.choice``...), which instrumentations built before the GenAI ``*.operation.details``
event still emit. With ``opentelemetry-util-genai`` 1.1b0 (the release openai-v2 2.4b0 imports)
the package's experimental switch is hard-wired on, so the legacy path is reached by turning that
switch off before ``instrument()``; the wrappers, events and logger are the package's own. Run
by test_log_events.py in its own process.

    python per_message_events_app.py JUDGE_URL APP_LLM_URL   -> one JSON line: events, stats
"""

from __future__ import annotations

import json
import os
import sys

os.environ.pop("OTEL_SEMCONV_STABILITY_OPT_IN", None)
os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "true"
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import openai
from opentelemetry.instrumentation import openai_v2
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

import otel_scorers
from otel_scorers import PromptAlignmentScorer, RubricScorer
from otel_scorers.judge.client import JudgeClient
from otel_scorers.testing import CapturedTelemetry


def main(judge_url: str, app_url: str) -> None:
    telemetry = CapturedTelemetry.create()
    openai_v2.is_experimental_mode = lambda: False  # type: ignore[attr-defined]
    OpenAIInstrumentor().instrument(tracer_provider=telemetry.tracer_provider,
                                    logger_provider=telemetry.logger_provider)
    judge = JudgeClient("openai/scripted-judge", api_base=judge_url, api_key="k")
    processor = otel_scorers.install(
        tracer_provider=telemetry.tracer_provider, logger_provider=telemetry.logger_provider,
        scorers=[RubricScorer(judge, "- names the capital"), PromptAlignmentScorer(judge)],
        meter_provider=telemetry.meter_provider)
    client = openai.OpenAI(base_url=app_url, api_key="app-key")
    with telemetry.tracer().start_as_current_span("invoke_agent geo", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "geo"}):
        messages = [{"role": "system", "content": "You are a geography assistant."},
                    {"role": "user", "content": "What is the capital of France?"}]
        first = client.chat.completions.create(model="gpt-4o-mini", messages=messages)
        messages += [{"role": "assistant", "content": first.choices[0].message.content or ""},
                     {"role": "user", "content": "Tool result: Paris"}]
        client.chat.completions.create(model="gpt-4o-mini", messages=messages)
    processor.force_flush(60_000)
    events = [r for r in telemetry.logs() if (r.log_record.event_name or "").startswith("gen_ai.")
              and r.log_record.event_name != "gen_ai.evaluation.result"]
    print(json.dumps({"events": len(events), "stats": processor.stats()}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
