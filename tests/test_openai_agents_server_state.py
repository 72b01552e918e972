"""The Agents SDK filter in runs whose conversation the server keeps, end to end: the real
``Runner`` with ``auto_previous_response_id=True`` (or ``previous_response_id``,
``conversation_id``), driven by a ``Model`` that plays a Responses server (no network).

The model stores what the API stores (each response's conversation: the input it was sent, and
its own output items) and rebuilds, for each request, the conversation the server would run the
model on: the stored part it continues, then the request's input. Every such conversation must
be valid (``toolkeep.validate``, worded like the API's 400s), and every tool output must reach it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, RunConfig, Runner, Usage, function_tool
from agents.items import ModelResponse
from agents.models.interface import Model
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)

import toolkeep
from toolkeep.integrations.openai_agents import ToolkeepInputFilter


def read_file(path: str) -> str:
    """What the ``read`` tool answers: a text that names its path, over 3,000 chars for ``big``."""
    size = 30_000 if "big" in path else 40
    return (f"contents of {path}\n" * (size // 20 + 1))[:size]


@function_tool
def read(path: str) -> str:
    """Read a file."""
    return read_file(path)


# each turn of the script: the (call id, path) of the calls the model makes, with a reasoning
# item before the first; the last turn answers
SCRIPT: list[list[tuple[str, str]]] = [
    [("call_1", "a.txt")],
    [("call_2", "b.txt"), ("call_3", "big.log")],  # parallel calls
    [("call_4", "c.txt")],
    [],
]


@dataclass
class Request:
    previous_response_id: str | None
    conversation_id: str | None
    input: list[Any]
    conversation: list[Any]
    """The stored part the request continues, then its input: what the model runs on."""
    violations: list[str]


@dataclass
class ServerModel(Model):
    """Answers from :data:`SCRIPT`, storing each response's conversation as the API does."""

    responses: dict[str, list[Any]] = field(default_factory=dict)
    conversations: dict[str, list[Any]] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)
    turn: int = 0
    prefix: str = ""
    """Put before the script's call ids (a second run makes calls of its own)."""

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[Any],
        model_settings: Any,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: Any,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
    ) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else [_plain(i) for i in input]
        if previous_response_id is not None:
            stored = self.responses[previous_response_id]  # unknown id: the API's 404
        elif conversation_id is not None:
            stored = self.conversations.setdefault(conversation_id, [])
        else:
            stored = []
        conversation = [*stored, *items]
        violations = [str(v) for v in toolkeep.validate(conversation, "openai-responses")]
        self.requests.append(Request(previous_response_id, conversation_id, items, conversation, violations))
        output = self._answer(conversation)
        response_id = f"resp_{len(self.requests)}"
        self.responses[response_id] = [*conversation, *(_plain(o) for o in output)]
        if conversation_id is not None:
            self.conversations[conversation_id] = self.responses[response_id]
        return ModelResponse(output=output, usage=Usage(), response_id=response_id)

    def _answer(self, conversation: list[Any]) -> list[Any]:
        calls = SCRIPT[min(self.turn, len(SCRIPT) - 1)]
        self.turn += 1
        if not calls:
            seen = sorted(i["call_id"] for i in conversation if i.get("type") == "function_call_output")
            text = "outputs seen: " + ", ".join(seen)
            return [
                ResponseOutputMessage(
                    type="message",
                    id=f"msg_{self.turn}",
                    role="assistant",
                    status="completed",
                    content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
                )
            ]
        out: list[Any] = [
            ResponseReasoningItem(
                type="reasoning", id=f"rs_{self.turn}", summary=[], encrypted_content="gAAA"
            )
        ]
        for call_id, path in calls:
            out.append(
                ResponseFunctionToolCall(
                    type="function_call",
                    id=f"fc_{self.prefix}{call_id}",
                    call_id=self.prefix + call_id,
                    name="read",
                    arguments=json.dumps({"path": path}),
                    status="completed",
                )
            )
        return out

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the tests run Runner.run_sync")


def _plain(item: Any) -> Any:
    """An item as the request body holds it (the SDK's objects dumped as the SDK dumps them)."""
    if hasattr(item, "model_dump"):
        return item.model_dump(exclude_unset=True, mode="json")
    return json.loads(json.dumps(item))


ALL_CALLS = [call for turn in SCRIPT for call in turn]


def run(tk: ToolkeepInputFilter, model: ServerModel, prompt: Any = "Read the files.", **kwargs: Any) -> Any:
    agent = Agent(name="reader", instructions="Read.", model=model, tools=[read])
    config = RunConfig(call_model_input_filter=tk, tracing_disabled=True)
    return Runner.run_sync(agent, prompt, run_config=config, max_turns=len(SCRIPT) + 1, **kwargs)


