"""A tool's declared cap (``@toolkeep.result_cap(N)``) through each framework's tool wrapper, with
the real framework running the tool: the output enters the framework's history at most ``N``
chars long, marker included, the model is sent no more, and ``recall`` gives the original back
byte-exact; a tool that declares nothing enters whole. Sizes from 100 to 200,000 chars."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import toolkeep
from toolkeep import Config, Session
from toolkeep.shorten import CCR_MARKER_RE

from .strategies import property_settings

# the budget is set out of the way: only the caps cut
CONFIG = Config(max_result_chars=400_000, turn_budget_chars=800_000)
POLICIES = ["spec", "economy"]
"""The policies whose caps are sizes (``seed`` keeps ChatCLI's fixed cap shape)."""

sizes = st.tuples(st.integers(100, 200_000), st.integers(0, 200_000)).map(lambda t: (t[0], t[0] + t[1]))
"""``(cap, output size)``: an output at or over its cap."""
EXTREMES = [(100, 101), (100, 200_000), (200_000, 200_000), (200_000, 200_001), (1_000, 4_000)]


def output_of(size: int) -> str:
    return "".join(f"line {n}: {'é' if n % 7 else 'x'}\n" for n in range(size // 8 + 1))[:size]


def tools_for(cap: int, size: int) -> tuple[Callable[[], str], Callable[[], str]]:
    """``big`` (declares ``cap``) and ``plain`` (declares nothing), each returning ``size`` chars."""

    @toolkeep.result_cap(cap)
    def big() -> str:
        """Return a big output."""
        return output_of(size)

    def plain() -> str:
        """Return an output as long."""
        return output_of(size).upper()

    return big, plain


def check(entered: dict[str, str], sent: list[str], cap: int, size: int, session: Session) -> None:
    """The history's outputs and what the model was sent, for a ``big`` and a ``plain`` call
    (``plain``, over the config's cap, is cut in the model's view only)."""
    text = output_of(size)
    assert entered["plain"] == text.upper()
    big = entered["big"]
    if size <= cap:
        assert big == text
        return
    assert len(big) <= cap and "[TRUNCATED " in big
    key = CCR_MARKER_RE.search(big)
    assert key is not None and session.recall(key[1]) == text
    shown = [s for s in sent if key[0] in s]
    assert shown and all(len(s) <= cap for s in shown)  # the model is sent no more


def run_langchain(cap: int, size: int, session: Session, asynchronous: bool = False) -> None:
    pytest.importorskip("langchain.agents")
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
    from langchain_core.tools import StructuredTool

    from toolkeep.integrations.langchain import ToolkeepMiddleware

    sent: list[str] = []

    class Model(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
            sent.extend(
                m.content for m in messages if isinstance(m, ToolMessage) and isinstance(m.content, str)
            )
            return super()._generate(messages, *args, **kwargs)

    calls = [{"name": "big", "args": {}, "id": "c1"}, {"name": "plain", "args": {}, "id": "c2"}]
    model = Model(messages=iter([AIMessage(content="", tool_calls=calls), AIMessage(content="done")]))
    big, plain = tools_for(cap, size)
    tools = [StructuredTool.from_function(big), StructuredTool.from_function(plain)]
    agent = create_agent(model, tools=tools, middleware=[ToolkeepMiddleware(session)])
    start = {"messages": [HumanMessage("go")]}
    state = asyncio.run(agent.ainvoke(start)) if asynchronous else agent.invoke(start)
    entered = {m.name: m.content for m in state["messages"] if isinstance(m, ToolMessage)}
    check(entered, sent, cap, size, session)


def run_pydantic_ai(cap: int, size: int, session: Session, asynchronous: bool = False) -> None:
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import Agent
    from pydantic_ai import messages as pam
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from toolkeep.integrations.pydantic_ai import ToolkeepHistory

    sent: list[str] = []

    def respond(messages: list[pam.ModelMessage], info: AgentInfo) -> pam.ModelResponse:
        returns = [
            p.content
            for m in messages
            if isinstance(m, pam.ModelRequest)
            for p in m.parts
            if isinstance(p, pam.ToolReturnPart)
        ]
        if not returns:
            return pam.ModelResponse(
                parts=[
                    pam.ToolCallPart("big", {}, tool_call_id="c1"),
                    pam.ToolCallPart("plain", {}, tool_call_id="c2"),
                ]
            )
        sent.extend(r for r in returns if isinstance(r, str))
        return pam.ModelResponse(parts=[pam.TextPart("done")])

    big, plain = tools_for(cap, size)
    agent = Agent(
        FunctionModel(respond), tools=[big, plain], capabilities=ToolkeepHistory(session).capabilities()
    )
    result = asyncio.run(agent.run("go")) if asynchronous else agent.run_sync("go")
    entered = {
        p.tool_name: p.content
        for m in result.all_messages()
        for p in m.parts
        if isinstance(p, pam.ToolReturnPart)
    }
    check(entered, sent, cap, size, session)


def run_openai_agents(cap: int, size: int, session: Session, asynchronous: bool = False) -> None:
    pytest.importorskip("agents")
    from agents import Agent, RunConfig, Runner, function_tool
    from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call

    from toolkeep.integrations.openai_agents import ToolkeepInputFilter

    sent: list[str] = []

    def first(call: ModelCall) -> list[Any]:
        return [function_call("big", {}, call_id="c1"), function_call("plain", {}, call_id="c2")]

    def second(call: ModelCall) -> list[Any]:
        sent.extend(
            i["output"] for i in call.input if isinstance(i, dict) and i.get("type") == "function_call_output"
        )
        return [assistant_message("done")]

    big, plain = tools_for(cap, size)
    toolkeep_filter = ToolkeepInputFilter(session)
    tools = toolkeep_filter.capped([function_tool(big), function_tool(plain)])
    model = ScriptedModel([ModelStep.respond(first), ModelStep.respond(second)])
    agent = Agent(name="a", model=model, tools=tools)
    config = RunConfig(call_model_input_filter=toolkeep_filter, tracing_disabled=True)
    run = Runner.run(agent, "go", run_config=config) if asynchronous else None
    result = asyncio.run(run) if run is not None else Runner.run_sync(agent, "go", run_config=config)
    items: list[Any] = result.to_input_list()
    names = {i["call_id"]: i["name"] for i in items if i.get("type") == "function_call"}
    entered = {names[i["call_id"]]: i["output"] for i in items if i.get("type") == "function_call_output"}
    check(entered, [s if isinstance(s, str) else json.dumps(s) for s in sent], cap, size, session)


RUNNERS = {"langchain": run_langchain, "pydantic-ai": run_pydantic_ai, "openai-agents": run_openai_agents}


@pytest.mark.parametrize("framework", sorted(RUNNERS))
@pytest.mark.parametrize(("cap", "size"), EXTREMES)
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("policy", POLICIES)
def test_extremes(framework: str, cap: int, size: int, asynchronous: bool, policy: str) -> None:
    """The smallest and largest caps, at and one past them, sync and through the async path
    (the cache-aware policy once sent the cut with a names index, past the cap)."""
    with Session(CONFIG.replace(policy=policy)) as session:
        RUNNERS[framework](cap, size, session, asynchronous)


@pytest.mark.parametrize("framework", sorted(RUNNERS))
@pytest.mark.parametrize("policy", POLICIES)
@property_settings(6)
@given(cap_size=sizes)
def test_any_size(framework: str, policy: str, cap_size: tuple[int, int]) -> None:
    """Any cap from 100 to 200,000 and any output at or over it."""
    with Session(CONFIG.replace(policy=policy)) as session:
        RUNNERS[framework](*cap_size, session)
