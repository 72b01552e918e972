"""The LangChain v1 middleware, end to end: a real ``create_agent`` graph, real tools, and
LangChain's ``GenericFakeChatModel`` scripted to call them."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain.agents")

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import StructuredTool

import toolkeep
from tests import integration_scenario as scenario
from toolkeep.integrations.langchain import ToolkeepMiddleware


class ScriptedChatModel(GenericFakeChatModel):
    """``GenericFakeChatModel`` whose next message follows the script, given what it was sent;
    every request it receives is checked first."""

    seen: Any = None

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        scenario.check_request(messages, "langchain", self.seen)
        return super()._generate(messages, *args, **kwargs)


def scripted_messages(seen: scenario.Seen) -> Iterator[AIMessage]:
    """The script as LangChain messages, each made when the model is asked for it."""
    turn = 0
    while True:
        step = scenario.next_step(turn, seen.last_texts)
        if step.tool is None:
            yield AIMessage(content=step.text or "")
        else:
            yield AIMessage(
                content="", tool_calls=[{"name": step.tool, "args": step.arguments, "id": f"call_{turn}"}]
            )
        turn += 1


def build_agent(middleware: ToolkeepMiddleware, seen: scenario.Seen) -> Any:
    model = ScriptedChatModel(messages=scripted_messages(seen), seen=seen)
    tools = [StructuredTool.from_function(f, name=name) for name, f in scenario.TOOLS.items()]
    return create_agent(model, tools=tools, middleware=[middleware])


def starting_history() -> list[BaseMessage]:
    return [
        HumanMessage(scenario.FIRST_PROMPT),
        AIMessage(
            content="",
            tool_calls=[{"name": "read", "args": {"path": "src/old.py"}, "id": scenario.INTERRUPTED_ID}],
        ),
        HumanMessage(scenario.RESUME_PROMPT),
    ]


class TestMiddleware:
    def test_session_end_to_end(self, tmp_path: Path) -> None:
        """Every request is valid and within budget, each kind of work shows, and recall is byte-exact."""
        seen = scenario.Seen()
        with toolkeep.Session(scenario.CONFIG, workspace=tmp_path / "ws") as session:
            middleware = ToolkeepMiddleware(session)
            result = build_agent(middleware, seen).invoke({"messages": starting_history()})
        scenario.check_session(seen)
        assert result["messages"][-1].content == scenario.FINAL_TEXT

    def test_state_repaired_and_kept_whole(self, tmp_path: Path) -> None:
        """The stored state gets the synthetic result in place and keeps every tool output whole."""
        seen = scenario.Seen()
        with toolkeep.Session(scenario.CONFIG, workspace=tmp_path / "ws") as session:
            middleware = ToolkeepMiddleware(session)
            messages = build_agent(middleware, seen).invoke({"messages": starting_history()})["messages"]
        assert toolkeep.validate(messages, "langchain") == []
        assert isinstance(messages[2], ToolMessage) and messages[2].tool_call_id == scenario.INTERRUPTED_ID
        assert messages[2].content == toolkeep.MISSING_RESULT_TEXT and messages[2].status == "error"
        assert isinstance(messages[3], HumanMessage) and messages[3].content == scenario.RESUME_PROMPT
        outputs = {m.tool_call_id: m.content for m in messages if isinstance(m, ToolMessage)}
        assert outputs["call_2"] == scenario.page("https://example.test/big")
        assert outputs["call_3"] == scenario.log_file("logs/app.log")
        assert middleware.repairs is not None
        assert [r.kind for r in middleware.repairs.repairs] == ["synthetic"]

    def test_async_agent(self, tmp_path: Path) -> None:
        """``ainvoke`` goes through the async hooks with the same result."""
        seen = scenario.Seen()
        with toolkeep.Session(scenario.CONFIG, workspace=tmp_path / "ws") as session:
            agent = build_agent(ToolkeepMiddleware(session), seen)
            asyncio.run(agent.ainvoke({"messages": starting_history()}))
        scenario.check_session(seen)

    def test_recall_tools_registered(self) -> None:
        """The middleware brings ``recall`` and ``read_result``, or none with ``recall=False``."""
        with ToolkeepMiddleware(config=scenario.CONFIG) as middleware:
            assert [t.name for t in middleware.tools] == ["recall", "read_result"]
            workspace = middleware.session.workspace.path
            assert workspace.is_dir()
        assert not workspace.exists()
        with ToolkeepMiddleware(config=scenario.CONFIG, recall=False) as middleware:
            assert middleware.tools == []

    def test_valid_state_untouched(self, tmp_path: Path) -> None:
        """A state that needs no repair is not rewritten."""
        with toolkeep.Session(scenario.CONFIG, workspace=tmp_path / "ws") as session:
            middleware = ToolkeepMiddleware(session)
            state = {"messages": [HumanMessage("hi", id="h1"), AIMessage("hello", id="a1")]}
            assert middleware.before_model(state, None) is None

    def test_without_middleware_request_is_invalid(self) -> None:
        """Control: the same agent without toolkeep sends the model the dangling call."""
        seen = scenario.Seen()
        model = ScriptedChatModel(messages=scripted_messages(seen), seen=seen)
        tools = [StructuredTool.from_function(f, name=name) for name, f in scenario.TOOLS.items()]
        agent: Any = create_agent(model, tools=tools)
        with pytest.raises(AssertionError, match="missing_result"):
            agent.invoke({"messages": starting_history()})
