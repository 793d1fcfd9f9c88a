"""The ``rolecast`` command: check the model configuration and talk to the model.

    rolecast info                 which provider and model a run would use, and why
    rolecast ask "a question"     one question to the configured model
    rolecast choose "prompt" 4    one state-selection answer (-1 … 3)
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from rolecast import enable_logging
from rolecast.config import Config
from rolecast.errors import RolecastError


def _info() -> int:
    from rolecast.llm import local_model_available, resolve_provider

    config = Config.from_env()
    cfg = config.llm
    print(f"provider       : {resolve_provider(cfg)}")
    print(f"model          : {cfg.model or '(provider default)'}")
    print(f"base_url       : {cfg.base_url or '(provider default)'}")
    print(f"api key        : {'set' if cfg.api_key else 'not set'}")
    print(f"embedded model : {'installed' if local_model_available() else 'not installed'}")
    if config.services:
        print(f"services       : {', '.join(sorted(config.services))}")
    return 0


async def _ask(prompt: str) -> int:
    from rolecast.context import default_context

    llm = default_context().llm()
    async for chunk in llm.stream(prompt):
        print(chunk, end="", flush=True)
    print()
    return 0


async def _choose(prompt: str, n: int) -> int:
    from rolecast.context import default_context

    print(await default_context().llm().choose(prompt, n))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rolecast", description="rolecast command line")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="show which model a run would use")
    ask = sub.add_parser("ask", help="ask the configured model one question")
    ask.add_argument("prompt")
    choose = sub.add_parser("choose", help="pick one of n states, as a role's _think does")
    choose.add_argument("prompt")
    choose.add_argument("n", type=int)
    args = parser.parse_args(argv)

    enable_logging("DEBUG" if args.verbose else "INFO")
    try:
        if args.command == "info":
            return _info()
        if args.command == "ask":
            return asyncio.run(_ask(args.prompt))
        return asyncio.run(_choose(args.prompt, args.n))
    except RolecastError as exc:
        print(f"rolecast: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
