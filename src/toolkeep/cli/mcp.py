"""``toolkeep mcp``: the way back (``recall``, ``read_result``) as an MCP server."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..config import Config
from ..exceptions import StoreNotFoundError
from ..stores import ArchiveStore, FileStore, open_store
from ..workspace import WorkspaceReader
from ._app import InputError, cli
from ._settings import config_options
from .store import STORE_ENV

if TYPE_CHECKING:
    from ..mcp_server import HttpEndpoint

MCP_PATH = "/mcp"


@cli.command()
@config_options
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    show_default=True,
    help="stdio: the agent starts this command and talks to it over stdin and stdout; "
    f"http: serve streamable HTTP at {MCP_PATH}.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (http).")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8788,
    show_default=True,
    help="Port (http; 0: any free one).",
)
@click.option(
    "--workspace",
    type=click.Path(file_okay=False, exists=True),
    help="Session directory: read_result reads the files inside it, and recall its archive/ "
    "unless --store is given (default: the workspace toolkeep proxy uses by default).",
)
@click.option(
    "--store",
    "store_url",
    metavar="URL",
    help=f"Archive store recall reads: sqlite:///file.db, redis://host:port/db, file:///dir "
    f"(default: ${STORE_ENV}, else the workspace's archive/).",
)
def mcp(
    transport: str, host: str, port: int, workspace: str | None, store_url: str | None, config: Config
) -> None:
    """Serve the recall and read_result tools over MCP, for an agent to register.

    recall gives back the original behind a <<ccr:KEY>> marker, read_result pages a file named
    by [full output saved to PATH], with the same answers as the library's tools. Over http the
    server is stateless and answers in JSON; it prints "listening on http://HOST:PORT/mcp" on
    stderr once it listens. Every setting flag also reads the variable it names (the page size
    follows --max-result-chars and the tool caps).
    """
    from .. import mcp_server
    from ..proxy import default_workspace  # (not at the top: every command would import it)

    mcp_server.require_sdk()  # exit 2 with the install hint before anything is opened
    root = Path(workspace) if workspace is not None else default_workspace()
    url = store_url or os.environ.get(STORE_ENV)
    store = _open_store(url, root)
    reader = WorkspaceReader(root) if root.is_dir() else None
    with store:
        if transport == "stdio":
            import anyio

            anyio.run(mcp_server.serve_stdio, store, reader, config)
            return
        _serve_http(mcp_server.create_http_endpoint(store, reader, config), host, port)


def _open_store(url: str | None, root: Path) -> ArchiveStore:
    """The store ``url`` names, else the workspace's archive; only one that exists (nothing is
    created for a server that only reads)."""
    try:
        if url:
            return open_store(url, create=False)
        return FileStore(root / "archive", create=False)
    except StoreNotFoundError as exc:
        raise InputError(f"{exc} (name the archive with --workspace DIR or --store URL)") from None


def _serve_http(endpoint: HttpEndpoint, host: str, port: int) -> None:
    from starlette.applications import Starlette  # both come with the mcp package

    from ..proxy.server import ListenError, serve

    app = Starlette(routes=endpoint.routes(MCP_PATH), lifespan=lambda _app: endpoint.lifespan())
    try:
        started = serve(app, host, port, path=MCP_PATH)
    except ListenError as exc:
        raise InputError(str(exc)) from None
    if not started:
        sys.exit(2)
