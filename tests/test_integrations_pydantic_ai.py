"""The pydantic-ai history processor, end to end: a real ``Agent`` run with pydantic-ai's
``FunctionModel`` scripted to call real tools, every request it receives checked."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import INTERRUPTED_TOOL_RETURN_CONTENT as PYDANTIC_AI_REPAIR
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

import toolkeep
from tests import integration_scenario as scenario
from toolkeep.integrations.pydantic_ai import FORMAT, ToolkeepHistory


def scripted_model(seen: scenario.Seen) -> FunctionModel:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = seen.requests
        scenario.check_request(messages, FORMAT, seen)
        step = scenario.next_step(turn, seen.last_texts)
        if step.tool is None:
            return ModelResponse(parts=[TextPart(step.text or "")])
        return ModelResponse(parts=[ToolCallPart(step.tool, step.arguments, tool_call_id=f"call_{turn}")])

    return FunctionModel(respond)


def starting_history() -> list[ModelMessage]:
    """A first exchange whose tool call was interrupted: the user went on without its result."""
    return [
        ModelRequest(parts=[UserPromptPart(scenario.FIRST_PROMPT)]),
        ModelResponse(parts=[ToolCallPart("read", {"path": "x"}, tool_call_id=scenario.INTERRUPTED_ID)]),
        ModelRequest(parts=[UserPromptPart("Stop; never mind that.")]),
        ModelResponse(parts=[TextPart("Stopped.")]),
    ]


def build_agent(model: Any, capabilities: list[Any]) -> Agent[None, str]:
    return Agent(model, tools=[scenario.read, scenario.fetch], capabilities=capabilities)


class TestHistoryProcessor:
    def test_session_end_to_end(self, tmp_path: Path) -> None:
        """Every request is valid and within budget, each kind of work shows, recall is byte-exact."""
        seen = scenario.Seen()
        with toolkeep.Session(scenario.CONFIG, workspace=tmp_path / "ws") as session:
            history = ToolkeepHistory(session)
            agent = build_agent(scripted_model(seen), history.capabilities())
            result = agent.run_sync(scenario.RESUME_PROMPT, message_history=starting_history())
        # pydantic-ai repairs dangling calls itself when a run starts, before any processor: the
        # result the model sees is pydantic-ai's; toolkeep's own repair is tested in TestFormat
        scenario.check_session(seen, repaired=PYDANTIC_AI_REPAIR)
        assert result.output == scenario.FINAL_TEXT
        # only the requests were prepared: the run's history keeps every output whole
        returns = {
            p.tool_call_id: p.content
            for m in result.all_messages()
            for p in m.parts
            if isinstance(p, ToolReturnPart)
        }
        assert returns["call_2"] == scenario.page("https://example.test/big")
        assert returns["call_0"] == scenario.module_source("src/mod1.py")

    def test_process_history_alone(self, tmp_path: Path) -> None:
        """``ProcessHistory(ToolkeepHistory(...))`` works on its own, with recall as a plain toolset."""
        seen = scenario.Seen()
        with ToolkeepHistory(config=scenario.CONFIG) as history:
            agent = Agent(
                scripted_model(seen),
                tools=[scenario.read, scenario.fetch],
                toolsets=[history.toolset()],
                capabilities=[ProcessHistory(history)],
            )
            result = agent.run_sync(scenario.RESUME_PROMPT, message_history=starting_history())
            workspace = history.session.workspace.path
        scenario.check_session(seen, repaired=PYDANTIC_AI_REPAIR)
        # pydantic-ai keeps what a processor returns: the run's history holds the shortened forms
        returns = {
            p.tool_call_id: p.content
            for m in result.all_messages()
            for p in m.parts
            if isinstance(p, ToolReturnPart)
        }
        assert str(returns["call_0"]).startswith("[Old tool result cleared -- ")
        assert not workspace.exists()

    def test_process_history_without_the_toolset_refuses_to_send_markers(self) -> None:
        """``ProcessHistory(history)`` with no recall toolset: the request that would carry the
        first shortened result raises ConfigError (the model would get markers and no recall
        tool, and pydantic-ai would answer its call with "Unknown tool name: 'recall'")."""
        seen = scenario.Seen()
        with ToolkeepHistory(config=scenario.CONFIG) as history:
            agent = Agent(
                scripted_model(seen),
                tools=[scenario.read, scenario.fetch],
                capabilities=[ProcessHistory(history)],
            )
            with pytest.raises(toolkeep.ConfigError, match=r"toolsets=\[history.toolset\(\)\]"):
                agent.run_sync(scenario.RESUME_PROMPT, message_history=starting_history())
        assert history.report is not None and history.report.cuts  # it did have something to cut
        assert seen.requests >= 1  # the requests before that went through

    def test_process_history_with_recall_given_elsewhere(self) -> None:
        """``recall_given=True``: the caller answers recall itself; nothing is refused."""
        seen = scenario.Seen()
        with toolkeep.Session(scenario.CONFIG) as session:
            history = ToolkeepHistory(session, recall_given=True)
            recall = ToolkeepHistory(session).toolset()  # recall answered by another object
            agent = Agent(
                scripted_model(seen),
                tools=[scenario.read, scenario.fetch],
                toolsets=[recall],
                capabilities=[ProcessHistory(history)],
            )
            result = agent.run_sync(scenario.RESUME_PROMPT, message_history=starting_history())
        assert result.output == scenario.FINAL_TEXT

    def test_without_processor_request_is_over_budget(self) -> None:
        """Control: without toolkeep the model is sent the whole fetched page, over the budget."""
        seen = scenario.Seen()
        agent = build_agent(scripted_model(seen), [])
        with pytest.raises(AssertionError, match="call_2"):
            agent.run_sync(scenario.RESUME_PROMPT, message_history=starting_history())


class TestFormat:
    def test_round_trip_keeps_objects(self) -> None:
        """A valid history comes back as the very same message objects."""
        history = [*starting_history()[:1], ModelResponse(parts=[TextPart("hi")])]
        with toolkeep.Session(scenario.CONFIG) as session:
            prepared, report = session.prepare(history, format=FORMAT)
        assert all(a is b for a, b in zip(prepared, history, strict=True))
        assert report.repairs == []

    def test_synthetic_result_is_a_failed_return(self) -> None:
        """The interrupted call gets a ``ToolReturnPart`` with ``outcome='failed'`` before the next prompt."""
        with toolkeep.Session(scenario.CONFIG) as session:
            prepared, report = session.prepare(starting_history(), format=FORMAT)
        assert [r.kind for r in report.repairs] == ["synthetic"]
        first, *rest = prepared[2].parts
        assert isinstance(first, ToolReturnPart) and first.outcome == "failed"
        assert (first.tool_call_id, first.tool_name) == (scenario.INTERRUPTED_ID, "read")
        assert first.content == toolkeep.MISSING_RESULT_TEXT
        assert len(rest) == 1 and isinstance(rest[0], UserPromptPart)
        assert toolkeep.validate(prepared, FORMAT) == []

    def test_shortened_result_keeps_fields(self) -> None:
        """A result cut by the budget is a copy of the part: name, id, timestamp and metadata kept."""
        big = scenario.log_file("big.log")
        call = ToolCallPart("read", {"path": "big.log"}, tool_call_id="c1")
        ret = ToolReturnPart("read", big, "c1", metadata={"mine": 1})
        history: list[ModelMessage] = [
            ModelRequest(parts=[UserPromptPart("go")]),
            ModelResponse(parts=[call]),
            ModelRequest(parts=[ret]),
        ]
        with toolkeep.Session(scenario.CONFIG) as session:
            prepared, report = session.prepare(history, format=FORMAT)
        (new,) = prepared[2].parts
        assert report.persisted == 1 and "full output saved to" in new.content
        assert dataclasses.replace(new, content=big) == ret
        assert history[2].parts[0] is ret and ret.content == big  # the caller's history is untouched


class TestThroughAnthropicModel:
    def test_wire_requests_valid(self, tmp_path: Path) -> None:
        """Through pydantic-ai's own AnthropicModel, every request body on the wire passes the Anthropic rules."""
        pytest.importorskip("anthropic")
        import json

        import anthropic
        import httpx2
        from pydantic_ai.models.anthropic import AnthropicModel
        from pydantic_ai.providers.anthropic import AnthropicProvider

        seen = scenario.Seen()

        def handle(request: httpx2.Request) -> httpx2.Response:
            body = json.loads(request.content)
            turn = seen.requests
            scenario.check_request(body["messages"], "anthropic", seen)
            return httpx2.Response(
                200, json=scenario.anthropic_message(turn, scenario.next_step(turn, seen.last_texts))
            )

        client = anthropic.AsyncAnthropic(
            api_key="test",
            max_retries=0,
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handle)),
        )
        model = AnthropicModel("claude-x", provider=AnthropicProvider(anthropic_client=client))
        with toolkeep.Session(scenario.CONFIG, workspace=tmp_path / "ws") as session:
            history = ToolkeepHistory(session)
            result = build_agent(model, history.capabilities()).run_sync(
                scenario.RESUME_PROMPT, message_history=starting_history()
            )
        scenario.check_session(seen, repaired=PYDANTIC_AI_REPAIR)
        assert result.output == scenario.FINAL_TEXT
