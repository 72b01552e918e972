"""OpenAI Agents SDK: toolkeep as the run's ``call_model_input_filter``, recall as function tools.

::

    from agents import Agent, RunConfig, Runner
    from toolkeep.integrations.openai_agents import ToolkeepInputFilter

    with ToolkeepInputFilter() as toolkeep_filter:
        agent = Agent(name="coder", tools=[*my_tools, *toolkeep_filter.tools])
        Runner.run_sync(agent, prompt, run_config=RunConfig(call_model_input_filter=toolkeep_filter))

The filter prepares the input items (OpenAI Responses format) right before each model call: the
model sees a valid history (an interrupted ``function_call`` gets its synthetic output) with
results capped, budgeted and compacted, while the run's own items keep them whole.
``tools`` are ``recall`` and ``read_result`` as ``FunctionTool`` objects bound to the session.

Needs ``pip install 'toolkeep[openai-agents]'``.
"""

from __future__ import annotations

from typing import Any

from ..config import Config
from ..recall import READ_TOOL, RECALL_TOOL, tool_definitions
from ..report import Report
from ..session import Session
from . import SessionOwner, require

require("agents", "openai-agents", "toolkeep's OpenAI Agents SDK filter")

from agents import FunctionTool, RunContextWrapper  # noqa: E402
from agents.run_config import CallModelData, ModelInputData  # noqa: E402

__all__ = ["ToolkeepInputFilter", "recall_function_tools"]


class ToolkeepInputFilter(SessionOwner):
    """A ``call_model_input_filter`` that prepares every model input; see the module docstring.

    The session is held as :class:`~toolkeep.integrations.SessionOwner` says.
    """

    def __init__(self, session: Session | None = None, *, config: Config | None = None) -> None:
        self._hold(session, config)
        self.tools: list[FunctionTool] = recall_function_tools(self.session)
        """``recall`` and ``read_result`` for the agent's ``tools``."""
        self.report: Report | None = None
        """The report of the last prepared model input."""

    def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        items, self.report = self.session.prepare(data.model_data.input, format="openai-responses")
        return ModelInputData(input=items, instructions=data.model_data.instructions)


def recall_function_tools(session: Session) -> list[FunctionTool]:
    """``recall`` and ``read_result`` as Agents SDK function tools answered from ``session``."""

    def bind(name: str) -> Any:
        async def invoke(context: RunContextWrapper[Any], arguments: str) -> str:
            answer = session.handle_tool_call(name, arguments)
            return answer or ""

        return invoke

    return [
        FunctionTool(
            name=spec["name"],
            description=spec["description"],
            params_json_schema=spec["parameters"],
            on_invoke_tool=bind(spec["name"]),
            strict_json_schema=False,  # optional line arguments: strict mode would require them
        )
        for spec in tool_definitions("openai-responses", (RECALL_TOOL, READ_TOOL))
    ]
