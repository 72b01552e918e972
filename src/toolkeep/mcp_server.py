"""The way back as an MCP server: ``recall`` and ``read_result`` for any agent that speaks MCP.

The two tools are :mod:`toolkeep.recall`'s, with the same names, descriptions, argument schemas
and answers (:func:`~toolkeep.recall.tool_specs`, :func:`~toolkeep.recall.handle_tool_call`):
``recall`` gives back the original behind a ``<<ccr:KEY>>`` marker, ``read_result`` pages a
file the session saved (``[full output saved to PATH]``). Whatever arguments the model sends,
the answer is a tool result it can act on, never a protocol error.

Serve them over stdio (the agent starts the server) or streamable HTTP (one server for agents
anywhere; ``toolkeep proxy`` serves it at ``/toolkeep/mcp`` on its own archive)::

    toolkeep mcp --workspace DIR                           # stdio
    toolkeep mcp --transport http --port 8788 --workspace DIR   # http://127.0.0.1:8788/mcp

Register it with an agent:

- Claude Code: ``claude mcp add toolkeep -- toolkeep mcp --workspace DIR``, or a file passed
  with ``claude --mcp-config FILE``:
  ``{"mcpServers": {"toolkeep": {"command": "toolkeep", "args": ["mcp", "--workspace", "DIR"]}}}``
  (over HTTP: ``{"mcpServers": {"toolkeep": {"type": "http", "url": "http://127.0.0.1:8787/toolkeep/mcp"}}}``).
- Codex, in ``~/.codex/config.toml``: ``[mcp_servers.toolkeep]`` with
  ``command = "toolkeep"`` and ``args = ["mcp", "--workspace", "DIR"]`` (over HTTP:
  ``url = "http://127.0.0.1:8787/toolkeep/mcp"``).
- Gemini CLI, in ``.gemini/settings.json``: ``{"mcpServers": {"toolkeep": {"command":
  "toolkeep", "args": ["mcp", "--workspace", "DIR"]}}}`` (over HTTP: ``"httpUrl":
  "http://127.0.0.1:8787/toolkeep/mcp"``).

The HTTP endpoint is stateless and answers in JSON (no session to keep: several replicas can
serve one agent). A request that reaches it over loopback must name a loopback host
(``127.0.0.1:PORT``, ``localhost:PORT``, ``[::1]:PORT``) and, if it has an ``Origin``, a loopback
origin: a web page that rebinds its own name to 127.0.0.1 gets nothing. Requests over another
interface are not checked that way (the server was bound there on purpose).

Needs the ``mcp`` extra (``pip install 'toolkeep[mcp]'``); ``import toolkeep`` never does.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .config import Config
from .exceptions import ConfigError
from .recall import handle_tool_call, tool_specs
from .stores import ArchiveStore
from .version import __version__
from .workspace import Workspace, WorkspaceReader

if TYPE_CHECKING:
    from mcp.server import Server
    from mcp.server.context import ServerRequestContext
    from mcp.types import CallToolRequestParams, CallToolResult, ListToolsResult, PaginatedRequestParams
    from starlette.routing import Route
    from starlette.types import Receive, Scope, Send

__all__ = [
    "INSTALL_HINT",
    "SERVER_NAME",
    "HttpEndpoint",
    "create_http_endpoint",
    "create_server",
    "require_sdk",
    "serve_stdio",
]

SERVER_NAME = "toolkeep"
INSTALL_HINT = "the MCP server needs the mcp package: pip install 'toolkeep[mcp]'"
INSTRUCTIONS = (
    "Shortened tool results carry a <<ccr:KEY>> marker or name a saved file "
    "([full output saved to PATH]). recall(key) gives the original back, read_result(path) the "
    "saved file; both page large texts."
)

_LOOPBACK_HOSTS = ["127.0.0.1", "localhost", "[::1]"]


def require_sdk() -> None:
    """:class:`~toolkeep.exceptions.ConfigError` with :data:`INSTALL_HINT` unless the ``mcp``
    package can be imported."""
    try:
        import mcp.server  # noqa: F401
    except ImportError as exc:
        raise ConfigError(INSTALL_HINT) from exc


def create_server(
    store: ArchiveStore | None,
    workspace: Workspace | WorkspaceReader | None,
    config: Config | None = None,
) -> Server[Any]:
    """An MCP server (the SDK's low-level ``mcp.server.Server``) with the tools ``recall`` and
    ``read_result``, answered from ``store`` and ``workspace`` (either may be ``None``: its tool
    then says there is nothing to recall or read). :class:`~toolkeep.exceptions.ConfigError`
    with an install hint when the ``mcp`` package is missing.

    Run it over stdio with :func:`serve_stdio`, over HTTP with :func:`create_http_endpoint`.
    """
    require_sdk()
    import anyio
    import mcp.types as types
    from mcp.server import Server
    from mcp.shared.exceptions import MCPError

    tools = [
        types.Tool(name=s.name, description=s.description, input_schema=s.fresh_schema())
        for s in tool_specs()
    ]

    async def list_tools(
        ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        return types.ListToolsResult(tools=[t.model_copy(deep=True) for t in tools])

    async def call_tool(ctx: ServerRequestContext[Any], params: CallToolRequestParams) -> CallToolResult:
        # the store and the workspace block (files, SQLite, Redis): not on the event loop
        answer = await anyio.to_thread.run_sync(
            functools.partial(
                handle_tool_call,
                params.name,
                params.arguments,
                store=store,
                workspace=workspace,
                config=config,
            )
        )
        if answer is None:  # not a tool of ours: the protocol's error, as for any unknown tool
            known = ", ".join(t.name for t in tools)
            raise MCPError(
                code=types.INVALID_PARAMS, message=f"Unknown tool: {params.name!r} (tools: {known})"
            )
        return types.CallToolResult(content=[types.TextContent(type="text", text=_sendable(answer))])

    return Server(
        SERVER_NAME,
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def _sendable(text: str) -> str:
    """``text``, or, if it holds lone surrogates (an original decoded with ``surrogateescape``),
    with each written as its ``\\udXXX`` escape: JSON-RPC over UTF-8 cannot carry them as they are."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


async def serve_stdio(
    store: ArchiveStore | None,
    workspace: Workspace | WorkspaceReader | None,
    config: Config | None = None,
) -> None:
    """Serve the tools over this process's stdin and stdout until the client closes them."""
    server = create_server(store, workspace, config)
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


@dataclass(frozen=True)
class HttpEndpoint:
    """The tools over streamable HTTP: an ASGI ``app`` that answers at whatever path it is routed
    from, and the ``lifespan`` that must be running while it serves (the SDK's session manager)."""

    app: Callable[[Scope, Receive, Send], Any]
    lifespan: Callable[[], AbstractAsyncContextManager[None]]

    def routes(self, path: str) -> list[Route]:
        """Starlette routes serving the endpoint at ``path`` and at ``path/`` (no redirect: a
        client that posts to either gets its answer)."""
        from starlette.routing import Route

        path = path.rstrip("/")
        return [Route(path, self.app), Route(path + "/", self.app)]


def create_http_endpoint(
    store: ArchiveStore | None,
    workspace: Workspace | WorkspaceReader | None,
    config: Config | None = None,
) -> HttpEndpoint:
    """The tools over streamable HTTP, stateless, answering in JSON (see the module docstring
    for the loopback check). Mount ``endpoint.app`` (or ``endpoint.routes(path)``) in a Starlette
    app and enter ``endpoint.lifespan()`` in its lifespan."""
    server = create_server(store, workspace, config)
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings

    manager = StreamableHTTPSessionManager(app=server, json_response=True, stateless=True)
    guard = TransportSecurityMiddleware(
        TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=[*_LOOPBACK_HOSTS, *(f"{h}:*" for h in _LOOPBACK_HOSTS)],
            allowed_origins=[
                f"{s}://{h}{p}" for s in ("http", "https") for h in _LOOPBACK_HOSTS for p in ("", ":*")
            ],
        )
    )
    return HttpEndpoint(_Endpoint(manager, guard), _lifespan(manager))


class _Endpoint:
    """The session manager's ASGI entry, behind the loopback check (a class, so that Starlette
    routes to it as an ASGI app)."""

    def __init__(self, manager: Any, guard: Any) -> None:
        self.manager = manager
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and _over_loopback(scope):
            from starlette.requests import Request

            refused = await self.guard.validate_request(Request(scope), is_post=False)
            if refused is not None:
                await refused(scope, receive, send)
                return
        await self.manager.handle_request(scope, receive, send)


def _over_loopback(scope: Scope) -> bool:
    """Whether the request came in on a loopback address (or a Unix socket)."""
    server = scope.get("server")
    if not server or server[1] is None:
        return True
    try:
        return ipaddress.ip_address(str(server[0]).split("%")[0]).is_loopback
    except ValueError:
        return False


def _lifespan(manager: Any) -> Callable[[], AbstractAsyncContextManager[None]]:
    @contextlib.asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        async with manager.run():
            yield

    return lifespan
