"""Dense embeddings through FlagEmbedding, behind a small protocol.

The model is resolved cheaply at construction (a local folder, or a hub id already in the local cache),
then loaded once in a background thread: L0 and BM25 serve while it loads. When it cannot be found or
loaded, the embedder says so (`state`) and L1 runs on full text only. It never invents vectors.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kb_core.errors import EmbeddingError
from kb_core.progress import Progress
from kb_core.storage.ports import ModelState, Vector

log = logging.getLogger(__name__)



def resolve_model_folder(model: str) -> Path | None:
    """A local folder as given, or the cached snapshot of a hub id; `None` when neither exists here."""
    path = Path(model).expanduser()
    if path.is_dir():
        return path
    if path.is_absolute() or model.startswith((".", "~")) or model.count("/") != 1:
        return None
    caches = [c for c in _hub_caches() if (c / f"models--{model.replace('/', '--')}").is_dir()]
    if not caches:
        return None  # not cached anywhere the hub looks: said without importing it (~1 s at a cold start)
    try:
        from huggingface_hub import try_to_load_from_cache

        for cache in caches:
            cached = try_to_load_from_cache(model, "config.json", cache_dir=cache)
            if isinstance(cached, str):
                return Path(cached).parent
    except Exception:  # noqa: BLE001 - an unusable cache is the same as no cache
        return None
    return None


def _hub_caches() -> list[Path]:
    """Every folder huggingface_hub may keep its cache in (its own rules: HF_HUB_CACHE, the older
    HUGGINGFACE_HUB_CACHE, HF_HOME/hub, XDG_CACHE_HOME/huggingface/hub, ~/.cache/huggingface/hub)."""
    env = os.environ
    homes = [env.get("HF_HOME", ""), os.path.join(env.get("XDG_CACHE_HOME", ""), "huggingface")
             if env.get("XDG_CACHE_HOME") else "", str(Path.home() / ".cache" / "huggingface")]
    found = [env.get("HF_HUB_CACHE", ""), env.get("HUGGINGFACE_HUB_CACHE", ""),
             *(os.path.join(h, "hub") for h in homes if h)]
    return [Path(c).expanduser() for c in found if c]


def is_bge_m3(folder: Path, model: str) -> bool:
    return (folder / "colbert_linear.pt").exists() or (folder / "sparse_linear.pt").exists() or (
        "bge-m3" in model.lower()
    )


class FlagEmbedder:
    """`BGEM3FlagModel` for BGE-M3-family folders, `FlagModel` (mean pooling) for other local models."""

    def __init__(
        self,
        model: str,
        *,
        device: str | None = None,
        batch_size: int = 4,  # measured: small length-sorted batches beat large ones on CPU
        max_length: int = 1024,
        query_cache_size: int = 1024,
        load_timeout: float = 600.0,
        precision: str = "auto",
    ):
        if precision not in PRECISIONS:
            raise EmbeddingError(f"KB_EMBEDDING_PRECISION must be one of {', '.join(PRECISIONS)}, not {precision!r}")
        self._precision = precision
        self._model_name = model
        self._device = device
        self._batch_size = batch_size
        self._max_length = max_length
        self._load_timeout = load_timeout
        # tuples: a cached vector cannot be changed by whoever receives it
        self._query_vector = functools.lru_cache(maxsize=query_cache_size)(
            lambda text: tuple(self._encode([text])[0]))
        self._folder = resolve_model_folder(model)
        self._dimension = self._read_dimension(self._folder) if self._folder else None
        self._model: Any = None  # the FlagEmbedding object (loading code and reference encoder)
        self._fast: _FastEncoder | None = None
        self._bge_m3 = bool(self._folder and is_bge_m3(self._folder, model))
        self._loaded = threading.Event()
        self._start_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._encode_lock = threading.Lock()
        if self._folder is None or self._dimension is None:
            why = (f"model '{model}' is not a local folder and is not in the Hugging Face cache"
                   if self._folder is None else f"no usable config.json in {self._folder}")
            self._state = ModelState("unavailable", model, f"{why}; L1 runs on full text (BM25) only")
            self._loaded.set()
            log.warning("embedding model unavailable: %s", self._state.detail)
        else:
            self._state = ModelState("loading", model, "not started")

    # -- identity ------------------------------------------------------------------------------------
    @property
    def model_id(self) -> str:
        return self._model_name

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            raise EmbeddingError(self._state.detail)
        return self._dimension

    @property
    def available(self) -> bool:
        """False when the model cannot be found at all (known at construction, without loading)."""
        return self._dimension is not None

    @property
    def state(self) -> ModelState:
        return self._state

    @property
    def cache_stats(self) -> tuple[int, int]:
        info = self._query_vector.cache_info()
        return info.hits, info.misses

    @staticmethod
    def _read_dimension(folder: Path) -> int | None:
        try:
            config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
            return int(config["hidden_size"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    # -- loading -------------------------------------------------------------------------------------
    def start_loading(self) -> None:
        """Load the model in a background thread (idempotent)."""
        with self._start_lock:
            if self._thread is not None or self._loaded.is_set():
                return
            self._state = ModelState("loading", self._model_name, "loading in the background")
            self._thread = threading.Thread(target=self._load, name="kb-embedding-load", daemon=True)
            self._thread.start()

    def wait_ready(self, timeout: float | None = None) -> ModelState:
        self.start_loading()
        self._loaded.wait(self._load_timeout if timeout is None else timeout)
        return self._state

    def _load(self) -> None:
        started = time.perf_counter()
        try:
            device = self._device or _default_device()
            use_fp16 = device.startswith("cuda") and self._precision in ("auto", "fp16")
            # Everything is local by now; never let a library reach for the hub.
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            from FlagEmbedding import BGEM3FlagModel, FlagModel  # ~5 s: torch + transformers

            if self._bge_m3:
                model = BGEM3FlagModel(str(self._folder), use_fp16=use_fp16, devices=device,
                                       normalize_embeddings=True)
            else:
                model = FlagModel(str(self._folder), use_fp16=use_fp16, devices=device, pooling_method="mean",
                                  normalize_embeddings=True)
            precision = resolve_precision(self._precision, device)
            self._fast = _FastEncoder(model, bge_m3=self._bge_m3, device=device, precision=precision,
                                      batch_size=self._batch_size)
            self._fast.encode(["warm up"], max_length=16)  # the first forward pays for lazy initialisation
            self._model = model
            seconds = time.perf_counter() - started
            self._state = ModelState("ready", self._model_name, f"{'BGE-M3' if self._bge_m3 else 'FlagModel'} "
                                     f"on {device}, {precision}, dim {self._dimension}", seconds)
            log.info("embedding model %s ready in %.1f s (%s)", self._model_name, seconds, self._state.detail)
        except Exception as exc:  # noqa: BLE001 - any load failure degrades to BM25 only
            self._state = ModelState("unavailable", self._model_name,
                                     f"failed to load: {type(exc).__name__}: {exc}; L1 runs on full text only")
            log.warning("embedding model %s could not be loaded: %s", self._model_name, exc)
        finally:
            self._loaded.set()

    def _ready_model(self) -> Any:
        state = self.wait_ready()
        if not state.ready:
            if state.state == "loading":
                raise EmbeddingError(f"embedding model {self._model_name} is still loading")
            raise EmbeddingError(f"embedding model {self._model_name} is unavailable: {state.detail}")
        return self._model

    # -- encoding ------------------------------------------------------------------------------------
    def _encode(self, texts: list[str]) -> list[Vector]:
        self._ready_model()
        assert self._fast is not None
        with self._encode_lock:  # torch already uses every core; concurrent calls only thrash
            dense = self._fast.encode(texts, max_length=self._max_length)
        vectors = [[float(x) for x in row] for row in dense]
        if len(vectors) != len(texts) or any(len(v) != self._dimension for v in vectors):
            raise EmbeddingError(f"embedding model {self._model_name} returned vectors of an unexpected shape")
        return vectors

    def reference_encode(self, texts: Sequence[str], *, query: bool) -> list[Vector]:
        """FlagEmbedding's own `encode_queries`/`encode_corpus` with its defaults (benchmarks and tests)."""
        model = self._ready_model()
        method = model.encode_queries if query else model.encode_corpus
        output = method(list(texts), **({"return_dense": True} if self._bge_m3 else {}))
        dense = output["dense_vecs"] if isinstance(output, dict) else output
        return [[float(x) for x in row] for row in (dense.reshape(1, -1) if dense.ndim == 1 else dense)]

    def encode_queries(self, texts: Sequence[str]) -> list[Vector]:
        return [list(self._query_vector(text)) for text in texts]

    def encode_documents(self, texts: Sequence[str], progress: Progress | None = None) -> list[Vector]:
        texts = list(texts)
        if not texts:
            return []
        vectors: list[Vector] = []
        step = max(self._batch_size * 4, 1)
        for start in range(0, len(texts), step):
            vectors.extend(self._encode(texts[start : start + step]))
            if progress is not None:
                progress("embedding", len(vectors), len(texts))
        return vectors


