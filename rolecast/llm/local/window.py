"""The embedded engine's context: its tokenizer, the GGUF's trained window, and the admission of calls.

* :class:`Tokenizer` counts in the model's own tokens, through the engine's ``/apply-template``
  and ``/tokenize`` handlers on its loopback port (the key that guards the port stays in-process).
* :func:`trained_context` reads ``<arch>.context_length`` from a GGUF file's header: a window
  larger than the model was trained for is capped to it.
* :class:`Admission` keeps the engine's slots inside one context. The slots share one KV buffer
  (``kv_unified``: any one of them may use all of it; it holds ``KV_WINDOWS`` windows of ``n_ctx``),
  so calls that each fit could together overflow it ("Context size has been exceeded", issue 32
  item 12). A call is admitted only when its prompt and ``max_tokens`` fit what the calls already
  running leave free; the others wait, in their worker threads, and are admitted as the running ones finish. The cached
  states of idle slots do not count: the engine evicts them when it needs their room.
"""

from __future__ import annotations

import json
import struct
import threading
import urllib.request
from functools import lru_cache
from typing import Any, BinaryIO

from ...errors import LLMAPIError

#: GGUF value types and their fixed sizes (type 8 is a string, 9 an array)
_GGUF_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_GGUF_INTS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 10: "<Q", 11: "<q"}
_MAX_KEYS = 4096  # a header with more keys than this is not read further
#: the engine's loopback port is reached directly, whatever proxy the environment names
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _read(f: BinaryIO, fmt: str) -> Any:
    size = struct.calcsize(fmt)
    data = f.read(size)
    if len(data) != size:
        raise EOFError
    return struct.unpack(fmt, data)[0]


def _string(f: BinaryIO) -> bytes:
    n = _read(f, "<Q")
    if n > 1 << 20:
        raise ValueError("string too long")
    return f.read(n)


def _skip(f: BinaryIO, kind: int) -> None:
    if kind == 8:
        _string(f)
    elif kind == 9:
        item, n = _read(f, "<I"), _read(f, "<Q")
        if item in _GGUF_SIZES:
            f.seek(_GGUF_SIZES[item] * n, 1)
        else:
            for _ in range(n):
                _skip(f, item)
    elif kind in _GGUF_SIZES:
        f.seek(_GGUF_SIZES[kind], 1)
    else:
        raise ValueError(f"unknown GGUF value type {kind}")


@lru_cache(maxsize=16)
def trained_context(path: str) -> int | None:
    """The context length a GGUF model was trained with (``<arch>.context_length``), or None."""
    try:
        with open(path, "rb") as f:
            if f.read(4) != b"GGUF":
                return None
            _read(f, "<I")  # version
            _read(f, "<Q")  # tensors
            for _ in range(min(_read(f, "<Q"), _MAX_KEYS)):
                key, kind = _string(f), _read(f, "<I")
                if key.endswith(b".context_length") and kind in _GGUF_INTS:
                    return int(_read(f, _GGUF_INTS[kind]))
                _skip(f, kind)
    except (OSError, EOFError, ValueError, struct.error):
        return None
    return None


class Tokenizer:
    """Counts in the engine's own tokens (its chat template included), over its loopback port."""

    def __init__(self, address: str, key: str):
        self.address = address.rstrip("/")
        self.key = key
        self._cache: dict[str, int] = {}
        self._lock = threading.Lock()

    def _post(self, path: str, body: dict[str, Any]) -> Any:
        request = urllib.request.Request(
            self.address + path, data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.key}"},
        )
        try:
            with _DIRECT.open(request, timeout=60) as response:
                return json.loads(response.read())
        except (OSError, ValueError) as exc:
            raise LLMAPIError(f"the local engine could not count tokens ({path}): {exc}") from exc

    def count(self, text: str, *, special: bool = False) -> int:
        """Tokens of ``text`` (cached: history texts are counted again and again)."""
        if not special:
            with self._lock:
                if text in self._cache:
                    return self._cache[text]
        tokens = len(self._post("/tokenize", {"content": text, "add_special": special,
                                              "parse_special": special})["tokens"])
        if not special:
            with self._lock:
                if len(self._cache) >= 8192:
                    self._cache.clear()
                self._cache[text] = tokens
        return tokens

    def count_chat(self, messages: list[dict[str, Any]]) -> int:
        """The prompt tokens of a chat request: its messages in the model's template, the assistant's
        opening included (what the engine evaluates)."""
        prompt = self._post("/apply-template", {"messages": messages})["prompt"]
        return self.count(prompt, special=True)


class Admission:
    """Calls share ``capacity`` tokens of context: each holds its prompt and ``max_tokens`` while it
    runs, and one that does not fit beside the running ones waits for them (a call larger than the
    whole capacity runs alone, and the engine says it does not fit)."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.held = 0
        self.peak = 0  # the most tokens held at once
        self.waited = 0  # calls that had to wait
        self._cond = threading.Condition()

    def enter(self, need: int, cancelled: threading.Event | None = None) -> int:
        """Block until ``need`` tokens are free (or nothing runs); returns what was taken."""
        need = max(0, min(need, self.capacity))
        with self._cond:
            if self.held and self.held + need > self.capacity:
                self.waited += 1
            while self.held and self.held + need > self.capacity:
                if cancelled is not None and cancelled.is_set():
                    return 0
                self._cond.wait(0.1)
            self.held += need
            self.peak = max(self.peak, self.held)
        return need

    def leave(self, taken: int) -> None:
        with self._cond:
            self.held -= taken
            self._cond.notify_all()


__all__ = ["Admission", "Tokenizer", "trained_context"]
