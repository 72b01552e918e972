"""A user's own MCP server (stdio), for the wrap tests: one tool, ``user_echo``. ``toolkeep wrap``
must leave it working beside toolkeep's server."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("user-tools")


@server.tool()
def user_echo(text: str) -> str:
    """Say ``text`` back (a tool of the user's own MCP server)."""
    return text


if __name__ == "__main__":
    server.run("stdio")
