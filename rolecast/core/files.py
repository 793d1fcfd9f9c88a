"""MetaGPT's ``File`` (``metagpt.utils.file``): write and read a file without blocking the event loop.

The disk work runs on a worker thread (:func:`asyncio.to_thread`), so no extra dependency is
needed. A failure raises the ``OSError`` it is, where MetaGPT logged it and returned ``None``: a
tutorial that did not save its document should not look as if it had.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from loguru import logger


def _write(root_path: Path, filename: str, content: bytes) -> Path:
    root_path.mkdir(parents=True, exist_ok=True)
    full_path = root_path / filename
    full_path.write_bytes(content)
    return full_path


def _read(file_path: Path, chunk_size: int) -> bytes:
    chunks = []
    with file_path.open("rb") as reader:
        while chunk := reader.read(chunk_size):
            chunks.append(chunk)
    return b"".join(chunks)


def read_at_most(file_path: Path, limit: int) -> bytes | None:
    """The bytes of a file the framework reads whole (an evalset, a tuning, reference tests), or None when
    it holds more than ``limit`` bytes: at most ``limit + 1`` bytes are ever read. ``OSError`` as it is."""
    with file_path.open("rb") as reader:
        data = reader.read(limit + 1)
    return None if len(data) > limit else data


class File:
    """A general utility for file operations (MetaGPT's name and calls)."""

    CHUNK_SIZE = 64 * 1024

    @classmethod
    async def write(cls, root_path: str | Path, filename: str, content: bytes | str) -> Path:
        """Write ``content`` (bytes; text is written as UTF-8) to ``root_path / filename``, making the
        folder if needed; returns the file's path."""
        data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
        full_path = await asyncio.to_thread(_write, Path(root_path), filename, data)
        logger.debug("wrote {} ({} bytes)", full_path, len(data))
        return full_path

    @classmethod
    async def read(cls, file_path: str | Path, chunk_size: int | None = None) -> bytes:
        """The file's bytes, read ``chunk_size`` (64 KiB) at a time."""
        return await asyncio.to_thread(_read, Path(file_path), chunk_size or cls.CHUNK_SIZE)


__all__ = [
    "File",
    "read_at_most",
]
