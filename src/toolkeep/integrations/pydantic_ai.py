"""pydantic-ai: toolkeep as a history processor, recall as a toolset.

::

    from pydantic_ai import Agent
    from toolkeep.integrations.pydantic_ai import ToolkeepHistory

    with ToolkeepHistory() as history:
        agent = Agent(model, tools=[...], capabilities=history.capabilities())

``history.capabilities()`` is one capability that prepares each model request and brings the
``recall``/``read_result`` toolset; the run's own history keeps every result whole, but for a
tool that declares its own cap (``@toolkeep.result_cap(N)`` on a function tool of the agent):
its output is cut to at most ``N`` chars as it enters the history, the original archived first. As a plain
history processor, ``capabilities=[ProcessHistory(history)]`` needs the toolset given too
(``toolsets=[history.toolset()]``): a processor cannot bring tools, and without them the model
would get ``<<ccr:KEY>>`` markers and no ``recall`` tool to follow them (pydantic-ai answers its
call with ``Unknown tool name: 'recall'``), so the first request that would carry a shortened
result raises :class:`~toolkeep.ConfigError` instead, unless the agent has the toolset
(``history.toolset()`` was made) or ``ToolkeepHistory(recall_given=True)`` says the agent
answers ``recall`` some other way. pydantic-ai then stores what the processor returns as the
run's history, so later requests start from shortened results: toolkeep puts each original back
from its archive before it cuts again (``prepare`` is idempotent), so every request is the same
either way.

:class:`ToolkeepHistory` maps pydantic-ai's ``ModelMessage`` list to toolkeep's neutral model
(:class:`~toolkeep.formats.pydantic_ai.PydanticAIFormat`, handed on here), runs the session's pipeline and maps back: untouched messages and
parts come back as the very objects they were; a changed message is a copy (``dataclasses.replace``)
keeping its timestamps, usage and metadata. A call left without its return gets a
``ToolReturnPart`` with ``outcome="failed"`` and toolkeep's missing-result text (pydantic-ai
itself closes dangling calls in the history it is given before any capability runs, so in an
agent run that repair is usually already done).

Needs ``pip install 'toolkeep[pydantic-ai]'`` (``pydantic-ai-slim``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..config import Config
from ..dispatch import declared_cap
from ..exceptions import ConfigError
from ..recall import READ_TOOL, RECALL_TOOL, tool_specs
from ..report import Report
from ..session import Session
from . import SessionOwner, require

require("pydantic_ai", "pydantic-ai", "toolkeep's pydantic-ai history processor")

from pydantic_ai import messages as pa  # noqa: E402
from pydantic_ai.capabilities import AbstractCapability  # noqa: E402
from pydantic_ai.models import ModelRequestContext  # noqa: E402
from pydantic_ai.tools import RunContext, Tool, ToolDefinition  # noqa: E402
from pydantic_ai.toolsets import FunctionToolset  # noqa: E402

# the format lives with the others; handed on here, where it was first (it needs pydantic_ai too)
from ..formats.pydantic_ai import FORMAT as FORMAT  # noqa: E402
from ..formats.pydantic_ai import PydanticAIFormat as PydanticAIFormat  # noqa: E402

__all__ = ["ToolkeepCapability", "ToolkeepHistory"]


def _declared(ctx: RunContext[Any], name: str) -> int | None:
    """The cap the agent's function tool ``name`` declares with :func:`toolkeep.result_cap`."""
    agent = ctx.agent
    for toolset in agent.toolsets if agent is not None else ():
        tool = toolset.tools.get(name) if isinstance(toolset, FunctionToolset) else None
        if tool is not None:
            return declared_cap(tool.function)
    return None


class ToolkeepHistory(SessionOwner):
    """A pydantic-ai history processor running toolkeep; see the module docstring.

    The session is held as :class:`~toolkeep.integrations.SessionOwner` says. ``recall_given``
    says the agent answers ``recall``/``read_result`` without :meth:`toolset` (so a plain
    processor may send shortened results).
    """

    def __init__(
        self,
        session: Session | None = None,
        *,
        config: Config | None = None,
        recall_given: bool = False,
        trust_env: bool = True,
    ) -> None:
        self._hold(session, config, trust_env)
        self.report: Report | None = None
        """The report of the last processed history."""
        self.recall_given = recall_given
        self._toolset: FunctionToolset[Any] | None = None

    def __call__(self, messages: list[pa.ModelMessage]) -> list[pa.ModelMessage]:
        """The processor: the prepared history. Raises :class:`~toolkeep.ConfigError` when it
        would carry shortened results to a model that has no ``recall`` tool to follow them."""
        prepared = self.prepare(messages)
        if self.report is not None and self.report.cuts and self._toolset is None and not self.recall_given:
            raise ConfigError(
                "toolkeep shortened tool results that the model could not recall: give the agent "
                "the recall tools too (Agent(..., toolsets=[history.toolset()]), or "
                "capabilities=history.capabilities() in place of ProcessHistory(history))"
            )
        return prepared

    def prepare(self, messages: list[pa.ModelMessage]) -> list[pa.ModelMessage]:
        """The prepared history (the report goes to :attr:`report`), unchecked."""
        prepared, self.report = self.session.prepare(messages, format=FORMAT)
        return prepared

    def toolset(self) -> FunctionToolset[Any]:
        """``recall`` and ``read_result`` as a toolset answered from the session (one toolset
        per processor, made on first use)."""
        if self._toolset is not None:
            return self._toolset
        session = self.session

        def bind(name: str) -> Any:
            def run(**arguments: Any) -> str:
                answer = session.handle_tool_call(name, arguments)
                return answer or ""

            return run

        tools = [
            Tool.from_schema(bind(s.name), s.name, s.description, s.fresh_schema())
            for s in tool_specs((RECALL_TOOL, READ_TOOL))
        ]
        self._toolset = FunctionToolset(tools)
        return self._toolset

    def capabilities(self) -> list[Any]:
        """``[ToolkeepCapability(self)]``, for ``Agent(capabilities=...)``."""
        return [ToolkeepCapability(self)]


@dataclass
class ToolkeepCapability(AbstractCapability[Any]):
    """Prepares each model request with ``history`` and brings its recall toolset; the run's
    stored history is left whole (only the request is changed)."""

    history: ToolkeepHistory

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        # the request's own list: assigning it changes this request, not the run's history
        request_context.messages = self.history.prepare(list(request_context.messages))
        return request_context

    def get_toolset(self) -> FunctionToolset[Any]:
        return self.history.toolset()

    async def after_tool_execute(
        self, ctx: RunContext[Any], *, call: pa.ToolCallPart, tool_def: ToolDefinition, args: Any, result: Any
    ) -> Any:
        """A function tool's text output, cut to the cap the function declares (if any)."""
        cap = _declared(ctx, tool_def.name)
        if cap is None or not isinstance(result, str):
            return result
        return self.history.session.cap_result(call.tool_call_id, tool_def.name, result, cap=cap)

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # holds a live session: not something an agent spec can name
