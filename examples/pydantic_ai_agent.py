"""A pydantic-ai agent with toolkeep as a history processor (toolkeep.integrations.pydantic_ai).

Runs offline: the model is pydantic-ai's FunctionModel playing a script: fetch a big page, recall
it by the key in its shortened result, then answer. With a real model, pass e.g.
``"anthropic:claude-sonnet-4-5"`` to ``Agent`` instead.

    pip install 'toolkeep[pydantic-ai]'
    python examples/pydantic_ai_agent.py
"""

from __future__ import annotations

import re

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from toolkeep.integrations.pydantic_ai import ToolkeepHistory


def fetch(url: str) -> str:
    """Fetch a web page."""
    return "".join(f"<tr><td>{url}</td><td>row {n}</td></tr>\n" for n in range(1_500))


def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The fake model: fetch, then recall what was shortened, then report what came back."""
    returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
    if not returns:
        return ModelResponse(parts=[ToolCallPart("fetch", {"url": "https://example.test"})])
    text = returns[-1].content
    assert isinstance(text, str)
    print(f"model is sent the {returns[-1].tool_name} result: {len(text):,} chars")
    if returns[-1].tool_name == "fetch" and (key := re.search(r"<<ccr:([0-9a-f]{16})>>", text)):
        return ModelResponse(parts=[ToolCallPart("recall", {"key": key[1], "start_line": 1, "end_line": 3})])
    return ModelResponse(parts=[TextPart(f"lines 1-3 of the page: {text.splitlines()[:3]}")])


def main() -> None:
    with ToolkeepHistory() as history:
        agent = Agent(FunctionModel(script), tools=[fetch], capabilities=history.capabilities())
        result = agent.run_sync("What does the page list?")
    print("model:", result.output)


if __name__ == "__main__":
    main()
