"""MCP tools: a real MCP server (written with the SDK, started by the test) used by a ToolAgent."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from servers import free_port

from actions.tools.mcp import MCPServer
from actions.tools.render import render_qwen
from rolecast.errors import ToolError
from rolecast.llm.base import Completion, ToolCall
from rolecast.testing import ScriptedLLM
from roles import ToolAgent

SERVER = str(Path(__file__).parent / "mcp" / "demo_server.py")


def stdio_server() -> MCPServer:
    return MCPServer.stdio(sys.executable, [SERVER])


async def test_the_server_tools_become_kernel_functions_with_the_server_schema():
    async with stdio_server() as server:
        plugin = server.plugin()
        assert server.name == "demo_server" and sorted(plugin.functions) == ["add", "fail", "shout"]
        add = plugin["add"]
        assert add.full_name == "demo_server.add" and add.wire_name == "demo_server-add"
        assert add.description == "Add two whole numbers."
        assert add.json_schema["required"] == ["a", "b"]
        assert add.openai_schema()["function"]["parameters"]["properties"]["a"]["type"] == "integer"
        # arguments are validated before the call, like any tool's
        with pytest.raises(ToolError, match="b: Field required"):
            await add.invoke({"a": 1})
        assert await add.invoke('{"a": "2", "b": 3}') == "5"
        assert await plugin["shout"].invoke({"text": "hi", "times": 2}) == "HI HI"
        with pytest.raises(ToolError, match=r"demo_server\.fail failed: .*disk full"):
            await plugin["fail"].invoke({"reason": "disk full"})
        # listed in the manual a ReAct loop shows the model
        manual = render_qwen([add])
        assert "demo_server-add" in manual or "add" in manual
        assert "Add two whole numbers." in manual


async def test_tool_agents_call_mcp_tools_natively_and_from_the_react_manual():
    native = ScriptedLLM([
        Completion(text="", tool_calls=[ToolCall("c1", "demo_server-add", '{"a": 20, "b": 22}')]),
        Completion(text="The sum is 42."),
    ])
    react = ScriptedLLM([
        'Thought: I should shout\nAction: demo_server.shout\nAction Input: {"text": "hello"}',
        "Thought: done\nFinal Answer: HELLO",
    ])
    async with stdio_server() as server:  # one server process for both agents
        first = await ToolAgent(tools=[server.plugin()], style="function_calling", llm=native).run("20 + 22?")
        second = await ToolAgent(tools=[server.plugin()], style="react", llm=react).run("Shout hello")
    assert first.content == "The sum is 42."
    assert sorted(t["function"]["name"] for t in native.calls[0].tools) == [
        "demo_server-add", "demo_server-fail", "demo_server-shout"
    ]
    tool_result = native.calls[1].messages[-1]
    assert tool_result["role"] == "tool" and tool_result["content"] == "42"
    assert second.content == "HELLO"
    system = react.calls[0].messages[0]["content"] + react.calls[0].prompt
    assert "Repeat the text in capitals." in system  # the tool is in the manual
    assert "Observation: HELLO" in react.calls[1].prompt  # its result went back to the model


def _wait_for_port(port: int, proc: subprocess.Popen, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the MCP server exited: {proc.stderr.read() if proc.stderr else ''}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError("the MCP server did not listen")


@pytest.fixture
def http_server():
    """The demo server on streamable HTTP at 127.0.0.1:<free port>, stopped after the test."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, SERVER, "http", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        _wait_for_port(port, proc)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def test_streamable_http_server_on_localhost(http_server):
    async with MCPServer.http(http_server, name="demo") as server:
        assert server.name == "demo"
        assert await server.plugin()["add"].invoke({"a": 1, "b": 2}) == "3"


async def test_a_server_that_cannot_start_is_a_tool_error():
    with pytest.raises(ToolError, match="could not connect to the MCP server"):
        async with MCPServer.stdio(sys.executable, ["-c", "import sys; sys.exit(3)"], name="broken"):
            pass
