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
``toolkeep_filter.capped(tools)`` gives back ``tools`` with each one whose function declares its
own cap (``@toolkeep.result_cap(N)`` under ``@function_tool``) cutting its text output to at most
``N`` chars as it enters the run's items, the original archived first (the filter itself only
sees model inputs); other tools' outputs enter whole and are capped in the model's view only.

A run whose conversation the server keeps (``Runner.run(..., auto_previous_response_id=True)``,
``previous_response_id=...`` or ``conversation_id=...``) sends the model only what is new: after
its first request, the outputs of calls that are stored on the server. The filter is not told
which kind of run it serves (``CallModelData`` holds the input, the agent and the user's
context), so by default it reads it off each input: one that holds call outputs and nothing the
model wrote can only answer stored calls, and its outputs are sent untouched
(``OpenAIResponsesFormat(previous_response=True)``); what the input does hold is repaired as
usual. ``server_managed=True`` says so for every request of the runs it serves (an input that
also re-sends model items, as a run resumed from a ``RunState`` may); ``False`` never (a local
run whose caller history was trimmed down to outputs alone, whose orphans must go).

Needs ``pip install 'toolkeep[openai-agents]'``.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from ..config import Config
from ..dispatch import declared_cap
from ..formats import Format, get_format, plain_view
from ..formats.openai_responses import OpenAIResponsesFormat, outputs_only
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

    def __init__(
        self,
        session: Session | None = None,
        *,
        config: Config | None = None,
        server_managed: bool | None = None,
        trust_env: bool = True,
    ) -> None:
        self._hold(session, config, trust_env)
        self.tools: list[FunctionTool] = recall_function_tools(self.session)
        """``recall`` and ``read_result`` for the agent's ``tools``."""
        self.server_managed = server_managed
        """Whether the runs served keep their conversation on the server: ``None`` (read off each
        input), ``True`` or ``False``; see the module docstring."""
        self.report: Report | None = None
        """The report of the last prepared model input."""
        self.continued: bool | None = None
        """Whether the last input was prepared as continuing stored state."""
        self._formats: dict[bool, Format] = {
            False: get_format("openai-responses"),
            True: OpenAIResponsesFormat(previous_response=True),
        }

    def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        items = data.model_data.input
        continued = self.server_managed
        if continued is None:
            continued = outputs_only(plain_view(items))
        prepared, self.report = self.session.prepare(items, format=self._formats[continued])
        self.continued = continued
        return ModelInputData(input=prepared, instructions=data.model_data.instructions)

    def capped(self, tools: Sequence[Any]) -> list[Any]:
        """``tools`` with each ``FunctionTool`` whose function declares a cap
        (:func:`toolkeep.result_cap`) replaced by a copy that cuts its text output to that cap
        as it enters the run; every other tool as it was."""
        return [_capped_tool(tool, self.session) for tool in tools]


def _capped_tool(tool: Any, session: Session) -> Any:
    if not isinstance(tool, FunctionTool):
        return tool
    cap = declared_cap(getattr(tool, "__wrapped__", None))
    if cap is None:
        return tool
    invoke_original = tool.on_invoke_tool

    async def invoke(context: Any, arguments: str) -> Any:
        output = await invoke_original(context, arguments)
        if not isinstance(output, str):
            return output
        call_id = getattr(context, "tool_call_id", None) or "result"
        return session.cap_result(call_id, tool.name, output, cap=cap)

    capped = copy.copy(tool)
    capped.on_invoke_tool = invoke
    return capped


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
