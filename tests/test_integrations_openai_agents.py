"""The OpenAI Agents SDK filter, end to end: a real ``Runner`` with the SDK's own ``ScriptedModel``
answering from the input items it receives."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, RunConfig, Runner, function_tool
from agents.exceptions import MaxTurnsExceeded
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call

import toolkeep
from tests import integration_scenario as scenario
from toolkeep.integrations.openai_agents import ToolkeepInputFilter, recall_function_tools

STEPS = len(scenario.SCRIPT) + 2


def responder(seen: scenario.Seen, check: bool = True) -> Any:
    def respond(call: ModelCall) -> list[Any]:
        turn = seen.requests
        if check:
            scenario.check_request(call.input, "openai-responses", seen)
        else:
            seen.requests += 1
        step = scenario.next_step(turn, seen.last_texts)
        if step.tool is None:
            return [assistant_message(step.text or "")]
        return [function_call(step.tool, step.arguments, call_id=f"call_{turn}")]

    return respond


def starting_input() -> list[Any]:
    return [
        {"role": "user", "content": scenario.FIRST_PROMPT},
        {"type": "function_call", "call_id": scenario.INTERRUPTED_ID, "name": "read", "arguments": "{}"},
        {"role": "user", "content": scenario.RESUME_PROMPT},
    ]


def build_agent(seen: scenario.Seen, extra_tools: list[Any], check: bool = True) -> Agent[Any]:
    model = ScriptedModel([ModelStep.respond(responder(seen, check)) for _ in range(STEPS)])
    tools = [function_tool(scenario.read), function_tool(scenario.fetch), *extra_tools]
    return Agent(name="scripted", instructions="Work.", model=model, tools=tools)


class TestInputFilter:
    def test_session_end_to_end(self, tmp_path: Path) -> None:
        """Every model input is valid and within budget, each kind of work shows, recall is byte-exact."""
        seen = scenario.Seen()
        with toolkeep.Session(scenario.CONFIG, workspace=tmp_path / "ws") as session:
            toolkeep_filter = ToolkeepInputFilter(session)
            agent = build_agent(seen, toolkeep_filter.tools)
            config = RunConfig(call_model_input_filter=toolkeep_filter, tracing_disabled=True)
            result = Runner.run_sync(agent, starting_input(), run_config=config, max_turns=STEPS + 1)
        scenario.check_session(seen)
        assert result.final_output == scenario.FINAL_TEXT
        # the run's own items keep every output whole: only the model's view is shortened
        items: list[Any] = result.to_input_list()
        outputs = {i["call_id"]: i["output"] for i in items if i.get("type") == "function_call_output"}
        assert outputs["call_3"] == scenario.log_file("logs/app.log")

    def test_async_run(self, tmp_path: Path) -> None:
        """``Runner.run`` (async) goes through the same filter."""
        import asyncio

        seen = scenario.Seen()
        with ToolkeepInputFilter(config=scenario.CONFIG) as toolkeep_filter:
            agent = build_agent(seen, toolkeep_filter.tools)
            config = RunConfig(call_model_input_filter=toolkeep_filter, tracing_disabled=True)
            asyncio.run(Runner.run(agent, starting_input(), run_config=config, max_turns=STEPS + 1))
            workspace = toolkeep_filter.session.workspace.path
            assert toolkeep_filter.report is not None and toolkeep_filter.report.summarized >= 1
        scenario.check_session(seen)
        assert not workspace.exists()

    def test_without_filter_input_is_invalid(self) -> None:
        """Control: without the filter the model gets the dangling ``function_call``."""
        seen = scenario.Seen()
        model = ScriptedModel([ModelStep.respond(responder(seen, check=False))])
        agent = Agent(name="scripted", model=model, tools=[function_tool(scenario.read)])
        with pytest.raises(MaxTurnsExceeded):  # one model call is all the control needs
            Runner.run_sync(agent, starting_input(), run_config=RunConfig(tracing_disabled=True), max_turns=1)
        sent = model.calls[0].input
        assert [v.rule for v in toolkeep.validate(sent, "openai-responses")] == ["missing_result"]

    def test_recall_tools(self, tmp_path: Path) -> None:
        """The function tools answer from the session's archive, and say so when a key is unknown."""
        import asyncio
        import json

        with toolkeep.Session(scenario.CONFIG, workspace=tmp_path / "ws") as session:
            session.store.put(toolkeep.shorten.archive_key("original text"), "original text")
            recall, read = recall_function_tools(session)
            assert (recall.name, read.name) == ("recall", "read_result")
            key = toolkeep.shorten.archive_key("original text")
            answer: str = asyncio.run(recall.on_invoke_tool(None, json.dumps({"key": key})))  # type: ignore[arg-type]
            assert answer == "original text"
            missing: str = asyncio.run(recall.on_invoke_tool(None, json.dumps({"key": "0" * 16})))  # type: ignore[arg-type]
            assert "nothing is archived" in missing
