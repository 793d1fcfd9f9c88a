"""Tools from a Model Context Protocol server (``pip install "rolecast[mcp]"``).

An :class:`MCPServer` connects to one MCP server — a command started over stdio, or a
URL speaking streamable HTTP — through the official ``mcp`` SDK, and offers its tools
as :class:`MCPTool` kernel functions: the same objects as ``@tool`` functions, so they
appear in the ReAct, stepwise and planner manuals, go to function-calling models as
native tools, are validated against the server's JSON schema, and pass through the
context's invocation hooks (approval, tracing) like any tool::

    from actions.tools.mcp import MCPServer

    async with MCPServer.stdio("python", ["weather_server.py"], name="weather") as weather:
        agent = ToolAgent(tools=[weather.plugin()], style="function_calling")
        await agent.run("Will it rain in Lyon tomorrow?")

    async with MCPServer.http("http://127.0.0.1:8000/mcp") as server: ...

The connection lives inside the ``async with`` block (the SDK's sessions are bound to
the task that opened them): open it around ``team.run``. A tool result that the server
marks as an error becomes a :class:`~rolecast.errors.ToolError`, which tool loops show
to the model as the observation.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from typing import Any

from rolecast.context import Context
from rolecast.errors import ToolError, UsageError

from .function import KernelFunction, Plugin, ToolParameter

_JSON_TYPES: dict[str, Any] = {
    "string": str, "integer": int, "number": float, "boolean": bool, "array": list, "object": dict,
}
Transport = Callable[[], AbstractAsyncContextManager[Any]]


def _field(obj: Any, *names: str) -> Any:
    """The first attribute present among ``names`` (the SDK renamed camelCase fields in 2.0)."""
    for name in names:
        value = getattr(obj, name, None)
        if value is not None:
            return value
    return None


def _parameters(schema: dict[str, Any]) -> list[ToolParameter]:
    required = set(schema.get("required") or [])
    parameters = []
    for name, spec in (schema.get("properties") or {}).items():
        spec = spec if isinstance(spec, dict) else {}
        kind = spec.get("type")
        annotation = _JSON_TYPES.get(kind, Any) if isinstance(kind, str) else Any
        parameters.append(ToolParameter(
            name=name, description=str(spec.get("description") or spec.get("title") or ""),
            annotation=annotation, default=spec.get("default"), required=name in required,
        ))
    return parameters


def result_text(result: Any) -> str:
    """The text of a ``CallToolResult``: its text blocks, one per line (other blocks named by type)."""
    parts = []
    for block in _field(result, "content") or []:
        text = getattr(block, "text", None)
        parts.append(text if isinstance(text, str) else f"[{getattr(block, 'type', 'content')}]")
    if not parts:
        structured = _field(result, "structured_content", "structuredContent")
        if structured is not None:
            import json

            return json.dumps(structured, ensure_ascii=False)
    return "\n".join(parts)


class MCPTool(KernelFunction):
    """One tool of an MCP server, callable like any rolecast tool (see the module docstring)."""

    kind = "tool"

    def __init__(self, server: MCPServer, name: str, description: str, schema: dict[str, Any]):
        self.server = server
        self.remote_name = name  # the name the server knows it by
        self.schema = schema if schema.get("type") == "object" else {"type": "object", "properties": {}}
        super().__init__(
            re.sub(r"[^A-Za-z0-9_]", "_", name), description, _parameters(self.schema), plugin_name=server.name
        )

    @property
    def json_schema(self) -> dict[str, Any]:
        """The server's own input schema (richer than what the parameters can say)."""
        return self.schema

    async def _call(self, arguments: dict[str, Any], context: Context) -> Any:
        values = {k: v for k, v in arguments.items() if v is not None or k in self.schema.get("required", [])}
        result = await self.server.call(self.remote_name, values)
        text = result_text(result)
        if _field(result, "is_error", "isError"):
            raise ToolError(f"{self.full_name} failed: {text}")
        return text


