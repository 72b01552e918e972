"""``await ToolLoop.aresults(response)``: ``async def`` tools awaited, the calls of one response run
concurrently under ``max_concurrency``; ``results()`` refuses a coroutine tool with a clear error.
End to end with the real ``AsyncAnthropic`` and ``AsyncOpenAI`` clients over a mock transport,
and for every loop format from the format's own response shape."""

from __future__ import annotations

import asyncio
import json
import warnings
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import toolkeep
from tests import integration_scenario as scenario
from toolkeep.integrations.raw import LOOP_FORMATS, ToolLoop

from .strategies import property_settings


async def aread(path: str) -> str:
    await asyncio.sleep(0)
    return scenario.read(path)


async def afetch(url: str) -> str:
    await asyncio.sleep(0)
    return scenario.fetch(url)


ASYNC_TOOLS = {"read": aread, "fetch": afetch}


def response_of(format: str, calls: list[tuple[str, str, dict[str, Any]]]) -> Any:
    """A model response holding ``calls`` (id, name, arguments), in ``format``'s own shape."""
    if format == "anthropic":
        return {"content": [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in calls]}
    if format == "openai-chat":
        return {"role": "assistant", "content": None, "tool_calls": [
            {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}} for i, n, a in calls]}  # fmt: skip
    if format == "openai-responses":
        return {"output": [{"type": "function_call", "call_id": i, "name": n, "arguments": json.dumps(a)}
                           for i, n, a in calls]}  # fmt: skip
    if format == "gemini":
        return {"candidates": [{"content": {"role": "model", "parts": [
            {"functionCall": {"id": i, "name": n, "args": a}} for i, n, a in calls]}}]}  # fmt: skip
    assert format == "bedrock"
    return {"output": {"message": {"role": "assistant", "content": [
        {"toolUse": {"toolUseId": i, "name": n, "input": a}} for i, n, a in calls]}}}  # fmt: skip


def mock_http(format: str, seen: scenario.Seen) -> Any:
    """An ``httpx2.AsyncClient`` whose transport checks each request, then answers the script."""
    httpx2 = pytest.importorskip("httpx2")
    answer = scenario.anthropic_message if format == "anthropic" else scenario.chat_completion

    async def handle(request: Any) -> Any:
        scenario.check_request(json.loads(request.content)["messages"], format, seen)
        turn = seen.requests - 1
        return httpx2.Response(200, json=answer(turn, scenario.next_step(turn, seen.last_texts)))

    return httpx2.AsyncClient(transport=httpx2.MockTransport(handle))


class TestRealClients:
    def test_async_anthropic_session_end_to_end(self) -> None:
        """The scripted session through ``AsyncAnthropic`` with ``async def`` tools: every request
        valid and within budget, each kind of work shown, recall byte-exact."""
        anthropic = pytest.importorskip("anthropic")
        seen = scenario.Seen()

        async def run() -> Any:
            client = anthropic.AsyncAnthropic(
                api_key="test", max_retries=0, http_client=mock_http("anthropic", seen)
            )
            messages = scenario.starting_messages("anthropic")
            with ToolLoop(ASYNC_TOOLS, format="anthropic", config=scenario.CONFIG) as loop:
                while True:
                    response = await client.messages.create(
                        model="claude-x",
                        max_tokens=100,
                        tools=loop.tool_definitions(),
                        messages=loop.prepare(messages),
                    )
                    messages.append({"role": "assistant", "content": response.content})
                    results = await loop.aresults(response)
                    if not results:
                        return response
                    messages += results

        response = asyncio.run(run())
        scenario.check_session(seen)
        assert response.content[0].text == scenario.FINAL_TEXT

    def test_async_openai_chat_with_sync_and_async_tools(self) -> None:
        """``AsyncOpenAI`` chat completions: a plain ``read`` and an ``async def`` fetch together."""
        openai = pytest.importorskip("openai")
        seen = scenario.Seen()
        tools = {"read": scenario.read, "fetch": afetch}

        async def run() -> None:
            client = openai.AsyncOpenAI(
                api_key="test", max_retries=0, http_client=mock_http("openai-chat", seen)
            )
            messages = scenario.starting_messages("openai-chat")
            with ToolLoop(tools, format="openai-chat", config=scenario.CONFIG) as loop:
                while True:
                    completion = await client.chat.completions.create(
                        model="gpt-x", tools=loop.tool_definitions(), messages=loop.prepare(messages)
                    )
                    messages.append(completion.choices[0].message)
                    results = await loop.aresults(completion)
                    if not results:
                        return
                    messages += results

        asyncio.run(run())
        scenario.check_session(seen)


class Gauge:
    """Counts how many tool calls run at once."""

    def __init__(self) -> None:
        self.running = 0
        self.most = 0
        self.order: list[int] = []

    async def tool(self, n: int, steps: int) -> str:
        self.running += 1
        self.most = max(self.most, self.running)
        for _ in range(steps):
            await asyncio.sleep(0)
        self.running -= 1
        self.order.append(n)
        return f"done {n}"


