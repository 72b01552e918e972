"""A LangChain v1 agent with toolkeep as middleware (toolkeep.integrations.langchain).

Runs offline: the model is LangChain's GenericFakeChatModel playing a script (read a file six
times, then stop), and prints the size of every tool result each request sends it. Under the
default, cache-aware policy every read of these six reaches the model whole (6,260 chars each):
in a session this short, shortening an old read would cost more in prompt-cache rewrites than
it saves, and the policy holds reads a turn longer than other results. The agent's state keeps
them whole too; only the messages sent are ever shortened. Run with ``TOOLKEEP_POLICY=spec`` to
see old reads shortened by age instead (the last request then sends ``[90, 90, 2576, 2576,
6260, 6260]``). With a real model, pass e.g. ``"anthropic:claude-sonnet-4-5"`` to
``create_agent`` instead.

    pip install 'toolkeep[langchain]'
    python examples/langchain_agent.py
"""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import tool

from toolkeep.integrations.langchain import ToolkeepMiddleware


@tool
def read_file(path: str) -> str:
    """Read a source file."""
    return "".join(f"def step_{n}(state):  # {path}\n    return state + {n}\n\n" for n in range(120))


class ScriptedModel(GenericFakeChatModel):
    """The fake model, printing the size of each tool result it is sent."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        sizes = [len(str(m.content)) for m in messages if isinstance(m, ToolMessage)]
        print(f"model is sent tool results of {sizes} chars")
        return super()._generate(messages, *args, **kwargs)


def main() -> None:
    reads = [
        AIMessage("", tool_calls=[{"name": "read_file", "args": {"path": f"m{n}.py"}, "id": f"c{n}"}])
        for n in range(6)
    ]
    model = ScriptedModel(messages=iter([*reads, AIMessage("All six files read.")]))

    with ToolkeepMiddleware() as toolkeep_middleware:
        agent = create_agent(model, tools=[read_file], middleware=[toolkeep_middleware])
        state = agent.invoke({"messages": [{"role": "user", "content": "Read m0.py to m5.py."}]})

    kept = [len(str(m.content)) for m in state["messages"] if isinstance(m, ToolMessage)]
    print(f"the agent's state keeps them whole: {kept} chars")
    print("model:", state["messages"][-1].content)


if __name__ == "__main__":
    main()
