"""The cases of the framework matrix: case name -> (virtual environment, app module, variant).

Plain data (read by the harness in a framework's environment and by the tests here).
"""

from __future__ import annotations

from collections.abc import Mapping

#: case -> (virtual environment, app module, variant)
CASES: Mapping[str, tuple[str, str, str]] = {
    "agents_sdk-openinference-single": ("agents", "agents_sdk", "openinference:single"),
    "agents_sdk-openinference-handoff": ("agents", "agents_sdk", "openinference:handoff"),
    "agents_sdk-openinference-structured": ("agents", "agents_sdk",
                                            "openinference:structured"),
    "agents_sdk-openllmetry-single": ("agents", "agents_sdk", "openllmetry:single"),
    "agents_sdk-openllmetry-handoff": ("agents", "agents_sdk", "openllmetry:handoff"),
    "agents_sdk-otel_v2-single": ("agents_v2", "agents_sdk", "otel_v2:single"),
    "agents_sdk-otel_v2-handoff": ("agents_v2", "agents_sdk", "otel_v2:handoff"),
    "langgraph-openinference-create_agent": ("langgraph", "langgraph_app",
                                             "openinference:create_agent"),
    "langgraph-openinference-react": ("langgraph", "langgraph_app", "openinference:react"),
    "langgraph-openllmetry-create_agent": ("langgraph", "langgraph_app",
                                           "openllmetry:create_agent"),
    "langgraph-openllmetry-react": ("langgraph", "langgraph_app", "openllmetry:react"),
    "llamaindex-openinference-function_agent": ("llamaindex", "llamaindex_app",
                                                "openinference:function_agent"),
    "strands-native-events": ("strands", "strands_app", "events"),
    "strands-native-operation_details": ("strands", "strands_app", "operation_details"),
    "smolagents-openinference-tool_calling": ("smolagents", "smolagents_app",
                                              "openinference:tool_calling"),
    "pydantic_ai-native-content": ("pydantic_ai", "pydantic_ai_app", "content"),
    "pydantic_ai-native-no_content": ("pydantic_ai", "pydantic_ai_app", "no_content"),
    "pydantic_ai-native-structured": ("pydantic_ai", "pydantic_ai_app", "structured"),
    "adk-native-content": ("adk", "adk_app", "content"),
    "adk-native-no_content": ("adk", "adk_app", "no_content"),
}
