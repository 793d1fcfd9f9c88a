"""Helpers for the serving tests: an app served by a real uvicorn on 127.0.0.1 in a thread, and the
official a2a-sdk client pointed at it."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import uvicorn
from a2a.client import ClientConfig, create_client
from a2a.types import a2a_pb2 as pb


@contextmanager
def served(app: Any) -> Iterator[str]:
    """Serve ``app`` on 127.0.0.1 (a free port) in a thread; its base URL. Stopped on exit."""
    sock = socket.socket()
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # (as rolecast serve does: no 40 ms delayed ACKs)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on"))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("the server did not start")
            threading.Event().wait(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


async def client(url: str, *, streaming: bool = True, token: str | None = None) -> Any:
    """The official a2a-sdk client for the agent at ``url`` (its card fetched first)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx.AsyncClient(headers=headers, timeout=60)
    return await create_client(url, client_config=ClientConfig(streaming=streaming, httpx_client=http))


def text_message(text: str, *, task_id: str = "", message_id: str = "m-1", rounds: int | None = None) -> Any:
    message = pb.Message(message_id=message_id, role=pb.ROLE_USER, parts=[pb.Part(text=text)], task_id=task_id)
    request = pb.SendMessageRequest(message=message)
    if rounds is not None:
        request.metadata.update({"rounds": rounds})
    return request
