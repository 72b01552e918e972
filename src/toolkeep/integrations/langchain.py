"""LangChain v1 agents: toolkeep as an agent middleware.

::

    from langchain.agents import create_agent
    from toolkeep.integrations.langchain import ToolkeepMiddleware

    with ToolkeepMiddleware() as toolkeep_mw:
        agent = create_agent(model, tools=[...], middleware=[toolkeep_mw])
        agent.invoke({"messages": [...]})

The middleware

- prepares every model request (``wrap_model_call``): the model sees results capped, budgeted
  and compacted, while the agent's state keeps them whole;
- repairs the agent's stored state before each model call (``before_model``): a tool call left
  without its ``ToolMessage`` (an interrupt that was never resumed, a crashed tool, a trimmed
  checkpoint) gets the synthetic error result in the state itself, so the state stays valid
  for every later request and for whoever reads it;
- gives the agent the ``recall`` and ``read_result`` tools (``middleware.tools``), answered from
  the session's archive and workspace;
- cuts the output of a tool that declares its own cap (``@toolkeep.result_cap(N)`` on the
  function of a ``StructuredTool``, or on the tool object) to at most ``N`` chars as it enters the
  state (``wrap_tool_call``), the original archived first, so ``recall`` brings it back; other
  tools' outputs enter whole and are capped in the model's view only.

Needs ``pip install 'toolkeep[langchain]'`` (``langchain`` v1 and ``langchain-core``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ..config import Config
from ..dispatch import declared_cap
from ..pipeline import run_pipeline
from ..recall import langchain_tools
from ..report import Report
from ..session import Session
from ..steps import repair_pairing
from . import SessionOwner, require

require("langchain.agents", "langchain", "toolkeep's LangChain middleware")

from langchain.agents.middleware import AgentMiddleware  # noqa: E402
from langchain.agents.middleware.types import ModelRequest, ModelResponse  # noqa: E402
from langchain_core.messages import RemoveMessage, ToolMessage  # noqa: E402
from langgraph.graph.message import REMOVE_ALL_MESSAGES  # noqa: E402

__all__ = ["ToolkeepMiddleware"]


class ToolkeepMiddleware(SessionOwner, AgentMiddleware):
    """Run toolkeep inside a LangChain v1 agent; see the module docstring.

    The session is held as :class:`~toolkeep.integrations.SessionOwner` says; ``recall=False``
    leaves the ``recall``/``read_result`` tools out.
    """

    def __init__(
        self,
        session: Session | None = None,
        *,
        config: Config | None = None,
        recall: bool = True,
        trust_env: bool = True,
    ) -> None:
        super().__init__()
        self._hold(session, config, trust_env)
        self.tools = (
            langchain_tools(
                store=self.session.recall_store, workspace=self.session.workspace, config=self.session.config
            )
            if recall
            else []
        )
        self.report: Report | None = None
        """The report of the last prepared model request."""
        self.repairs: Report | None = None
        """The report of the last repair of the stored state that changed it."""

    # ------------------------------------------------------------------ the agent's stored state

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Pairing repair of the stored messages; replaces them only when something was wrong."""
        messages = state["messages"]
        repaired, report = run_pipeline(
            messages, format="langchain", config=self.session.config, steps=[repair_pairing]
        )
        if not report.repairs:
            return None
        self.repairs = report
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *repaired]}

    async def abefore_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """:meth:`before_model` for ``ainvoke``/``astream``."""
        return self.before_model(state, runtime)

    # ----------------------------------------------------------------------- the model's request

    def _prepared(self, request: ModelRequest) -> ModelRequest:
        messages, self.report = self.session.prepare(request.messages, format="langchain")
        return request.override(messages=messages)

    def wrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], ModelResponse],
    ) -> ModelResponse:
        """Send the model the prepared history; the state keeps the original."""
        return handler(self._prepared(request))

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse:
        """:meth:`wrap_model_call` for ``ainvoke``/``astream``."""
        return await handler(self._prepared(request))

    # ------------------------------------------------------------------ a tool's output entering

    def _capped(self, request: Any, result: Any) -> Any:
        """``result`` with its text cut to the tool's declared cap, if it declares one."""
        tool = getattr(request, "tool", None)
        cap = declared_cap(tool)
        for attribute in ("func", "coroutine"):
            cap = cap if cap is not None else declared_cap(getattr(tool, attribute, None))
        if cap is None or not isinstance(result, ToolMessage) or not isinstance(result.content, str):
            return result
        name = result.name or request.tool_call.get("name")
        text = self.session.cap_result(result.tool_call_id, name, result.content, cap=cap)
        return result if text == result.content else result.model_copy(update={"content": text})

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Run the tool; a declared cap applies to its output as it enters the state."""
        return self._capped(request, handler(request))

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        """:meth:`wrap_tool_call` for ``ainvoke``/``astream``."""
        return self._capped(request, await handler(request))
