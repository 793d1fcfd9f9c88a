"""The ``rolecast`` command: check the model configuration and talk to the model.

    rolecast --version            the installed version
    rolecast info                 which provider and model a run would use (for a local model: its
                                  file and size; a missing or unreadable GGUF file is an error)
    rolecast ask "a question"     one question to the configured model
    rolecast choose "prompt" 4    one state-selection answer (-1 … 3)
    rolecast runs list            the runs in the run store
    rolecast runs show RUN        a run's timeline: rounds, messages, model calls, failures
    rolecast runs graph RUN       who said what to whom (--format mermaid|dot)
    rolecast runs export RUN      the run's events as JSON lines
    rolecast runs fork|rerun|approve|reject|edit|delete|prune …   see rolecast.runs.commands
    rolecast studio               a local web page over the run store (the studio extra)
    rolecast serve MODULE:ATTR    a team over A2A and HTTP, each task a durable run (the serve extra)
    rolecast eval EVALSET         run an evalset against a team: pass rates (see rolecast.eval.command)
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from . import __version__, enable_logging, serve, studio
from .context import default_context
from .core.config import Config, HostedConfig
from .core.providers import OPENAI_COMPATIBLE, canonical_provider, require_sdk
from .core.redact import redact_urls
from .errors import ConfigError, RolecastError
from .eval import command as eval_command
from .llm import local_model_available, resolve_provider
from .llm.local.engine import engine_installed, info_rows
from .llm.local.provider import EMBEDDED_MODEL_NAME, embedded_model_path
from .llm.local.window import trained_context
from .llm.ollama.provider import openai_url
from .llm.openai.presets import preset_url
from .llm.openai.provider import DEFAULT_MODEL as OPENAI_DEFAULT_MODEL
from .llm.registry import provider_factory
from .llm.window import DEFAULT_CONTEXT_WINDOW, known_window
from .observe.printable import printable
from .runs import commands as runs_commands
from .tuning import command as optimize_command


def _row(label: str, value: object) -> None:
    print(f"{label:<18} : {value}")


def _gguf_file(path: str | Path) -> Path:
    """``path`` if it is a readable GGUF file; else a :class:`ConfigError` saying what is wrong with it."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise ConfigError(f"the configured GGUF model {file} does not exist (check model_path / ROLECAST_MODEL_PATH)")
    try:
        with file.open("rb") as handle:
            magic = handle.read(4)
    except OSError as exc:
        raise ConfigError(f"the configured GGUF model {file} cannot be read: {exc}") from exc
    if magic != b"GGUF":
        raise ConfigError(f"{file} is not a GGUF model file (it does not start with the GGUF magic bytes)")
    return file


def _model_rows(provider: str, cfg: Any) -> None:
    """The model a run would use: for the local provider its file, size, and whether it can be read."""
    if provider == "local":
        configured = getattr(cfg, "model_path", None) or (cfg.model if (cfg.model or "").endswith(".gguf") else None)
        file = _gguf_file(configured or embedded_model_path())
        name = cfg.model if cfg.model and not cfg.model.endswith(".gguf") else file.stem
        if not configured:
            name = f"{EMBEDDED_MODEL_NAME} (embedded)"
        _row("model", name)
        _row("model file", f"{file} ({file.stat().st_size / 2**20:.1f} MiB)")
    elif provider == "openai":
        _row("model", cfg.model or f"{OPENAI_DEFAULT_MODEL} (provider default)")
        _row("server", redact_urls(getattr(cfg, "base_url", None) or "https://api.openai.com/v1"))
    else:
        _row("model", cfg.model or "(provider default)")
        if isinstance(cfg, HostedConfig):
            _row("server", redact_urls(_hosted_server(cfg)))


def _hosted_server(cfg: HostedConfig) -> str:
    """Where a hosted provider's calls go (a preset without its required base_url: the run's ConfigError)."""
    name = canonical_provider(cfg.provider)
    if name == "ollama":
        return f"{openai_url(cfg.base_url)} (Ollama's OpenAI-compatible API)"
    if name in OPENAI_COMPATIBLE:
        return preset_url(cfg)
    defaults = {"anthropic": "https://api.anthropic.com", "gemini": "https://generativelanguage.googleapis.com"}
    return cfg.base_url or defaults.get(name) or "(none: base_url is required)"


#: a configuration field with one of these in its name holds a credential: never shown
_SECRET_WORDS = ("key", "secret", "token", "password", "passwd", "credential", "auth", "cookie")


