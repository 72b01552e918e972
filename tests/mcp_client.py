"""The MCP SDK's own client against a real toolkeep MCP server, for the MCP tests: sessions over
stdio (``toolkeep mcp`` as a subprocess) and streamable HTTP, usable from plain test functions
through a blocking portal, and the pages of a long answer put back together."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.upstream_proxy import TOOLKEEP

__all__ = ["McpClient", "examples_archived", "http_client", "stdio_client_for", "whole_text"]

_MORE = re.compile(r"; more: call .*, start_line=(\d+)(?:, start_char=(\d+))?\]$")


class McpClient:
    """An initialized client session, called from synchronous code."""

    def __init__(self, portal: anyio.from_thread.BlockingPortal, session: ClientSession) -> None:
        self.portal = portal
        self.session = session

    def list_tools(self) -> list[Any]:
        return list(self.portal.call(self.session.list_tools).tools)

    def call(self, name: str, arguments: dict[str, Any] | None) -> str:
        """The text of the tool's answer; it must be one text block and not a protocol error."""
        result = self.portal.call(self.session.call_tool, name, arguments)
        assert not result.is_error, result
        assert len(result.content) == 1 and result.content[0].type == "text", result
        text: str = result.content[0].text
        return text

    def raw(self, name: str, arguments: dict[str, Any] | None) -> Any:
        return self.portal.call(self.session.call_tool, name, arguments)


@contextlib.asynccontextmanager
async def _session(transport: Any) -> AsyncIterator[ClientSession]:
    async with transport as streams, ClientSession(streams[0], streams[1]) as session:
        await session.initialize()
        yield session


@contextlib.contextmanager
def _client(transport: Any) -> Iterator[McpClient]:
    with (
        anyio.from_thread.start_blocking_portal() as portal,
        portal.wrap_async_context_manager(_session(transport)) as session,
    ):
        yield McpClient(portal, session)


@contextlib.contextmanager
def stdio_client_for(*args: str, env: dict[str, str] | None = None) -> Iterator[McpClient]:
    """A session with ``toolkeep mcp ARGS`` started as a subprocess."""
    command, *rest = TOOLKEEP
    params = StdioServerParameters(
        command=command, args=[*rest, "mcp", *args], env={**os.environ, **(env or {})}
    )
    with open(os.devnull, "w") as errlog, _client(stdio_client(params, errlog=errlog)) as client:
        yield client


def http_client(url: str) -> contextlib.AbstractContextManager[McpClient]:
    """A session with the streamable-HTTP server at ``url``."""
    return _client(streamable_http_client(url))


def whole_text(client: McpClient, name: str, arguments: dict[str, Any]) -> str:
    """The text of every page of ``name``'s answer from its first page on, put back together
    (each page's text is everything before its closing note; an answer without a note is whole)."""
    out: list[str] = []
    args = dict(arguments)
    for _ in range(10_000):
        answer = client.call(name, args)
        text, sep, note = answer.rpartition("\n\n[")
        if not sep or not note.endswith("]"):
            return "".join(out) + answer
        out.append(text)
        more = _MORE.search(note)
        if more is None:
            assert note.endswith("end of the requested range]"), note
            return "".join(out)
        args["start_line"] = int(more[1])
        if more[2]:
            args["start_char"] = int(more[2])
        else:
            args.pop("start_char", None)
    raise AssertionError("the pages never ended")


def examples_archived(tmp: Path, *store: str) -> tuple[Path, list[str], list[str]]:
    """Run the real ``toolkeep prepare`` on the example session with a workspace in ``tmp``
    (and ``--store URL`` if given); the workspace, the archive keys its output names and the
    saved files it names."""
    import subprocess

    root = Path(__file__).resolve().parent.parent
    workspace = tmp / "ws"
    out = tmp / "prepared.json"
    subprocess.run(
        [*TOOLKEEP, "prepare", str(root / "examples" / "broken-session.json"), "-o", str(out),
         "--workspace", str(workspace), "--policy", "spec", *store],
        check=True, capture_output=True,
    )  # fmt: skip
    text = out.read_text()
    keys = sorted(set(re.findall(r"<<ccr:([0-9a-f]{16})>>", text)))
    paths = sorted(set(re.findall(r"full output saved to ([^\]\\]+)\]", text)))
    assert keys and paths, text[:2000]
    return workspace, keys, paths