class TestConcurrency:
    @property_settings(30)
    @given(calls=st.integers(1, 12), bound=st.integers(1, 10), steps=st.lists(st.integers(1, 6), min_size=12))
    def test_bounded_and_in_call_order(self, calls: int, bound: int, steps: list[int]) -> None:
        """At most ``max_concurrency`` calls run at once, as many as that when there are enough
        calls, and the results come in the order of the calls whatever order they finish in."""
        gauge = Gauge()
        response = response_of(
            "anthropic", [(f"t{n}", "work", {"n": n, "steps": steps[n]}) for n in range(calls)]
        )
        with ToolLoop({"work": gauge.tool}, format="anthropic", max_concurrency=bound) as loop:
            (message,) = asyncio.run(loop.aresults(response))
        assert gauge.most == min(bound, calls)
        blocks = message["content"]
        assert [b["tool_use_id"] for b in blocks] == [f"t{n}" for n in range(calls)]
        assert [b["content"] for b in blocks] == [f"done {n}" for n in range(calls)]

    @pytest.mark.parametrize("bad", [0, -1, 1.5, True, "8"])
    def test_bad_bound_is_refused(self, bad: object) -> None:
        with pytest.raises(toolkeep.ConfigError, match="max_concurrency"):
            ToolLoop({}, format="anthropic", max_concurrency=bad)  # type: ignore[arg-type]


class TestEveryFormat:
    @pytest.mark.parametrize("format", LOOP_FORMATS)
    def test_aresults_answers_every_call_in_the_formats_shape(self, format: Any) -> None:
        """Each loop format: calls read by the format, async and plain tools, an async tool that
        raises, an unknown tool; the same results, in the format's own shape, as results() gives."""

        async def broken(path: str) -> str:
            raise OSError(f"cannot open {path}")

        calls = [("c1", "fetch", {"url": "u"}), ("c2", "read", {"path": "a.py"}), ("c3", "broken", {"path": "b"}),
                 ("c4", "nope", {})]  # fmt: skip
        tools = {"fetch": afetch, "read": scenario.read, "broken": broken}
        with ToolLoop(tools, format=format, config=scenario.CONFIG) as loop:
            response = response_of(format, calls)
            answered = asyncio.run(loop.aresults(response))
            sync = ToolLoop({"fetch": scenario.fetch, "read": scenario.read, "broken": lambda path: _raise(path)},
                            format=format, session=loop.session).results(response)  # fmt: skip
        assert json.dumps(answered, default=str) == json.dumps(sync, default=str)
        text = json.dumps(answered, default=str)
        assert "[TRUNCATED " in text and "OSError: cannot open b" in text and "unknown tool 'nope'" in text


def _raise(path: str) -> str:
    raise OSError(f"cannot open {path}")


class TestRefusals:
    def test_results_refuses_an_async_tool_without_a_warning(self) -> None:
        """``results()`` with an ``async def`` tool: a ConfigError naming ``aresults``, raised
        before any call runs, and no "coroutine was never awaited" warning."""
        ran: list[str] = []

        def plain() -> str:
            ran.append("plain")
            return "ok"

        async def coro() -> str:
            return "never"

        response = response_of("anthropic", [("t1", "plain", {}), ("t2", "coro", {})])
        with ToolLoop({"plain": plain, "coro": coro}, format="anthropic") as loop, warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(toolkeep.ConfigError, match=r"await loop\.aresults"):
                loop.results(response)
        assert ran == []

    def test_a_plain_function_returning_a_coroutine_is_refused_too(self) -> None:
        """A ``def`` that returns a coroutine (a wrapper, a partial) is caught when it returns."""

        async def inner() -> str:
            return "never"

        def wrapper() -> Any:
            return inner()

        response = response_of("openai-chat", [("c1", "wrapped", {})])
        with ToolLoop({"wrapped": wrapper}, format="openai-chat") as loop, warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(toolkeep.ConfigError, match="is async"):
                loop.results(response)
            (message,) = asyncio.run(loop.aresults(response))  # aresults awaits what it returns
        assert message["content"] == "never"


def test_toolkeeps_own_error_in_one_call_stops_the_others() -> None:
    """When one call of a response fails inside toolkeep (here: the session is closed by then),
    ``aresults`` raises that error and the sibling calls still waiting are cancelled, not left
    running unobserved."""
    finished: list[str] = []

    async def slow() -> str:
        await asyncio.sleep(0.5)
        finished.append("slow")
        return "done"

    async def closes() -> str:
        loop.session.close()
        return "x" * 100

    loop = ToolLoop({"slow": slow, "closes": closes}, format="anthropic")
    response = response_of("anthropic", [("t1", "slow", {}), ("t2", "closes", {})])

    async def run() -> None:
        with pytest.raises(toolkeep.SessionClosedError):
            await loop.aresults(response)
        await asyncio.sleep(0.7)

    asyncio.run(run())
    assert finished == []
