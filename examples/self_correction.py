"""The self-correction loop: score an answer and feed the judge's reasons back until complete.

    python examples/self_correction.py

``self_correct`` runs the agent, scores its output with the given scorers and, while the task is
not complete (every score at its maximum; ``strategy="any"``: one of them), sends the scorers'
reasons back as the next user turn, up to ``max_steps`` agent calls (the seed's isTaskComplete).
The agent here is a stand-in that revises deterministically from the feedback; put your LLM call
in its place (a function from the chat so far to the reply text, sync or async).
"""

from __future__ import annotations

from otel_scorers import RubricScorer, self_correct

QUESTION = "How do I rotate my API key without downtime?"
RUBRIC = """- Says to create the new key before revoking the old one
- Says to deploy the new key to every service
- Says to revoke the old key last"""

DRAFTS = [
    "Create a new key in Settings > API keys and revoke the old one.",
    "Create a new key in Settings > API keys, deploy it to every service that uses the old "
    "one, and only then revoke the old key.",
]


def agent(messages: list[dict[str, str]]) -> str:
    """A stand-in agent: its first draft misses a step; any feedback gets the full answer."""
    revisions = sum(1 for m in messages if m["role"] == "user" and "Revise" in m["content"])
    return DRAFTS[min(revisions, len(DRAFTS) - 1)]


def main() -> None:
    outcome = self_correct(agent, QUESTION, scorers=[RubricScorer(criteria=RUBRIC)],
                           max_steps=3, system="You are a security-minded support agent.")
    for number, step in enumerate(outcome.steps, start=1):
        result = step.results[0]
        state = f"error {result.error.type}" if result.error else f"{result.label}"
        print(f"step {number}: {state} - {step.output}")
        if not step.complete and result.error is None:
            print("  feedback:", result.reason.splitlines()[-1])
    print(f"complete: {outcome.complete} after {len(outcome.steps)} step(s)")


if __name__ == "__main__":
    main()
