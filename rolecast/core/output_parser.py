"""MetaGPT's ``OutputParser`` (``metagpt.utils.common``): code blocks, ``## `` sections and Python
lists or dicts out of a model's answer, as MetaGPT's examples call them.

Model output is untrusted, so unlike MetaGPT's regular expressions every parser here runs in
time linear in its input (plain ``str.find`` scans), never evaluates the text (JSON first, then
:func:`ast.literal_eval`, which builds literals only), refuses nesting deeper than
:data:`~rolecast.core.jsonutil.MAX_JSON_DEPTH` before any recursive parser sees it, and fails
with :class:`~rolecast.errors.OutputParseError` (the answer kept in ``raw``) where MetaGPT raised
a bare ``Exception`` or ``ValueError``.
"""

from __future__ import annotations

import ast
import re
from typing import Any, get_origin

from loguru import logger

from ..errors import OutputParseError
from .jsonutil import MAX_JSON_CHARS, MAX_JSON_DEPTH, check_depth, loads_lenient

#: the heading that opens a block (MetaGPT's ``MARKDOWN_TITLE_PREFIX``)
MARKDOWN_TITLE_PREFIX = "## "
_WHITESPACE = re.compile(r"\s+")
_OPENERS = {"[": "]", "{": "}", "(": ")"}


def _bounded(text: str) -> str:
    if len(text) > MAX_JSON_CHARS:
        raise OutputParseError(f"the answer is longer than {MAX_JSON_CHARS} characters", raw=text[:1000])
    return text


def _nesting(text: str) -> int:
    """The deepest bracket nesting of ``text`` (brackets inside strings counted too: an over-estimate)."""
    depth = deepest = 0
    for char in text:
        if char in _OPENERS:
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]})":
            depth = max(depth - 1, 0)
    return deepest


def literal(text: str) -> Any:
    """A list, dict, string or number written as JSON (or JSON5) or as a Python literal; never evaluated."""
    _bounded(text)
    try:
        return loads_lenient(text)
    except OutputParseError:
        pass
    if _nesting(text) > MAX_JSON_DEPTH:
        raise OutputParseError(f"the structure is nested deeper than {MAX_JSON_DEPTH} levels", raw=text)
    try:
        value = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as exc:
        raise OutputParseError(f"not a Python or JSON literal: {exc}", raw=text) from exc
    check_depth(value)
    return value