def _default_device() -> str:
    try:
        import torch

        return "cuda:0" if torch.cuda.is_available() else "cpu"
    except Exception:  # noqa: BLE001
        return "cpu"


PRECISIONS = ("auto", "fp32", "bf16", "fp16", "int8")


def cpu_supports_bf16() -> bool:
    """bf16 matmuls are fast only where the CPU has them (AVX512-BF16 or AMX); elsewhere they are emulated."""
    try:
        import torch

        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except Exception:  # noqa: BLE001
        try:
            flags = Path("/proc/cpuinfo").read_text()
        except OSError:
            return False
        return "avx512_bf16" in flags or "amx_bf16" in flags


def resolve_precision(precision: str, device: str) -> str:
    """`auto`: fp16 on a GPU, bf16 on a CPU that has bf16 instructions, fp32 otherwise."""
    if precision != "auto":
        return precision
    if device.startswith("cuda"):
        return "fp16"
    return "bf16" if cpu_supports_bf16() else "fp32"


class _FastEncoder:
    """Runs the transformer that FlagEmbedding loaded, without FlagEmbedding's `encode` loop.

    That loop runs its first batch twice (a memory probe), which doubles the cost of a one-text query, and
    pads ingest batches of 256. Here: texts sorted by length into small batches, one forward each under
    `inference_mode`. On a CPU with bf16 instructions the forward runs under bf16 autocast (weights stay
    fp32): measured about 2x faster than fp32 for both queries and ingest with the BGE-M3-shaped model, and
    cosine >= 0.999 with fp32 on real all-MiniLM-L6-v2 weights. Casting the weights to bf16 instead was
    slower for short queries. int8 (dynamic, per channel) measured cosine 0.95 on MiniLM: opt-in only.
    Pooling matches FlagEmbedding: CLS for BGE-M3, mean otherwise; vectors are L2-normalised in fp32.
    """

    def __init__(self, flag_model: Any, *, bge_m3: bool, device: str, precision: str, batch_size: int):
        import torch

        self._torch = torch
        self._tokenizer = flag_model.tokenizer
        transformer = flag_model.model.model if bge_m3 else flag_model.model
        transformer = transformer.to(device).eval()
        transformer = transformer.half() if precision == "fp16" else transformer.float()
        if precision == "int8":
            from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

            transformer = quantize_dynamic(transformer, {torch.nn.Linear: per_channel_dynamic_qconfig})
        self.precision = precision
        self._transformer = transformer
        self._cls = bge_m3
        self._device = device
        self._batch_size = max(1, batch_size)

    def encode(self, texts: Sequence[str], *, max_length: int) -> Any:
        import numpy as np

        torch = self._torch
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]), reverse=True)
        rows: list[Any] = [None] * len(texts)
        autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.precision == "bf16")
        with torch.inference_mode(), autocast:
            for start in range(0, len(order), self._batch_size):
                batch = order[start : start + self._batch_size]
                inputs = self._tokenizer([texts[i] for i in batch], padding=True, truncation=True,
                                         max_length=max_length, return_tensors="pt").to(self._device)
                hidden = self._transformer(**inputs, return_dict=True).last_hidden_state.float()
                if self._cls:
                    pooled = hidden[:, 0]
                else:
                    mask = inputs["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                    pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
                pooled = torch.nn.functional.normalize(pooled, dim=-1).cpu().numpy()
                for row, i in zip(pooled, batch, strict=True):
                    rows[i] = row
        return np.stack(rows) if rows else np.zeros((0, 0), dtype=np.float32)
