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

With ``async def`` tools, ``results = await loop.aresults(response)`` awaits them, the calls of
one response concurrently (at most ``max_concurrency`` at a time; plain functions run in worker
threads meanwhile); :meth:`ToolLoop.results` refuses a coroutine tool with a
:class:`~toolkeep.ConfigError` instead of sending the model ``"<coroutine object ...>"``.

The format reads the calls out of the response and writes the results
(:meth:`~toolkeep.formats.Format.response_calls`, :meth:`~toolkeep.formats.Format.result_messages`):
one user message of ``tool_result`` blocks (Anthropic), one ``role: "tool"`` message per call
(OpenAI Chat Completions), ``function_call_output`` items (OpenAI Responses), one user
``Content`` of ``function_response`` parts (Gemini, google-genai), one user message of
``toolResult`` blocks (Bedrock Converse); ``[]`` when there were none.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, cast

from ..config import Config, ToolCap
from ..dispatch import declared_cap
from ..exceptions import ConfigError
from ..formats import FORMATS, get_format
from ..formats import ToolCall as ToolCall  # where it lived before the formats read responses
from ..recall import READ_TOOL, RECALL_TOOL, tool_specs
from ..report import Report
from ..session import Session
from . import SessionOwner

__all__ = ["LOOP_FORMATS", "LoopFormat", "ToolLoop"]

_log = logging.getLogger("toolkeep")

LoopFormat = Literal["anthropic", "openai-chat", "openai-responses", "gemini", "bedrock"]
LOOP_FORMATS: tuple[LoopFormat, ...] = tuple(
    cast(LoopFormat, name) for name, f in FORMATS.items() if f.request is not None
)
"""Formats :class:`ToolLoop` reads calls from and writes results in: those of a provider's
request (:attr:`~toolkeep.formats.Format.request`), whose model response holds the calls
(:data:`LoopFormat` names them for type checkers)."""