class OutputParser:
    """MetaGPT's parsers of model answers (all class methods, as there)."""

    @classmethod
    def parse_blocks(cls, text: str) -> dict[str, str]:
        """``## Title\\ncontent`` sections as ``{"Title": "content"}`` (a trailing ``:`` of a title dropped)."""
        blocks: dict[str, str] = {}
        for block in _bounded(text).split(MARKDOWN_TITLE_PREFIX):
            if not block.strip():
                continue
            title, _, content = block.partition("\n")
            title = title.strip()
            if title.endswith(":"):
                title = title[:-1]
            blocks[title.strip()] = content.strip()
        return blocks

    @classmethod
    def parse_code(cls, text: str, lang: str = "") -> str:
        """The first fenced code block (```` ```lang ````): from the whitespace after the fence's first
        word to the next fence."""
        fence = "```" + lang
        start = _bounded(text).find(fence)
        space = _WHITESPACE.search(text, start + len(fence)) if start >= 0 else None
        end = text.find("```", space.end()) if space else -1
        if space is None or end < 0:
            raise OutputParseError(f"no ```{lang} code block in the answer", raw=text)
        return text[space.end():end]

    @classmethod
    def parse_str(cls, text: str) -> str:
        """The value of ``name = "value"``: after the last ``=``, without quotes."""
        return text.split("=")[-1].strip().strip("'").strip('"')

    @classmethod
    def parse_file_list(cls, text: str) -> list[Any]:
        """The ``[...]`` list in the text (``Task list = ['a.py', 'b.py']``), else its lines."""
        start, end = _bounded(text).find("["), text.rfind("]")
        if start < 0 or end < start:
            return text.split("\n")
        value = literal(text[start:end + 1])
        if not isinstance(value, list):
            raise OutputParseError("the bracketed text is not a list", raw=text)
        return value

    @staticmethod
    def parse_python_code(text: str) -> str:
        """The Python code of the answer (a ```` ```python ```` block's, else the whole text), if it parses."""
        candidates = []
        start = _bounded(text).find("```python")
        if start >= 0:
            space = _WHITESPACE.search(text, start + len("```python"))
            body = text[space.end():] if space else ""
            end = body.rfind("```")
            candidates += [body[:end]] if end >= 0 else []
            candidates.append(body)
        candidates.append(text)
        for code in candidates:
            if not code.strip() or _nesting(code) > MAX_JSON_DEPTH:
                continue
            try:
                ast.parse(code)  # parsed, never run
            except (SyntaxError, ValueError, MemoryError, RecursionError):
                continue
            return code
        raise OutputParseError("no valid Python code in the answer", raw=text)

    @classmethod
    def parse_data(cls, data: str) -> dict[str, Any]:
        """:meth:`parse_blocks`, each block's code block or list taken out where it has one."""
        parsed: dict[str, Any] = {}
        for block, content in cls.parse_blocks(data).items():
            try:
                parsed[block] = cls.parse_code(text=content)
            except OutputParseError:
                try:
                    parsed[block] = cls.parse_file_list(text=content)
                except OutputParseError:
                    parsed[block] = content
        return parsed

    @staticmethod
    def extract_content(text: str, tag: str = "CONTENT") -> str:
        """The text between ``[TAG]`` and ``[/TAG]``."""
        opener, closer = f"[{tag}]", f"[/{tag}]"
        start = _bounded(text).find(opener)
        end = text.find(closer, start + len(opener)) if start >= 0 else -1
        if end < 0:
            raise OutputParseError(f"could not find content between {opener} and {closer}", raw=text)
        return text[start + len(opener):end].strip()

    @classmethod
    def parse_data_with_mapping(cls, data: str, mapping: dict[str, Any]) -> dict[str, Any]:
        """:meth:`parse_data` for the blocks ``mapping`` types: a list-typed block's list taken out."""
        if "[CONTENT]" in data:
            data = cls.extract_content(text=data)
        parsed: dict[str, Any] = {}
        for block, text in cls.parse_blocks(data).items():
            content: Any = text
            try:
                content = cls.parse_code(text=text)
            except OutputParseError:
                pass
            typing = mapping.get(block)
            typing = typing[0] if isinstance(typing, tuple) else typing
            if typing is list or get_origin(typing) is list:
                try:
                    content = cls.parse_file_list(text=content)
                except OutputParseError:
                    pass
            parsed[block] = content
        return parsed

    @classmethod
    def extract_struct(cls, text: str, data_type: type | str) -> list[Any] | dict[str, Any]:
        """The list or dict (``data_type``: ``list``, ``dict`` or their names) in the text, from its first
        opening bracket to its last closing one; ``[]`` or ``{}`` when there is none (as in MetaGPT)."""
        kind = {"list": list, "dict": dict}.get(data_type, data_type) if isinstance(data_type, str) else data_type
        if kind not in (list, dict):
            raise OutputParseError(f"extract_struct extracts a list or a dict, not {data_type!r}", raw=text)
        opener, closer = ("[", "]") if kind is list else ("{", "}")
        start, end = _bounded(text).find(opener), text.rfind(closer)
        if start < 0 or end < start:
            logger.error("no {} found in the text", kind.__name__)
            return [] if kind is list else {}
        value = literal(text[start:end + 1])
        if not isinstance(value, kind):
            raise OutputParseError(f"the extracted structure is not a {kind.__name__}", raw=text)
        return value


__all__ = ["MARKDOWN_TITLE_PREFIX", "OutputParser", "literal"]