class MCPServer:
    """A connection to one MCP server, open inside ``async with`` (see the module docstring)."""

    def __init__(self, transport: Transport, name: str):
        self._transport = transport
        self.name = re.sub(r"[^A-Za-z0-9_]", "_", name) or "mcp"
        self._stack: AsyncExitStack | None = None
        self._session: Any = None
        self.tools: list[MCPTool] = []

    @classmethod
    def stdio(
        cls, command: str, args: Sequence[str] = (), *, env: dict[str, str] | None = None,
        cwd: str | None = None, name: str | None = None,
    ) -> MCPServer:
        """A server started as ``command args…``, spoken to over its stdin/stdout."""
        mcp_stdio = _sdk("mcp.client.stdio")
        params = mcp_stdio.StdioServerParameters(command=command, args=list(args), env=env, cwd=cwd)
        default = re.sub(r"\.py$", "", (list(args)[-1:] or [command])[0].rsplit("/", 1)[-1])
        return cls(lambda: mcp_stdio.stdio_client(params), name or default)

    @classmethod
    def http(cls, url: str, *, headers: dict[str, str] | None = None, name: str | None = None) -> MCPServer:
        """A server at ``url`` speaking the streamable HTTP transport."""
        http = _sdk("mcp.client.streamable_http")
        if hasattr(http, "streamable_http_client"):  # mcp >= 2
            if headers:
                raise UsageError("with mcp >= 2, pass headers through an httpx client: MCPServer(transport, name)")
            connect: Transport = lambda: http.streamable_http_client(url)  # noqa: E731
        else:
            connect = lambda: http.streamablehttp_client(url, headers=headers)  # noqa: E731
        host = re.sub(r"^\w+://", "", url).split("/", 1)[0].split(":", 1)[0]
        return cls(connect, name or host)

    def __repr__(self) -> str:
        return f"MCPServer({self.name!r}, {len(self.tools)} tools)"

    async def __aenter__(self) -> MCPServer:
        session_mod = _sdk("mcp.client.session")
        stack = AsyncExitStack()
        try:
            streams = await stack.enter_async_context(self._transport())
            session = await stack.enter_async_context(session_mod.ClientSession(streams[0], streams[1]))
            await session.initialize()
            listed = await session.list_tools()
        except BaseException as exc:
            await stack.aclose()
            if isinstance(exc, Exception):
                why = f"{type(exc).__name__}: {exc}"
                raise ToolError(f"could not connect to the MCP server {self.name!r}: {why}") from exc
            raise
        self._stack, self._session = stack, session
        self.tools = [
            MCPTool(self, t.name, str(t.description or ""), dict(_field(t, "input_schema", "inputSchema") or {}))
            for t in listed.tools
        ]
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        stack, self._stack, self._session = self._stack, None, None
        if stack is not None:
            await stack.aclose()

    async def call(self, name: str, arguments: dict[str, Any]) -> Any:
        """Call the server's tool ``name`` (the raw ``CallToolResult``)."""
        if self._session is None:
            raise UsageError(f"the MCP server {self.name!r} is not connected: use it inside `async with`")
        try:
            return await self._session.call_tool(name, arguments)
        except Exception as exc:  # the transport or the protocol failed, not the tool
            raise ToolError(f"MCP call {self.name}.{name} failed: {type(exc).__name__}: {exc}") from exc

    def plugin(self) -> Plugin:
        """The server's tools as a :class:`Plugin` named after the server (``server.tool`` names)."""
        if self._session is None:
            raise UsageError(f"the MCP server {self.name!r} is not connected: use it inside `async with`")
        return Plugin(self.name, self.tools)


def _sdk(module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)  # a fixed name of the mcp SDK, never from data
    except ImportError as exc:
        raise UsageError('MCP tools need the mcp SDK: pip install "rolecast[mcp]"') from exc


__all__ = ["MCPServer", "MCPTool", "result_text"]
