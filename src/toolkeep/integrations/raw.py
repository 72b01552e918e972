"""The hand-written tool loop over a provider's own client, with toolkeep in it.

:class:`ToolLoop` does the three things such a loop needs and nothing else: prepares each
request (:meth:`ToolLoop.prepare`), runs the model's tool calls through your functions with each
tool's cap applied as the result enters the history (:meth:`ToolLoop.results`), answering
``recall``/``read_result`` itself, and closes the session workspace when the ``with`` block ends.
You keep the loop, the client call and the history::

    with ToolLoop({"read": read_file}, format="anthropic") as loop:
        while True:
            response = client.messages.create(
                model=MODEL, max_tokens=1024, tools=MY_TOOLS + loop.tool_definitions(),
                messages=loop.prepare(messages))
            messages.append({"role": "assistant", "content": response.content})
            results = loop.results(response)
            if not results:
                break
            messages += results

The format reads the calls out of the response and writes the results
(:meth:`~toolkeep.formats.Format.response_calls`, :meth:`~toolkeep.formats.Format.result_messages`):
one user message of ``tool_result`` blocks (Anthropic), one ``role: "tool"`` message per call
(OpenAI Chat Completions), ``function_call_output`` items (OpenAI Responses), one user
``Content`` of ``function_response`` parts (Gemini, google-genai), one user message of
``toolResult`` blocks (Bedrock Converse); ``[]`` when there were none.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from ..config import Config
from ..dispatch import declared_cap
from ..exceptions import ConfigError
from ..formats import ToolCall as ToolCall  # where it lived before the formats read responses
from ..formats import get_format
from ..recall import READ_TOOL, RECALL_TOOL, tool_definitions
from ..report import Report
from ..session import Session
from . import SessionOwner

__all__ = ["LOOP_FORMATS", "LoopFormat", "ToolLoop"]

_log = logging.getLogger("toolkeep")

LoopFormat = Literal["anthropic", "openai-chat", "openai-responses", "gemini", "bedrock"]
LOOP_FORMATS: tuple[LoopFormat, ...] = ("anthropic", "openai-chat", "openai-responses", "gemini", "bedrock")
"""Formats :class:`ToolLoop` reads calls from and writes results in: those whose model response
holds the calls."""


class ToolLoop(SessionOwner):
    """A session, your tools and a format: see the module docstring.

    ``tools`` maps a tool name to a function called with the call's arguments as keywords; it
    returns a ``str`` (anything else is sent as JSON). An exception becomes an error result
    (``is_error`` where the format has it) instead of breaking the loop with a call unanswered.
    The session is held as :class:`~toolkeep.integrations.SessionOwner` says.
    """

    def __init__(
        self,
        tools: Mapping[str, Callable[..., Any]],
        *,
        format: LoopFormat,
        session: Session | None = None,
        config: Config | None = None,
    ) -> None:
        if format not in LOOP_FORMATS:
            raise ConfigError(f"ToolLoop format must be one of {', '.join(LOOP_FORMATS)}, got {format!r}")
        clash = {RECALL_TOOL, READ_TOOL} & set(tools)
        if clash:
            raise ConfigError(f"tool name(s) {', '.join(sorted(clash))} are toolkeep's own; rename yours")
        self.tools = dict(tools)
        self.format: LoopFormat = format
        self._format = get_format(format)
        self._hold(session, config)
        self.report: Report | None = None
        """The report of the last :meth:`prepare`."""

    def tool_definitions(self) -> list[Any]:
        """The ``recall`` and ``read_result`` definitions to add to the request's ``tools``."""
        return tool_definitions(self.format)

    def prepare(self, messages: Sequence[Any]) -> list[Any]:
        """The history to send (``messages`` is never mutated); the report goes to :attr:`report`."""
        prepared, self.report = self.session.prepare(messages, format=self.format)
        return prepared

    def calls(self, response: Any) -> list[ToolCall]:
        """The tool calls in a response (the SDK object, its ``model_dump()``, or the assistant
        message / output items themselves); arguments that do not parse come as their text."""
        return self._format.response_calls(response)

    def run(self, call: ToolCall) -> tuple[str, bool]:
        """Run one call: ``(text, is_error)``, the text already within the tool's cap."""
        answer = self.session.handle_tool_call(call.name, call.arguments)
        if answer is not None:  # recall/read_result pages are sized to pass every cap
            return answer, False
        function = self.tools.get(call.name)
        if function is None:
            known = ", ".join(sorted(self.tools)) or "none"
            return f"Error: unknown tool {call.name!r} (tools: {known})", True
        if not isinstance(call.arguments, Mapping):
            return f"Error: the arguments of {call.name} are not a JSON object: {call.arguments!r}", True
        try:
            value = function(**call.arguments)
        except Exception as exc:  # the model must get an answer for every call, failure included
            _log.info("toolkeep: tool %s raised %s", call.name, type(exc).__name__)
            return f"Error: {type(exc).__name__}: {exc}", True
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        return self.cap(call.name, call.id, text, declared_cap(function)), False

    def cap(self, tool: str, call_id: str, text: str, cap: int | None = None) -> str:
        """``text`` cut to ``tool``'s cap, or to ``cap`` (one the tool declared with
        :func:`toolkeep.result_cap`), the full output archived where it outlives the session
        and saved first (:meth:`Session.cap_result`); or as is."""
        return self.session.cap_result(call_id or "result", tool, text, cap=cap)

    def results(self, response: Any) -> list[Any]:
        """The messages answering every call in ``response``, to append to the history."""
        return self._format.result_messages([(call, *self.run(call)) for call in self.calls(response)])
