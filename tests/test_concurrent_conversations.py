"""Eight conversations at once through one integration object give, byte for byte, what each
gives on its own (issue: "threads"): real threads through one ``ToolLoop``, real processes forked
from one ``ToolLoop`` (sharing its workspace and archive on disk), and asyncio tasks through one
LangChain middleware shared by eight real ``create_agent`` graphs."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import toolkeep
from toolkeep.integrations.raw import ToolLoop
from toolkeep.shorten import CCR_MARKER_RE

CONVERSATIONS = 8
TURNS = 7


def read(path: str) -> str:
    """A tool whose output is big and differs by conversation and turn."""
    return "".join(f"{path} line {k}: {'v' * (k % 50)}\n" for k in range(900))


def response(n: int, turn: int) -> dict[str, Any]:
    if turn == TURNS:
        return {"role": "assistant", "content": [{"type": "text", "text": f"done {n}"}]}
    return {
        "role": "assistant",
        "content": [
            {"type": "text", "text": f"reading {turn}"},
            {
                "type": "tool_use",
                "id": f"toolu_{n}_{turn}",
                "name": "read",
                "input": {"path": f"/c{n}/f{turn}.py"},
            },
        ],
    }


def converse(loop: ToolLoop, n: int) -> list[str]:
    """One conversation through ``loop``: every request it prepares, as JSON."""
    messages: list[Any] = [{"role": "user", "content": f"conversation {n}: read the files"}]
    sent = []
    for turn in range(TURNS + 1):
        sent.append(json.dumps(loop.prepare(messages), sort_keys=True))
        reply = response(n, turn)
        messages = [*messages, reply, *loop.results(reply)]
    return sent


def serial(tmp_path: Path, config: toolkeep.Config) -> dict[int, list[str]]:
    out = {}
    for n in range(CONVERSATIONS):
        with toolkeep.Session(config, workspace=tmp_path / "ws") as session:
            out[n] = converse(ToolLoop({"read": read}, format="anthropic", session=session), n)
    return out


@pytest.mark.parametrize("policy", ["spec", "economy"])
def test_threads_through_one_tool_loop(policy: str, tmp_path: Path) -> None:
    config = toolkeep.Config(policy=policy)
    expected = serial(tmp_path, config)
    got: dict[int, list[str]] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(CONVERSATIONS)
    with toolkeep.Session(config, workspace=tmp_path / "ws") as session:
        loop = ToolLoop({"read": read}, format="anthropic", session=session)

        def run(n: int) -> None:
            try:
                start.wait()
                got[n] = converse(loop, n)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(n,)) for n in range(CONVERSATIONS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        # each conversation kept its own state: the last requests were prepared incrementally
        assert len(session.conversations) == CONVERSATIONS
    assert errors == []
    assert got == expected


_FORKED: tuple[ToolLoop, Any] | None = None
"""The loop and the start barrier the forked processes inherit (set just before the fork)."""


def _converse_forked(n: int) -> tuple[int, int, list[str]]:
    assert _FORKED is not None
    loop, start = _FORKED
    start.wait(timeout=60)  # all eight at once, one per process
    return n, os.getpid(), converse(loop, n)


@pytest.mark.parametrize("policy", ["spec", "economy"])
def test_processes_forked_from_one_tool_loop(policy: str, tmp_path: Path) -> None:
    """Eight processes, each forked from the one ``ToolLoop`` (so each holds the same object, its
    session and workspace), run their conversations at once, writing results and originals into
    the one workspace on disk: every request is byte-equal to the serial run's, and every original
    a marker names is in the shared archive afterwards."""
    global _FORKED
    config = toolkeep.Config(policy=policy)
    expected = serial(tmp_path, config)
    with toolkeep.Session(config, workspace=tmp_path / "ws") as session:
        fork = multiprocessing.get_context("fork")
        _FORKED = ToolLoop({"read": read}, format="anthropic", session=session), fork.Barrier(CONVERSATIONS)
        try:
            with fork.Pool(CONVERSATIONS) as pool:
                done = pool.map(_converse_forked, range(CONVERSATIONS), chunksize=1)
        finally:
            _FORKED = None
        assert len({pid for _, pid, _ in done} | {os.getpid()}) == CONVERSATIONS + 1
        got = {n: sent for n, _, sent in done}
        assert got == expected
        keys = {key for sent in got.values() for text in sent for key in CCR_MARKER_RE.findall(text)}
        assert keys and all(session.recall(key) is not None for key in keys)


def test_asyncio_tasks_through_one_langchain_middleware(tmp_path: Path) -> None:
    pytest.importorskip("langchain.agents")
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, messages_to_dict
    from langchain_core.tools import StructuredTool

    from toolkeep.integrations.langchain import ToolkeepMiddleware

    class Recording(GenericFakeChatModel):
        sent: Any = None

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
            # LangChain gives each message a random id of its own: not part of what is compared
            dicts = [
                {**m, "data": {k: v for k, v in m["data"].items() if k != "id"}}
                for m in messages_to_dict(messages)
            ]
            self.sent.append(json.dumps(dicts, sort_keys=True))
            return super()._generate(messages, *args, **kwargs)

    def script(n: int) -> Iterator[AIMessage]:
        for turn in range(TURNS):
            call = {"name": "read", "args": {"path": f"/c{n}/f{turn}.py"}, "id": f"call_{n}_{turn}"}
            yield AIMessage(content="", tool_calls=[call])
        yield AIMessage(content=f"done {n}")

    def agent(middleware: ToolkeepMiddleware, n: int, sent: list[str]) -> Any:
        model = Recording(messages=script(n), sent=sent)
        return create_agent(
            model, tools=[StructuredTool.from_function(read, name="read")], middleware=[middleware]
        )

    def prompt(n: int) -> dict[str, Any]:
        return {"messages": [HumanMessage(f"conversation {n}: read the files")]}

    expected: dict[int, list[str]] = {}
    for n in range(CONVERSATIONS):
        expected[n] = []
        with toolkeep.Session(workspace=tmp_path / "ws") as session:
            asyncio.run(agent(ToolkeepMiddleware(session), n, expected[n]).ainvoke(prompt(n)))

    got: dict[int, list[str]] = {n: [] for n in range(CONVERSATIONS)}

    async def all_at_once(middleware: ToolkeepMiddleware) -> None:
        await asyncio.gather(*(agent(middleware, n, got[n]).ainvoke(prompt(n)) for n in range(CONVERSATIONS)))

    with toolkeep.Session(workspace=tmp_path / "ws") as session:
        asyncio.run(all_at_once(ToolkeepMiddleware(session)))
    assert got == expected
    assert all(len(v) == TURNS + 1 for v in got.values())