def _shown(name: str, value: Any) -> Any:
    """A field's value as ``info`` shows it: a credential (a SecretStr, or a field named like one,
    nested ones too) as "set"."""
    lowered = name.lower()
    if isinstance(value, SecretStr) or (
        value is not None and any(w in lowered for w in _SECRET_WORDS) and not lowered.endswith("tokens")
    ):
        return "set"
    if isinstance(value, dict):
        return {k: _shown(str(k), v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_shown(name, v) for v in value]
    return redact_urls(value) if isinstance(value, str) else value  # a proxy's or server's password too


def _default_window(provider: str, cfg: Any) -> str:
    """The context window a run would use when none is configured, and where it comes from."""
    if provider == "local":
        configured = getattr(cfg, "model_path", None) or (cfg.model if (cfg.model or "").endswith(".gguf") else None)
        n_ctx = int(getattr(cfg, "n_ctx", None) or DEFAULT_CONTEXT_WINDOW)
        trained = trained_context(str(Path(configured or embedded_model_path()).expanduser()))
        if trained and trained < n_ctx:
            return f"{trained} (the model's trained context, under n_ctx {n_ctx})"
        return f"{n_ctx} (n_ctx)"
    known = known_window(cfg.model or (OPENAI_DEFAULT_MODEL if provider == "openai" else ""))
    if known:
        return f"{known} (known for this model)"
    return f"{DEFAULT_CONTEXT_WINDOW} (rolecast's default for a model it does not know)"


def _info() -> int:
    config = Config.from_env()
    cfg = config.llm
    decided = " (decided: nothing configured)" if cfg.provider == "auto" else ""
    provider = resolve_provider(cfg)
    if provider not in ("local", "openai"):
        provider_factory(provider)  # a provider nothing provides: the ConfigError a run would raise
        require_sdk(provider)  # a native provider whose SDK's extra is not installed: the run's ConfigError
    _row("provider", provider + decided)
    _model_rows(provider, cfg)
    for name, value in cfg:
        if name in ("provider", "model", "settings", "model_path", "base_url"):
            continue
        if name == "context_window" and value is None:
            _row(name, _default_window(provider, cfg))
            continue
        _row(name, "(provider default)" if value is None else _shown(name, value))
    settings = cfg.settings.model_dump(exclude_none=True, exclude_defaults=True)
    if settings:
        _row("settings", settings)
    _row("embedded model", "installed" if local_model_available() else "not installed")
    if provider == "local" or engine_installed():  # the engine's report costs a child process (~0.3 s)
        for name, value in info_rows(getattr(cfg, "n_threads", None), getattr(cfg, "n_threads_batch", None)):
            _row(name, value)
    if config.services:
        _row("services", ", ".join(sorted(config.services)))
    if config.roles:  # (MetaGPT's roles: section) each role's own model, whose SDK must be installed too
        for model in config.roles.values():
            require_sdk(str(model.provider))
        _row("roles", ", ".join(f"{role} ({model.provider}: {model.model or 'provider default'})"
                                for role, model in sorted(config.roles.items())))
    return 0


async def _ask(prompt: str) -> int:
    llm = default_context().llm()
    async for chunk in llm.stream(prompt):
        print(chunk, end="", flush=True)
    print()
    return 0


async def _choose(prompt: str, n: int) -> int:
    print(await default_context().llm().choose(prompt, n))
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The ``rolecast`` command line: every command and argument with its help."""
    parser = argparse.ArgumentParser(
        prog="rolecast", description="rolecast: MetaGPT-style teams of LLM agents. Inspect and run the configured "
        "model, the run store, evals, the studio and served teams.")
    parser.add_argument("--version", action="version", version=f"rolecast {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level")
    sub = parser.add_subparsers(dest="command", title="commands", metavar="COMMAND")
    sub.add_parser("info", help="show which model a run would use", description="Show the model a run would "
                   "use (provider, model, window, engine) and the configured services.")
    ask = sub.add_parser("ask", help="ask the configured model one question", description="Ask the configured "
                         "model one question and print its answer as it streams.")
    ask.add_argument("prompt", help="the question")
    choose = sub.add_parser("choose", help="pick one of n states, as a role's _think does",
                            description="Ask the configured model to pick one of N numbered states (-1 for none), "
                                        "as a role's _think does; prints the number.")
    choose.add_argument("prompt", help="the state-selection prompt")
    choose.add_argument("n", type=int, help="how many states there are (answers are -1 … n-1)")
    runs_commands.add_parser(sub)
    eval_command.add_parser(sub)
    optimize_command.add_parser(sub)
    studio.add_arguments(sub.add_parser("studio", help="a local web page to watch, inspect, compare and steer runs"))
    serve.add_arguments(sub.add_parser("serve", help="serve a team over A2A and an HTTP API, each task a durable run"))
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv, command_line = runs_commands.split_command(sys.argv[1:] if argv is None else list(argv))
    args = parser.parse_args(argv)
    if command_line is not None:  # (rolecast runs rerun RUN -- CMD ARGS…)
        args.command_line = command_line

    if args.command is None:  # plain `rolecast`: what it can do
        parser.print_help()
        return 0
    # the library's INFO lines are for runs (eval, serve, studio); a question or a report prints only its answer
    enable_logging("DEBUG" if args.verbose else ("WARNING" if args.command in ("info", "ask", "choose") else "INFO"))
    try:
        if args.command == "info":
            return _info()
        if args.command == "ask":
            return asyncio.run(_ask(args.prompt))
        if args.command == "runs":
            return runs_commands.run(args)
        if args.command == "eval":
            return eval_command.run(args)
        if args.command == "optimize":
            return optimize_command.run(args)
        if args.command == "studio":
            studio.require()
            return studio.run_command(args)
        if args.command == "serve":
            serve.require()
            return serve.run_command(args)
        return asyncio.run(_choose(args.prompt, args.n))
    except RolecastError as exc:
        # control characters in names and ids escaped; the message's own lines kept
        print(printable(f"rolecast: {type(exc).__name__}: {exc}", lines=True), file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["build_parser", "main"]
