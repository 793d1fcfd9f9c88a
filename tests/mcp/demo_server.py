"""A small MCP server written with the official SDK, for tests: ``python demo_server.py [stdio|http PORT]``."""

from __future__ import annotations

import sys

try:  # mcp >= 2
    from mcp.server.mcpserver import MCPServer as Server
    from mcp.server.mcpserver.exceptions import ToolError
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP as Server
    from mcp.server.fastmcp.exceptions import ToolError

server = Server("demo")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    return a + b


@server.tool()
def shout(text: str, times: int = 1) -> str:
    """Repeat the text in capitals."""
    return " ".join([text.upper()] * times)


@server.tool()
def fail(reason: str) -> str:
    """Always fails, with the reason given."""
    raise ToolError(reason)  # the SDK reports its own ToolError's message to the client


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        try:
            server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
        except TypeError:  # mcp 1.x: host and port are settings
            server.settings.host, server.settings.port = "127.0.0.1", int(sys.argv[2])
            server.run("streamable-http")
    else:
        server.run("stdio")