class ToolLoop(SessionOwner):
    """A session, your tools and a format: see the module docstring.

    ``tools`` maps a tool name to a function called with the call's arguments as keywords; it
    returns a ``str`` (anything else is sent as JSON). An exception becomes an error result
    (``is_error`` where the format has it) instead of breaking the loop with a call unanswered.
    The session is held as :class:`~toolkeep.integrations.SessionOwner` says; a session the loop
    makes itself also caps, in :meth:`prepare`, each tool's results at the cap the tool declares
    with :func:`toolkeep.result_cap` (a session you pass keeps its own config: a cap form made
    under a smaller declared cap is still sent as it is).
    ``max_concurrency`` bounds how many calls of one response :meth:`aresults` runs at a time.
    """

    def __init__(
        self,
        tools: Mapping[str, Callable[..., Any]],
        *,
        format: LoopFormat,
        session: Session | None = None,
        config: Config | None = None,
        max_concurrency: int = 8,
        trust_env: bool = True,
    ) -> None:
        if format not in LOOP_FORMATS:
            raise ConfigError(f"ToolLoop format must be one of {', '.join(LOOP_FORMATS)}, got {format!r}")
        clash = {RECALL_TOOL, READ_TOOL} & set(tools)
        if clash:
            raise ConfigError(f"tool name(s) {', '.join(sorted(clash))} are toolkeep's own; rename yours")
        if not isinstance(max_concurrency, int) or isinstance(max_concurrency, bool) or max_concurrency < 1:
            raise ConfigError(
                f"max_concurrency must be a whole number of at least 1, got {max_concurrency!r}"
            )
        self.tools = dict(tools)
        self.format: LoopFormat = format
        self.max_concurrency = max_concurrency
        self._format = get_format(format)
        declared = {name: cap for name, f in self.tools.items() if (cap := declared_cap(f)) is not None}
        if session is None and declared:
            config = Config.resolve(config, trust_env=trust_env)
            config = config.replace(tool_caps={**config.tool_caps, **_declared_settings(config, declared)})
        self._hold(session, config, trust_env)
        self._declared = _declared_settings(self.session.config, declared)
        """Each declared cap as the setting it enters with, by lowercased tool name: the one a
        result is cut to when it enters, and (in the session this loop made) in ``prepare``."""
        self.report: Report | None = None
        """The report of the last :meth:`prepare`."""

    def tool_definitions(self) -> list[Any]:
        """The ``recall`` and ``read_result`` definitions to add to the request's ``tools``."""
        return self._format.tool_definitions(tool_specs((RECALL_TOOL, READ_TOOL)))

    def prepare(self, messages: Sequence[Any]) -> list[Any]:
        """The history to send (``messages`` is never mutated); the report goes to :attr:`report`."""
        prepared, self.report = self.session.prepare(messages, format=self.format)
        return prepared

    def calls(self, response: Any) -> list[ToolCall]:
        """The tool calls in a response (the SDK object, its ``model_dump()``, or the assistant
        message / output items themselves); arguments that do not parse come as their text."""
        return self._format.response_calls(response)

    def run(self, call: ToolCall) -> tuple[str, bool]:
        """Run one call: ``(text, is_error)``, the text already within the tool's cap.

        Raises :class:`~toolkeep.ConfigError` for an ``async def`` tool: use :meth:`aresults`."""
        answered = self._answer_first(call)
        if answered is not None:
            return answered
        function = self.tools[call.name]
        assert isinstance(call.arguments, Mapping)
        if inspect.iscoroutinefunction(function):
            raise _async_tool(call.name)
        try:
            value = function(**call.arguments)
        except Exception as exc:  # the model must get an answer for every call, failure included
            return _failed(call, exc)
        if inspect.isawaitable(value):  # a plain function that returned a coroutine
            if inspect.iscoroutine(value):
                value.close()  # never awaited: no "coroutine was never awaited" warning
            raise _async_tool(call.name)
        return self._entered(call, function, value)

    async def arun(self, call: ToolCall) -> tuple[str, bool]:
        """:meth:`run` for an event loop: an ``async def`` tool is awaited, a plain one runs in a
        worker thread (so the calls of one response overlap)."""
        answered = self._answer_first(call)
        if answered is not None:
            return answered
        function = self.tools[call.name]
        assert isinstance(call.arguments, Mapping)
        try:
            if inspect.iscoroutinefunction(function):
                value = await function(**call.arguments)
            else:
                value = await asyncio.to_thread(function, **call.arguments)
                if inspect.isawaitable(value):
                    value = await value
        except Exception as exc:  # as in run: an answer for every call
            return _failed(call, exc)
        return self._entered(call, function, value)

    def _answer_first(self, call: ToolCall) -> tuple[str, bool] | None:
        """The answer to a call that runs none of the caller's tools: recall/read_result, an
        unknown tool, arguments that are not an object; ``None`` for a call to run."""
        answer = self.session.handle_tool_call(call.name, call.arguments)
        if answer is not None:  # recall/read_result pages are sized to pass every cap
            return answer, False
        if call.name not in self.tools:
            known = ", ".join(sorted(self.tools)) or "none"
            return f"Error: unknown tool {call.name!r} (tools: {known})", True
        if not isinstance(call.arguments, Mapping):
            return f"Error: the arguments of {call.name} are not a JSON object: {call.arguments!r}", True
        return None

    def _entered(self, call: ToolCall, function: Callable[..., Any], value: Any) -> tuple[str, bool]:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        return self.cap(call.name, call.id, text, self._declared.get(call.name.lower())), False

    def cap(self, tool: str, call_id: str, text: str, cap: int | ToolCap | None = None) -> str:
        """``text`` cut to ``tool``'s cap, or to ``cap`` (one the tool declared with
        :func:`toolkeep.result_cap`), at most that long, the full output archived where it
        outlives the session and saved first (:meth:`Session.cap_result`); or as is."""
        return self.session.cap_result(call_id or "result", tool, text, cap=cap)

    def results(self, response: Any) -> list[Any]:
        """The messages answering every call in ``response``, to append to the history.

        Raises :class:`~toolkeep.ConfigError`, before running any call, when a called tool is
        an ``async def`` function: ``await`` :meth:`aresults` instead."""
        calls = self.calls(response)
        for call in calls:
            if inspect.iscoroutinefunction(self.tools.get(call.name)):
                raise _async_tool(call.name)
        return self._format.result_messages([(call, *self.run(call)) for call in calls])

    async def aresults(self, response: Any) -> list[Any]:
        """:meth:`results` for an event loop: the calls of ``response`` run concurrently, at
        most :attr:`max_concurrency` at a time, ``async def`` tools awaited; the results come
        in the order of the calls."""
        calls = self.calls(response)
        gate = asyncio.Semaphore(self.max_concurrency)

        async def one(call: ToolCall) -> tuple[str, bool]:
            async with gate:
                return await self.arun(call)

        tasks = [asyncio.ensure_future(one(call)) for call in calls]
        try:
            answers = await asyncio.gather(*tasks)
        except BaseException:  # toolkeep's own error (a tool's is an answer): the rest are stopped
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        return self._format.result_messages(
            [(call, *answer) for call, answer in zip(calls, answers, strict=True)]
        )


def _async_tool(name: str) -> ConfigError:
    return ConfigError(f"tool {name!r} is async: use 'await loop.aresults(response)', not loop.results()")


def _failed(call: ToolCall, exc: Exception) -> tuple[str, bool]:
    _log.info("toolkeep: tool %s raised %s", call.name, type(exc).__name__)
    return f"Error: {type(exc).__name__}: {exc}", True


def _declared_settings(config: Config, declared: Mapping[str, int]) -> dict[str, ToolCap]:
    """The tool settings of ``config`` with each declared cap in place of the cap."""
    out: dict[str, ToolCap] = {}
    for name, cap in declared.items():
        own = config.tool_caps.get(name.lower())
        out[name.lower()] = (
            ToolCap(cap)
            if not isinstance(own, ToolCap)
            else ToolCap(cap, own.head, own.tail, own.max_result_chars)
        )
    return out