def assert_every_output_reached_the_model(model: ServerModel) -> None:
    """Each request is valid given the server's part, and the request after each turn of calls
    carries every one of their outputs, whole."""
    assert len(model.requests) == len(SCRIPT)
    for request in model.requests:
        assert request.violations == []
    for turn, request in enumerate(model.requests[1:]):
        outputs = {
            i["call_id"]: i["output"] for i in request.input if i.get("type") == "function_call_output"
        }
        assert outputs == {call_id: read_file(path) for call_id, path in SCRIPT[turn]}


class TestServerManagedRuns:
    def test_auto_previous_response_id(self, tmp_path: Path) -> None:
        """``auto_previous_response_id=True``: the first request carries the prompt, each later
        one only the new outputs, which the filter now sends (it used to remove them all as
        orphans); the model sees every output."""
        model = ServerModel()
        with toolkeep.Session(toolkeep.Config(), workspace=tmp_path / "ws") as session:
            tk = ToolkeepInputFilter(session)
            result = run(tk, model, auto_previous_response_id=True)
        assert_every_output_reached_the_model(model)
        assert [r.previous_response_id for r in model.requests] == [None, "resp_1", "resp_2", "resp_3"]
        assert result.final_output == "outputs seen: " + ", ".join(sorted(c for c, _ in ALL_CALLS))
        assert tk.continued is True and tk.report is not None and tk.report.repairs == []

    def test_previous_response_id_across_runs(self, tmp_path: Path) -> None:
        """A second run continuing the first by ``previous_response_id``: the calls of its
        first request are stored too."""
        model = ServerModel()
        with ToolkeepInputFilter(config=toolkeep.Config()) as tk:
            first = run(tk, model, auto_previous_response_id=True)
            model.turn, model.prefix = 0, "again_"
            second = run(tk, model, "Again.", previous_response_id=first.last_response_id)
        assert all(r.violations == [] for r in model.requests)
        assert model.requests[len(SCRIPT)].previous_response_id == first.last_response_id
        ids = sorted([c for c, _ in ALL_CALLS] + [f"again_{c}" for c, _ in ALL_CALLS])
        assert second.final_output == "outputs seen: " + ", ".join(ids)  # both runs' outputs

    def test_conversation_id(self, tmp_path: Path) -> None:
        """``conversation_id``: the server keeps the conversation; every output reaches it."""
        model = ServerModel()
        with ToolkeepInputFilter(config=toolkeep.Config()) as tk:
            run(tk, model, conversation_id="conv_1")
        assert_every_output_reached_the_model(model)
        assert {r.conversation_id for r in model.requests} == {"conv_1"}

    def test_said_explicitly(self, tmp_path: Path) -> None:
        """``server_managed=True`` gives the same run, whatever the inputs look like."""
        model = ServerModel()
        with ToolkeepInputFilter(config=toolkeep.Config(), server_managed=True) as tk:
            run(tk, model, auto_previous_response_id=True)
        assert_every_output_reached_the_model(model)

    def test_control_without_it_the_outputs_are_lost(self, tmp_path: Path) -> None:
        """Control: a filter told the run is local removes every output as an orphan; the server
        finds the calls of the stored responses unanswered (the API's 400)."""
        model = ServerModel()
        with ToolkeepInputFilter(config=toolkeep.Config(), server_managed=False) as tk:
            result = run(tk, model, auto_previous_response_id=True)
        assert [r.input for r in model.requests[1:]] == [[], [], []]
        assert model.requests[1].violations == [
            "messages[2] missing_result: No tool output found for function call call_1."
        ]
        assert result.final_output == "outputs seen: "


class TestLocalRuns:
    def test_local_run_is_prepared_as_a_whole_history(self, tmp_path: Path) -> None:
        """Without server state every request carries the whole history; the filter repairs it
        as one (the interrupted call of the caller's history gets its synthetic output)."""
        model = ServerModel()
        history = [
            {"role": "user", "content": "Read the files."},
            {"type": "function_call", "call_id": "call_0", "name": "read", "arguments": "{}"},
            {"role": "user", "content": "That one was interrupted."},
        ]
        with ToolkeepInputFilter(config=toolkeep.Config()) as tk:
            run(tk, model, history)
        assert all(r.previous_response_id is None and r.violations == [] for r in model.requests)
        assert tk.continued is False
        synthetic = [i for i in model.requests[0].input if i.get("call_id") == "call_0" and "output" in i]
        assert synthetic == [
            {"type": "function_call_output", "call_id": "call_0", "output": toolkeep.MISSING_RESULT_TEXT}
        ]

    def test_trimmed_caller_history_with_outputs_alone(self, tmp_path: Path) -> None:
        """A local run whose caller history was cut down to an output and a prompt reads like a
        continuation; ``server_managed=False`` says it is not, and the orphan goes."""
        model = ServerModel()
        history = [
            {"type": "function_call_output", "call_id": "call_cut", "output": "from before"},
            {"role": "user", "content": "Read the files."},
        ]
        with ToolkeepInputFilter(config=toolkeep.Config(), server_managed=False) as tk:
            run(tk, model, history)
        assert all(r.violations == [] for r in model.requests)
        assert all(i.get("call_id") != "call_cut" for i in model.requests[0].input)
