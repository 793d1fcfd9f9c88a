"""mkdocs hook: pages generated from the code at build time, never hand-copied.

``<!-- generated:cli -->`` in a page becomes the help of every ``rolecast`` command (walking
the argparse tree of :func:`rolecast.cli.build_parser`); ``<!-- generated:errors -->`` the
tree of :mod:`rolecast.errors`.
"""

from __future__ import annotations

import argparse
import inspect
from typing import Any


def _helps(parser: argparse.ArgumentParser, path: str) -> list[tuple[str, str]]:
    pages = [(path, parser.format_help())]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                pages += _helps(child, f"{path} {name}")
    return pages


def cli_reference() -> str:
    """Every ``rolecast`` command's ``--help``, a section each."""
    import os

    from rolecast.cli import build_parser

    os.environ.setdefault("COLUMNS", "100")
    parts = []
    for path, text in _helps(build_parser(), "rolecast"):
        parts.append(f"## `{path}`\n\n```text\n{text.rstrip()}\n```\n")
    return "\n".join(parts)


def error_tree() -> str:
    """The classes of :mod:`rolecast.errors` as an indented tree, each with its docstring's first line."""
    from rolecast import errors

    classes = [getattr(errors, name) for name in errors.__all__ if inspect.isclass(getattr(errors, name))]
    lines: list[str] = []

    def visit(cls: type, depth: int) -> None:
        doc = (inspect.getdoc(cls) or "").split("\n\n")[0].replace("\n", " ")
        lines.append(f"{'    ' * depth}- `{cls.__name__}`: {doc}")
        for child in sorted((c for c in classes if cls in c.__bases__), key=lambda c: c.__name__):
            visit(child, depth + 1)

    visit(errors.RolecastError, 0)
    return "\n".join(lines) + "\n"


def on_page_markdown(markdown: str, **_: Any) -> str:
    """Fill in the generated blocks of a page."""
    if "<!-- generated:cli -->" in markdown:
        markdown = markdown.replace("<!-- generated:cli -->", cli_reference())
    if "<!-- generated:errors -->" in markdown:
        markdown = markdown.replace("<!-- generated:errors -->", error_tree())
    return markdown
