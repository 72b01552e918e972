"""An OpenAI Agents SDK agent with toolkeep as the run's call_model_input_filter
(toolkeep.integrations.openai_agents).

Runs offline: the model is the SDK's own ScriptedModel. The run resumes a conversation whose last
function call was interrupted (it has no output): the filter repairs the input before every model
call, and the model reads a big log whose output reaches it shortened (head and tail; the whole
output archived for ``recall``). With a real model, drop ``model=...`` and set OPENAI_API_KEY.

    pip install 'toolkeep[openai-agents]'
    python examples/openai_agents_agent.py
"""

from __future__ import annotations

from typing import Any

from agents import Agent, RunConfig, Runner, function_tool
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call

import toolkeep
from toolkeep.integrations.openai_agents import ToolkeepInputFilter


@function_tool
def read_log(path: str) -> str:
    """Read a log file."""
    return "".join(f"{path}:{n} worker {n % 8} finished job {n}\n" for n in range(1_200))


def show(call: ModelCall) -> None:
    """What the model is sent: valid input, and how big each tool output is."""
    assert toolkeep.validate(call.input, "openai-responses") == []
    sizes = [
        len(i["output"])
        for i in call.input
        if isinstance(i, dict) and i.get("type") == "function_call_output"
    ]
    print(f"model is sent {len(call.input)} items, tool outputs of {sizes} chars")


def step(output: Any) -> ModelStep:
    def respond(call: ModelCall) -> Any:
        show(call)
        return output

    return ModelStep.respond(respond)


def main() -> None:
    model = ScriptedModel([
        step([function_call("read_log", {"path": "worker.log"}, call_id="call_2")]),
        step([assistant_message("The workers finished every job.")]),
    ])  # fmt: skip
    resumed: list[Any] = [
        {"role": "user", "content": "Check the workers."},
        {"type": "function_call", "call_id": "call_1", "name": "read_log", "arguments": "{}"},  # interrupted
        {"role": "user", "content": "Go on."},
    ]
    with ToolkeepInputFilter() as toolkeep_filter:
        agent = Agent(name="ops", model=model, tools=[read_log, *toolkeep_filter.tools])
        config = RunConfig(call_model_input_filter=toolkeep_filter, tracing_disabled=True)
        result = Runner.run_sync(agent, resumed, run_config=config)
    print("model:", result.final_output)


if __name__ == "__main__":
    main()
