"""Reproducible performance figures: `python -m kb_core.bench` prints a table and writes JSON.

Everything is measured side by side in one run (these machines are shared and noisy): medians and p99
over many calls, and ratios between variants run in the same process a moment apart.

- L0: load time, index memory (tracemalloc), `exact_match` p50/p99 over a fixed query mix, and the same
  queries through the naive reference of decision I3 (a Python loop doing the two-way `in` test over every
  keyword), with the speed-up as a ratio. Both must return identical results.
- Lookup end to end: L0-unique, L0-multi and L0-miss queries with the configured model, and with a
  BGE-M3-shaped random model (24 layers, hidden 1024, vocabulary 250002: real BGE-M3 cost without the
  weights) through FlagEmbedding's own `encode_queries` (fp32) and through kb_core's encoder (fp32 and the
  default precision); query-cache hits.
- Ingest: chunks/s of FlagEmbedding's defaults vs kb_core's encoder with the BGE-M3-shaped model, the
  cosine between their vectors, and documents/s for whole uploads.

- L1 full text: the same chunks of real-sized generated documents (default 20,000 chunks) in Milvus Lite with
  its own BM25 and with SQLite FTS5 (the embedded default); `VectorSearcher.search` p50/p99 per query class
  (short, Chinese sentence, English sentence, long), the engines alternating per query.

- Pages: every console page's render time (Streamlit AppTest) at 10,000 documents, first render and the
  median of reruns, with the cached summaries and with the cache off (`kb_core.bench_pages`).

The L1 collection for the lookup runs holds the generated documents' chunks with random unit vectors:
those runs measure latency (query encoding + BM25 + dense search + fusion), not retrieval quality.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import logging
import math
import os
import platform
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from naive_l0 import NaiveIndex

from kb_core.retrieval.keyword_index import KnowledgeIndex
from kb_core.stats import percentile

log = logging.getLogger("kb_core.bench")

L1_GOAL_P99_MS = 150.0  # the embedded default at 20,000 chunks

# -- synthetic corpus ---------------------------------------------------------------------------------------
_ZH_PREFIX = ["支付", "订单", "退款", "库存", "用户", "账户", "缓存", "网关", "消息", "搜索", "推荐", "风控", "结算",
              "对账", "物流", "优惠券", "会员", "积分", "短信", "通知"]
_ZH_SUFFIX = ["超时", "失败", "重试", "限流", "降级", "熔断", "延迟", "异常", "告警", "配置", "迁移", "扩容", "回滚",
              "死锁", "泄漏"]
_EN_TERMS = ["connection pool", "rate limit", "circuit breaker", "dead letter queue", "cache stampede",
             "thread starvation", "slow query", "memory leak", "retry storm", "hot partition", "clock skew",
             "split brain", "back pressure", "idempotency key", "schema migration", "blue green deploy",
             "canary release", "feature flag", "token refresh", "certificate expiry"]
_SERVICES = ["Payment", "Order", "Refund", "Inventory", "User", "Account", "Cache", "Gateway", "Message", "Search",
             "Billing", "Ledger", "Shipping", "Coupon", "Member", "Points", "Sms", "Notify", "Risk", "Report"]
_HOT = ["超时", "timeout", "Redis"]  # claimed by many documents: the ambiguous L0 case
# Real product docs put a few generic keywords on a third to a half of all documents (product names, "Plugin")
_GENERIC = [("Apache Lumen", 0.45), ("Plugin", 0.35), ("Kestrel", 0.30), ("API 网关", 0.20)]
# ... and short Latin keywords that occur inside ordinary words (AI in "explain", CLI in "client")
_SHORT = ["AI", "CLI", "ACL", "API", "TPS", "2.0"]
_MISS_TOPICS = ["磁盘写满", "证书链不完整", "日志轮转失败", "夜间批处理卡住", "disk full on the log volume",
                "a stuck nightly batch job", "an incomplete certificate chain", "log rotation stopping"]
_SENTENCES_ZH = ["当{a}出现时，先检查{b}的监控指标。", "{a}通常由{b}引起，需要结合日志定位。",
                 "如果{a}持续超过五分钟，请升级到值班负责人。", "{a}与{b}的关系在架构文档中有详细说明。",
                 "处理{a}之前，确认{b}已经恢复正常。"]
_SENTENCES_EN = ["When {a} happens, check the {b} dashboard first.", "{a} is usually caused by {b}; read the logs.",
                 "If {a} lasts longer than five minutes, page the on-call owner.",
                 "The relation between {a} and {b} is described in the architecture notes."]


@dataclass
class Corpus:
    root: Path
    keywords: list[list[str]] = field(default_factory=list)  # per document, in generation order
    shared_terms: list[str] = field(default_factory=list)


def _code(i: int) -> str:
    return f"ERR_{_SERVICES[i % len(_SERVICES)].upper()}_{i:05d}"


def _api(i: int, rng: random.Random) -> str:
    return f"{_SERVICES[i % len(_SERVICES)]}Service.{rng.choice(['create', 'query', 'cancel', 'sync'])}{i}"


def generate_corpus(root: Path, n: int, *, seed: int = 7, min_kb: int = 2, max_kb: int = 20) -> Corpus:
    """N Markdown documents with realistic frontmatter under root/knowledge_base/{category}/."""
    rng = random.Random(seed)
    zh_terms = [p + s for p in _ZH_PREFIX for s in _ZH_SUFFIX]
    shared = zh_terms + _EN_TERMS
    corpus = Corpus(root=root, shared_terms=shared)
    categories = ["api", "domain", "troubleshooting"]
    for i in range(n):
        if i % 10 == 9:
            # a bilingual pair: the previous page again, same file name, another category, same keywords
            keywords = corpus.keywords[-1]
            corpus.keywords.append(keywords)
            title = f"{keywords[0]} troubleshooting guide (English) {i - 1}"
            name, category = f"doc-{i - 1:05d}.md", categories[i % 3]
        else:
            keywords = [_code(i)]
            if rng.random() < 0.5:
                keywords.append(_api(i, rng))
            keywords += [term for term, share in _GENERIC if rng.random() < share]
            if rng.random() < 0.06:
                keywords.append(rng.choice(_SHORT))
            keywords += rng.sample(shared, rng.randint(1, 3))
            if rng.random() < 0.03:
                keywords.append(rng.choice(_HOT))
            keywords = list(dict.fromkeys(keywords))[:7]
            while len(keywords) < 3:
                keywords.append(rng.choice(shared))
                keywords = list(dict.fromkeys(keywords))
            corpus.keywords.append(keywords)
            title = f"{keywords[1] if len(keywords) > 1 else keywords[0]} 排查手册 {i}"
            name, category = f"doc-{i:05d}.md", categories[i % 3]
        target = rng.randint(min_kb * 1024, max_kb * 1024)
        parts = [f"---\ntitle: {title}\nkeywords: [{', '.join(keywords)}]\n"
                 f"summary: 关于 {keywords[0]} 的说明与处理步骤\n---\n\n# {title}\n"]
        size = len(parts[0].encode())
        section = 0
        while size < target:
            section += 1
            a, b = rng.choice(shared), rng.choice(shared)
            heading = f"\n## {section}. {a}\n\n"
            template = rng.choice(_SENTENCES_ZH if rng.random() < 0.6 else _SENTENCES_EN)
            paragraph = " ".join(rng.choice([template]).format(a=rng.choice(shared), b=b) for _ in range(8))
            text = heading + paragraph + f" {a}\n"
            parts.append(text)
            size += len(text.encode())
        path = root / "knowledge_base" / category / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(parts), encoding="utf-8")
    return corpus


def query_mix(corpus: Corpus, *, count: int = 100, seed: int = 11) -> dict[str, list[str]]:
    """The fixed L0 query mix: exact keywords, keywords inside sentences, partial keywords, misses, 500-char."""
    rng = random.Random(seed)
    n = len(corpus.keywords)
    filler = "系统在高峰期间表现不稳定，我们需要一份完整的分析报告来说明原因与后续改进计划。" \
             "The service degraded during peak hours and we need a full write-up of causes and follow-ups. "
    picks = [rng.randrange(n) for _ in range(count)]
    return {
        "keyword": [corpus.keywords[i][0] for i in picks],
        "in sentence": [f"线上告警：{corpus.keywords[i][0]} 出现了很多次，应该怎么处理？" for i in picks],
        "partial": [corpus.keywords[i][0][:-1] for i in picks],
        "miss": [f"完全无关的问题 {rng.randint(0, 10**9)} qwxz" for _ in picks],
        "500 chars": [(filler * 5)[:480] + f" {corpus.keywords[i][0]}" for i in picks],
        # hit thousands of documents through the generic keywords
        "generic": [rng.choice(["Apache Lumen", "How do I write a Plugin for Apache Lumen?", "Kestrel",
                                "API 网关 的 Plugin 怎么配置", "plugin"]) for _ in picks],
        # short keywords inside ordinary words must not match; as words they must
        "short words": [rng.choice(["please explain the detailed client configuration", "AI gateway timeouts",
                                    "the CLI failed", "Kestrel 2.0 upgrade", "a"]) for _ in picks],
    }


# -- measurement helpers ------------------------------------------------------------------------------------
def _percentile(values: Sequence[float], p: float) -> float:
    value = percentile(values, p)
    if value is None:
        raise ValueError("no samples")
    return value


def _time_calls(fn: Callable[[str], Any], queries: Sequence[str], repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        for q in queries:
            started = time.perf_counter_ns()
            fn(q)
            samples.append((time.perf_counter_ns() - started) / 1e6)
    return samples


def _stats(samples: Sequence[float]) -> dict[str, float]:
    return {"p50_ms": round(statistics.median(samples), 4), "p99_ms": round(_percentile(samples, 99), 4),
            "n": len(samples)}


# -- L0 -----------------------------------------------------------------------------------------------------
def bench_l0(n: int, workdir: Path, *, repeat: int) -> dict[str, Any]:
    root = workdir / f"l0-{n}"
    corpus = generate_corpus(root, n)
    loads = []
    for _ in range(3):
        index = KnowledgeIndex("knowledge_base", app_root=root)
        started = time.perf_counter()
        index.load()
        loads.append(time.perf_counter() - started)
        del index
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    index = KnowledgeIndex("knowledge_base", app_root=root)
    index.load()
    gc.collect()
    memory = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()

    open_s = _open_seconds(root) if n <= 1000 else None

    naive = NaiveIndex(index.entries(), index.matching)
    i3_loop = NaiveIndex(index.entries(), "substring")  # decision I3 as written: the loop the spec describes
    mix = query_mix(corpus)
    for queries in mix.values():  # the two must agree before their speed is compared
        for q in queries[:30]:
            assert index.exact_match(q) == naive.exact_match(q), f"L0 and the naive reference disagree on {q!r}"
    classes: dict[str, Any] = {}
    all_fast: list[float] = []
    all_match: list[float] = []
    all_naive: list[float] = []
    all_i3: list[float] = []
    for name, queries in mix.items():
        fast = _time_calls(index.exact_match, queries, repeat)
        ranked = _time_calls(_ranked_head, [(index, q) for q in queries], repeat)
        # the references are slow (seconds per query at 10,000 documents): time a sample of 30 queries once
        slow = _time_calls(naive.exact_match, queries[:30], 1)
        i3 = _time_calls(i3_loop.exact_match, queries[:30], 1)
        all_fast += fast
        all_match += ranked
        all_naive += slow
        all_i3 += i3
        classes[name] = {"l0": _stats(fast), "match": _stats(ranked), "naive": _stats(slow), "i3": _stats(i3),
                         "hits_per_query": round(statistics.mean(len(index.match(q)) for q in queries), 2)}
    after_add = _first_match_after_change(index, mix["generic"][:20] + mix["keyword"][:20])
    return {
        "documents": n,
        "keywords": sum(len(k) for k in corpus.keywords),
        "load_s_median": round(statistics.median(loads), 3),
        "open_knowledge_base_s": open_s,
        "memory_mb": round(memory / 1e6, 2),
        "memory_mb_per_1000_docs": round(memory / 1e6 / (n / 1000), 2),
        "matching": index.matching,
        "exact_match": _stats(all_fast),
        "match": _stats(all_match),
        "naive": _stats(all_naive),
        "speedup_p50": round(statistics.median(all_naive) / statistics.median(all_match), 1),
        "speedup_p99": round(_percentile(all_naive, 99) / _percentile(all_match, 99), 1),
        "i3": _stats(all_i3),
        "speedup_vs_i3_p50": round(statistics.median(all_i3) / statistics.median(all_match), 1),
        "speedup_vs_i3_p99": round(_percentile(all_i3, 99) / _percentile(all_match, 99), 1),
        "classes": classes,
        "after_add": after_add,
    }


def _ranked_head(item: tuple[KnowledgeIndex, str]) -> Any:
    """What a lookup needs from L0: the ranked first hit, the ones tied with it, and the total."""
    index, query = item
    matches = index.match(query)
    return (len(matches), matches[0], matches.tied_count()) if len(matches) else None


def _first_match_after_change(index: KnowledgeIndex, queries: Sequence[str]) -> dict[str, Any]:
    """add() builds the new snapshot before swapping it in: the first lookup after it is as fast as any."""
    from kb_core.retrieval.keyword_index import KnowledgeEntry

    add_ms, first, steady = [], [], []
    for i, query in enumerate(queries):
        entry = KnowledgeEntry(f"knowledge_base/api/bench-added-{i}.md", "added", (f"BENCH_ADDED_{i}", "Plugin"), "")
        started = time.perf_counter_ns()
        index.add(entry)
        add_ms.append((time.perf_counter_ns() - started) / 1e6)
        first += _time_calls(lambda q: _ranked_head((index, q)), [query], 1)
        steady += _time_calls(lambda q: _ranked_head((index, q)), [query], 1)
        index.remove(entry.file_path)
    return {"add": _stats(add_ms), "first_match": _stats(first), "next_match": _stats(steady)}


def _open_seconds(root: Path) -> float:
    """Spec 6.3: opening the whole knowledge base (migrate, L0 scan, Milvus, warm-up) over the corpus."""
    from kb_core.bootstrap import open_knowledge_base
    from kb_core.settings import load_settings

    settings = load_settings(app_root=root, embedding_model="no-such-org/no-such-model",
                             database_url=f"sqlite:///{root}/kb.sqlite3")
    started = time.perf_counter()
    kb = open_knowledge_base(settings)
    seconds = time.perf_counter() - started
    kb.close()
    return round(seconds, 3)


# -- lookups ------------------------------------------------------------------------------------------------
class _QueryEncoder:
    """Adapts one way of encoding queries to what `VectorSearcher` needs, counting calls."""

    def __init__(self, encode: Callable[[list[str]], list[list[float]]], state: Any):
        self._encode = encode
        self.state = state
        self.calls = 0

    def encode_queries(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        return self._encode(list(texts))


class _RandomDocuments:
    """Document vectors for the latency runs: random unit vectors (quality is not measured here)."""

    def __init__(self, model_id: str, dimension: int, seed: int = 3):
        self.model_id, self.dimension = model_id, dimension
        self._rng = random.Random(seed)

    def encode_documents(self, texts: Sequence[str], progress: Any = None) -> list[list[float]]:
        vectors = []
        for _ in texts:
            v = [self._rng.gauss(0, 1) for _ in range(self.dimension)]
            norm = math.sqrt(sum(x * x for x in v))
            vectors.append([x / norm for x in v])
        return vectors


def _lookup_queries(corpus: Corpus, count: int, seed: int = 5) -> dict[str, list[str]]:
    rng = random.Random(seed)
    n = len(corpus.keywords)
    unique = [corpus.keywords[rng.randrange(n)][0] for _ in range(count)]
    claims: dict[str, int] = {}
    for keywords in corpus.keywords:
        for k in keywords:
            claims[k] = claims.get(k, 0) + 1
    shared = [k for k, c in claims.items() if c > 1]
    multi = [rng.choice(shared) for _ in range(count)]
    miss = [f"{rng.choice(['如何处理', '为什么会出现', 'how to handle', 'why does the system show'])} "
            f"{rng.choice(_MISS_TOPICS)} {rng.randint(0, 10**6)}" for _ in range(count * 3)]
    # a "miss" must really miss L0 (checked by the caller against the index), so L0 + L1 is timed
    return {"L0-unique": unique, "L0-multi": multi, "L0-miss": miss}


def bench_lookups(workdir: Path, *, docs: int, queries: int, bge_path: Path | None, configured_model: str,
                  variants: Sequence[str]) -> dict[str, Any]:
    from kb_core.bootstrap import open_knowledge_base
    from kb_core.documents.service import DocumentService
    from kb_core.retrieval.l1_search import VectorSearcher
    from kb_core.retrieval.lookup import HybridLookup
    from kb_core.settings import load_settings
    from kb_core.storage.embedding import FlagEmbedder

    results: dict[str, Any] = {}
    root = workdir / "l1"
    corpus = generate_corpus(root, docs, seed=21, min_kb=2, max_kb=6)
    mix = _lookup_queries(corpus, queries)
    runs: list[tuple[str, str, Callable[[FlagEmbedder], Any] | None]] = []
    if "configured" in variants:
        runs.append((f"configured ({configured_model})", configured_model, None))
    if bge_path is not None:
        if "flagembedding-fp32" in variants:
            runs.append(("BGE-M3-shaped, FlagEmbedding encode_queries fp32", str(bge_path),
                         lambda e: lambda texts: e.reference_encode(texts, query=True)))
        if "kb-fp32" in variants:
            runs.append(("BGE-M3-shaped, kb_core encoder fp32", str(bge_path), "fp32"))
        if "kb-auto" in variants:
            runs.append(("BGE-M3-shaped, kb_core encoder default (auto)", str(bge_path), "auto"))

    opened: dict[str, Any] = {}
    for label, model, how in runs:
        precision = how if isinstance(how, str) else "fp32"
        if model not in opened:
            settings = load_settings(app_root=root, embedding_model=model, database_url=f"sqlite:///{root}/kb.sqlite3")
            kb = open_knowledge_base(settings, load_model=False)
            embedder = kb.embedder
            if embedder.available:
                # Ingest with random vectors: these runs time lookups, not retrieval quality.
                service = DocumentService(kb.index, kb.metadata, kb.vectors,
                                          _RandomDocuments(model, embedder.dimension),  # type: ignore[arg-type]
                                          max_upload_bytes=settings.max_upload_bytes)
                service.sync()
            else:
                kb.sync()
            opened[model] = kb
        kb = opened[model]
        embedder = None
        if kb.embedder.available:
            embedder = FlagEmbedder(model, device="cpu", precision=precision, query_cache_size=0)
            embedder.wait_ready()
            encode = how(embedder) if callable(how) else embedder.encode_queries
            query_encoder = _QueryEncoder(encode, embedder.state)
        else:
            query_encoder = None
        searcher = VectorSearcher(kb.vectors, query_encoder)  # type: ignore[arg-type]
        lookup = HybridLookup(kb.index, searcher)
        mix["L0-miss"] = [q for q in mix["L0-miss"] if not kb.index.match(q)][:queries]
        row: dict[str, Any] = {"model_state": (embedder.state.detail if embedder else kb.embedder.state.detail)}
        for name, qs in mix.items():
            calls_before = query_encoder.calls if query_encoder else 0
            samples = _time_calls(lookup.lookup, qs, 1)
            row[name] = _stats(samples)
            if name == "L0-unique":
                row[name]["exact_match"] = _stats(_time_calls(kb.index.exact_match, qs, 1))
                row[name]["model_calls"] = (query_encoder.calls if query_encoder else 0) - calls_before
        if embedder is not None:
            cached = FlagEmbedder(model, device="cpu", precision=precision)
            cached.wait_ready()
            cached.encode_queries(["缓存命中"])
            hit = cached.encode_queries
            row["query_cache_hit"] = _stats(_time_calls(lambda q, hit=hit: hit([q]), ["缓存命中"] * 50, 1))
            del cached
        results[label] = row
        del embedder
        gc.collect()
    for kb in opened.values():
        kb.close()
    return results


# -- ingest -------------------------------------------------------------------------------------------------
def bench_ingest(workdir: Path, *, bge_path: Path, chunks: int, docs: int) -> dict[str, Any]:
    from kb_core.bootstrap import open_knowledge_base
    from kb_core.documents.chunking import chunk_markdown
    from kb_core.settings import load_settings
    from kb_core.storage.embedding import FlagEmbedder

    root = workdir / "ingest"
    corpus = generate_corpus(root / "source", max(docs, 8), seed=31, min_kb=2, max_kb=8)
    texts: list[str] = []
    for path in sorted((corpus.root / "knowledge_base").rglob("*.md")):
        texts += [c.embedding_text("") for c in chunk_markdown(path.read_text(encoding="utf-8"))]
    texts = texts[:chunks]
    result: dict[str, Any] = {"chunks": len(texts), "avg_chars": round(statistics.mean(len(t) for t in texts))}
    reference = FlagEmbedder(str(bge_path), device="cpu", precision="fp32")
    reference.wait_ready()
    started = time.perf_counter()
    ref_vectors = reference.reference_encode(texts, query=False)
    result["flagembedding_defaults_chunks_per_s"] = round(len(texts) / (time.perf_counter() - started), 3)
    del reference
    gc.collect()
    ours = FlagEmbedder(str(bge_path), device="cpu", precision="auto")
    ours.wait_ready()
    started = time.perf_counter()
    our_vectors = ours.encode_documents(texts)
    result["kb_core_chunks_per_s"] = round(len(texts) / (time.perf_counter() - started), 3)
    result["kb_core_precision"] = ours.state.detail
    result["speedup"] = round(result["kb_core_chunks_per_s"] / result["flagembedding_defaults_chunks_per_s"], 2)
    result["min_cosine_vs_flagembedding"] = round(min(
        sum(a * b for a, b in zip(u, v, strict=True)) for u, v in zip(our_vectors, ref_vectors, strict=True)), 5)
    del ours
    gc.collect()

    # Whole uploads: parse, chunk, embed (kb_core path), write, index.
    (root / "kb").mkdir(parents=True, exist_ok=True)
    kb = open_knowledge_base(load_settings(app_root=root / "kb", embedding_model=str(bge_path),
                                           database_url=f"sqlite:///{root}/kb/kb.sqlite3"))
    kb.embedder.wait_ready()
    files = sorted((corpus.root / "knowledge_base").rglob("*.md"))[:docs]
    started = time.perf_counter()
    total_chunks = sum(kb.upload(p.name, p.read_bytes(), p.parent.name).document.chunk_count for p in files)
    seconds = time.perf_counter() - started
    kb.close()
    result["upload_docs"] = len(files)
    result["upload_docs_per_s"] = round(len(files) / seconds, 3)
    result["upload_chunks_per_s"] = round(total_chunks / seconds, 3)
    return result


# -- L1 full text at scale: Milvus Lite BM25 vs SQLite FTS5 ---------------------------------------------------
_L1_EN = ("request response upstream downstream gateway route plugin consumer service cluster node replica shard "
          "index query cache timeout retry backoff latency throughput connection pool session token certificate "
          "handshake policy quota limit bucket window metric trace span log level snapshot backup restore migration "
          "schema table partition compaction segment flush commit rollback transaction lock lease leader follower "
          "heartbeat failover health probe deployment container image registry namespace tenant role permission "
          "audit webhook callback event stream topic queue producer subscriber offset checkpoint payload header "
          "cookie redirect rewrite proxy balancer weight hash canary rollout traffic circuit breaker fallback "
          "configure enable disable restart reload upgrade install verify validate monitor alert dashboard console "
          "endpoint version release default optional required string array object duration bytes seconds").split()
_L1_GLUE = "the a to of and in is for with when on by this that it".split()
_L1_PRODUCTS = ["Lumen", "Kestrel", "Orca", "Nimbus", "Tern", "Quill", "Harbor", "Atlas", "Vireo", "Basalt"]
_L1_CATEGORIES = ["gateway", "gateway-zh", "registry", "registry-zh", "ops", "faq", "security", "sdk"]
L1_CLASSES = ["short", "Chinese sentence", "English sentence", "long"]


class _L1Writer:
    """Real-sized mixed Chinese/English product pages: Zipf-distributed words (jieba's 4,000 most frequent
    Chinese content words; English terms, then made-up words for the long tail), a topic per page whose words
    and identifiers recur, headings, paragraphs, parameter tables and code fences; ~6,600 body chars (log-normal)."""

    def __init__(self, seed: int):
        import jieba

        from kb_core.terms import STOP_WORDS

        self.rng = rng = random.Random(seed)
        zh = []
        for line in (Path(jieba.__file__).parent / "dict.txt").read_text(encoding="utf-8").splitlines():
            word, freq, pos = line.split(" ")
            if (2 <= len(word) <= 4 and pos in {"n", "v", "vn", "a", "ad", "an", "nz", "l", "i", "d", "ns"}
                    and all("\u4e00" <= ch <= "\u9fff" for ch in word) and word not in STOP_WORDS):
                zh.append((int(freq), word))
        self.zh = [w for _, w in sorted(zh, reverse=True)[:4000]]
        syllables = [c + v for c in "bcdfgklmnprstvz" for v in "aeiou"] + ["tion", "ment", "ex", "on", "er"]
        en = dict.fromkeys(w for w in _L1_EN if w not in STOP_WORDS)
        while len(en) < 3000:
            en.setdefault("".join(rng.choices(syllables, k=rng.randint(2, 4))) + rng.choice(["", "s", "ed", "ing"]))
        self.en = list(en)
        parts = [w for w in self.en if 3 <= len(w) <= 10][:900]

        def identifier() -> str:
            kind = rng.random()
            if kind < 0.55:
                return "_".join(rng.choices(parts, k=rng.randint(2, 4)))
            if kind < 0.7:
                return ".".join(rng.choices(parts, k=rng.randint(2, 4)))
            if kind < 0.82:
                return rng.choice(["E", "ERR", "KST-", "LMN_", "W"]) + str(rng.randint(1000, 99999))
            return "".join(w.capitalize() if i else w for i, w in enumerate(rng.choices(parts, k=rng.randint(2, 3))))

        self.ids = list(dict.fromkeys(identifier() for _ in range(3000)))
        self.zh_cw = list(itertools.accumulate(1 / (r + 1) ** 0.9 for r in range(len(self.zh))))
        self.en_cw = list(itertools.accumulate(1 / (r + 1) ** 0.9 for r in range(len(self.en))))

    def _zh_word(self, t: dict[str, Any]) -> str:
        r = self.rng.random()
        return (self.rng.choice(t["zh"]) if r < 0.3 else f"`{self.rng.choice(t['ids'])}`" if r < 0.33
                else f" {self.rng.choice(t['en'])} " if r < 0.36
                else self.rng.choices(self.zh, cum_weights=self.zh_cw)[0])

    def _en_word(self, t: dict[str, Any]) -> str:
        r = self.rng.random()
        return (self.rng.choice(_L1_GLUE) if r < 0.35 else self.rng.choice(t["en"]) if r < 0.5
                else f"`{self.rng.choice(t['ids'])}`" if r < 0.53 else t["product"] if r < 0.55
                else self.rng.choices(self.en, cum_weights=self.en_cw)[0])

    def _sentence(self, t: dict[str, Any], zh_share: float) -> str:
        rng = self.rng
        if rng.random() < zh_share:
            glue = ["的", "了", "在", "和", "是", "将", "可以", "需要", "如果", "通过"]
            words = [self._zh_word(t) + (rng.choice(glue) if rng.random() < 0.35 else "")
                     + ("，" if rng.random() < 0.08 else "") for _ in range(rng.randint(5, 16))]
            return "".join(words).strip("，") + rng.choice("。。。；！")
        s = " ".join(self._en_word(t) for _ in range(rng.randint(8, 24)))
        return s[0].upper() + s[1:] + ". "

    def _block(self, t: dict[str, Any], zh_share: float) -> str:
        rng, r = self.rng, self.rng.random()
        if r < 0.15:  # a code fence
            lang = rng.choice(["yaml", "bash", "json", "properties"])
            lines = []
            for _ in range(rng.randint(3, 14)):
                key = rng.choice(t["ids"]) if rng.random() < 0.6 else rng.choice(self.ids)
                value = rng.choice(["true", "false", str(rng.randint(1, 65535)), f'"{rng.choice(self.en)}"'])
                lines.append({"yaml": f"{'  ' * rng.randint(0, 2)}{key}: {value}", "json": f'  "{key}": {value},',
                              "properties": f"{key}={value}"}.get(
                    lang, f"{t['product'].lower()}ctl {rng.choice(self.en)} --{key.replace('_', '-')}={value}"))
            return f"```{lang}\n" + "\n".join(lines) + "\n```"
        if r < 0.22:  # a parameter table
            head = "| 参数 | 默认值 | 说明 |" if zh_share > 0.5 else "| Name | Default | Description |"
            rows = [head, "|---|---|---|"]
            rows += [f"| {key} | {rng.randint(0, 1000)} | {self._sentence(t, zh_share).strip()} |"
                     for key in rng.sample(t["ids"], min(len(t["ids"]), rng.randint(2, 6)))]
            return "\n".join(rows)
        return "".join(self._sentence(t, zh_share) for _ in range(rng.randint(2, 7))).strip()

    def _heading(self, t: dict[str, Any], zh_share: float) -> str:
        rng = self.rng
        if rng.random() < zh_share:
            return "".join(rng.choice(t["zh"]) if rng.random() < 0.6 else rng.choices(self.zh, self.zh_cw)[0]
                           for _ in range(rng.randint(2, 4)))
        return " ".join(rng.choice(t["en"]) if rng.random() < 0.6 else rng.choices(self.en, self.en_cw)[0]
                        for _ in range(rng.randint(2, 5))).title()

    def document(self, i: int) -> tuple[str, str, str]:
        """(category, file name, Markdown with frontmatter)."""
        rng = self.rng
        t = {"zh": rng.sample(self.zh[:3000], 40), "en": rng.sample(self.en[:2500], 30),
             "ids": rng.sample(self.ids, rng.randint(4, 15)), "product": rng.choice(_L1_PRODUCTS)}
        category = rng.choice(_L1_CATEGORIES)
        zh_share = 0.9 if category.endswith("-zh") else rng.choice([0.9, 0.8, 0.6, 0.3, 0.1])
        title = self._heading(t, zh_share)
        body, size, target = [], 0, int(rng.lognormvariate(math.log(6600), 0.45))
        while size < target:
            body.append(f"{'##' if rng.random() < 0.6 else '###'} {self._heading(t, zh_share)}")
            for _ in range(rng.randint(1, 4)):
                body.append(self._block(t, zh_share))
                size += len(body[-1])
        keywords = [rng.choice(t["zh"]), rng.choice(t["en"]), *rng.sample(t["ids"], 2)]
        summary = self._sentence(t, zh_share).replace("`", "").replace('"', "").strip()
        front = (f'---\ntitle: "{title}"\nsummary: "{summary}"\nkeywords:\n'
                 + "".join(f'  - "{k}"\n' for k in keywords) + "---\n\n")
        return category, f"doc-{i:05d}.md", front + f"# {title}\n\n" + "\n\n".join(body) + "\n"


def l1_chunks(chunks: int, *, seed: int = 20240611) -> list[Any]:
    """Whole documents until there are at least `chunks` chunks, chunked as uploads are (`DocumentService.prepare`:
    the frontmatter chunk, then title- and heading-prefixed sections)."""
    from kb_core.documents.service import DocumentService
    from kb_core.storage.ports import ChunkRow

    class _NoDense:  # prepare() needs only to know that no dense vectors are wanted
        has_dense = False

    service = DocumentService(None, None, _NoDense(), None, max_upload_bytes=1 << 30)  # type: ignore[arg-type]
    writer, rows = _L1Writer(seed), []
    while len(rows) < chunks:
        doc_id = rows[-1].doc_id + 1 if rows else 1
        category, name, text = writer.document(doc_id)
        source = f"knowledge_base/{category}/{name}"
        prepared = service.prepare(text, source=source)
        rows += [ChunkRow(doc_id, source, category, c.chunk_no, c.heading, chunk_text)
                 for c, chunk_text in zip(prepared.chunks, prepared.texts, strict=True)]
    return rows


def l1_queries(rows: Sequence[Any], per_class: int, *, seed: int = 7) -> dict[str, list[str]]:
    """Queries cut from the chunks: short (1-3 words or identifiers), a Chinese sentence (15-30 chars, some as
    a question), an English sentence (10-15 words), long (104-300 chars of a chunk)."""
    import jieba

    rng = random.Random(seed)
    zh_run, en_word = re.compile(r"[\u4e00-\u9fff，]{15,}"), re.compile(r"[A-Za-z][A-Za-z_.\-]*[A-Za-z0-9]")

    def short(text: str) -> str | None:
        pool = [w for w in jieba.cut(text) if re.fullmatch(r"[\u4e00-\u9fff]{2,4}", w)]
        pool += [w.lower() for w in en_word.findall(text) if len(w) > 3] + re.findall(r"`([^`\s]+)`", text) * 3
        return " ".join(rng.sample(pool, min(len(pool), rng.randint(1, 3)))) if pool else None

    def zh_sentence(text: str) -> str | None:
        n = rng.randint(15, 30)
        runs = [m.group(0).strip("，") for m in zh_run.finditer(text)]
        runs = [r for r in runs if len(r) >= n]
        if not runs:
            return None
        run = rng.choice(runs)
        start = rng.randint(0, len(run) - n)
        q = run[start:start + n]
        return rng.choice(["如何", "为什么", "怎么"]) + q[:max(13, n - 4)] + "？" if rng.random() < 0.4 else q

    def en_sentence(text: str) -> str | None:
        words, n = en_word.findall(text.replace("`", "")), rng.randint(10, 15)
        if len(words) < 15:
            return None
        start = rng.randint(0, len(words) - n)
        ws = words[start:start + n]
        return " ".join(rng.choice([["How", "do", "I"], ["Why", "does"], ["What", "is"]]) + ws[:n - 3]
                        if rng.random() < 0.4 else ws)

    def long(text: str) -> str | None:
        text = text.replace("`", "").replace("|", " ").replace("#", "").strip()
        if len(text) < 120:
            return None
        n = rng.randint(104, 300)
        start = rng.randint(0, max(0, len(text) - n))
        return text[start:start + n].strip()

    out: dict[str, list[str]] = {}
    for name, cut in zip(L1_CLASSES, [short, zh_sentence, en_sentence, long], strict=True):
        out[name] = []
        while len(out[name]) < per_class:
            if (q := cut(rng.choice(rows).text)) is not None:
                out[name].append(q)
    return out


def bench_l1(workdir: Path, *, chunks: int, per_class: int, batch: int = 500) -> dict[str, Any]:
    """The same chunks in Milvus Lite with its own BM25 and in Milvus Lite + SQLite FTS5 (the embedded default,
    writes go to both), each in its own directory; `VectorSearcher.search(q, top_k=3)` without a model
    (BM25 only), engines alternating per query after a warm-up."""
    from kb_core import terms
    from kb_core.retrieval.l1_search import VectorSearcher
    from kb_core.storage.fulltext_sqlite import SqliteFullTextIndex
    from kb_core.storage.vector_store import MilvusVectorStore, collection_name

    started = time.perf_counter()
    terms.warm_up()
    rows = l1_chunks(chunks)
    generated_s = time.perf_counter() - started
    engines = {"milvus_bm25": None, "fts5": workdir / "l1-fts5" / "fulltext.sqlite3"}
    stores: dict[str, Any] = {}
    build_s: dict[str, float] = {}
    try:
        for name, fts_path in engines.items():
            (workdir / f"l1-{name}").mkdir(parents=True, exist_ok=True)
            store = stores[name] = MilvusVectorStore(
                str(workdir / f"l1-{name}" / "milvus.db"), collection=collection_name(None, None), dense_dim=None,
                timeout=120.0, fulltext=SqliteFullTextIndex(fts_path) if fts_path else None)
            store.warm_up()
            began = time.perf_counter()
            for i in range(0, len(rows), batch):
                store.upsert(rows[i:i + batch])  # each call flushes
            build_s[name] = round(time.perf_counter() - began, 2)
            assert store.count_chunks() == len(rows), f"{name}: {store.count_chunks()} chunks, not {len(rows)}"
        assert [s.fulltext_engine for s in stores.values()] == ["Milvus BM25", "SQLite FTS5"]
        searchers = {name: VectorSearcher(store, None) for name, store in stores.items()}
        queries = l1_queries(rows, per_class)
        for q in itertools.chain.from_iterable(l1_queries(rows, 5, seed=99).values()):  # warm-up
            for searcher in searchers.values():
                searcher.search(q, top_k=3)
        samples = {(name, cls): [] for name in searchers for cls in L1_CLASSES}
        found = {(name, cls): 0 for name in searchers for cls in L1_CLASSES}
        gc.collect()
        turn = 0
        for cls, qs in queries.items():
            for q in qs:
                for name in (list(searchers) if turn % 2 == 0 else list(searchers)[::-1]):
                    began_ns = time.perf_counter_ns()
                    hits = searchers[name].search(q, top_k=3)
                    samples[(name, cls)].append((time.perf_counter_ns() - began_ns) / 1e6)
                    found[(name, cls)] += bool(hits)
                turn += 1
    finally:
        for store in stores.values():
            store.close()

    def row(cls_samples: dict[str, list[float]], cls_found: dict[str, int]) -> dict[str, Any]:
        out: dict[str, Any] = {name: {**_stats(s), "found": round(cls_found[name] / len(s), 3)}
                               for name, s in cls_samples.items()}
        out["speedup_p99"] = round(out["milvus_bm25"]["p99_ms"] / out["fts5"]["p99_ms"], 1)
        return out

    classes = {cls: row({n: samples[(n, cls)] for n in searchers}, {n: found[(n, cls)] for n in searchers})
               for cls in L1_CLASSES}
    every = row({n: sum((samples[(n, c)] for c in L1_CLASSES), []) for n in searchers},
                {n: sum(found[(n, c)] for c in L1_CLASSES) for n in searchers})
    return {"chunks": len(rows), "documents": rows[-1].doc_id,
            "avg_chunk_chars": round(statistics.mean(len(r.text) for r in rows)),
            "queries_per_class": per_class, "generate_s": round(generated_s, 2), "build_s": build_s,
            "classes": classes, "all": every, "goal_p99_ms": L1_GOAL_P99_MS,
            "seconds": round(time.perf_counter() - started, 1)}


# -- report -------------------------------------------------------------------------------------------------
def machine() -> dict[str, Any]:
    info = {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count()}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
        info["memory_gb"] = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (OSError, ValueError):
        pass
    try:
        import torch

        info["torch"] = torch.__version__
        info["torch_threads"] = torch.get_num_threads()
    except ImportError:
        pass
    return info


def render(report: dict[str, Any]) -> str:
    lines = [f"machine: {report['machine'].get('cpu', '?')}, {report['machine']['cpus']} cores, "
             f"{report['machine'].get('memory_gb', '?')} GiB, Python {report['machine']['python']}", ""]
    if report.get("l0"):
        lines += [f"L0 keyword index (rule: {report['l0'][0].get('matching', 'words')}; match = the ranked first hit, "
                  "its ties and the total, what a lookup needs)",
                  "| documents | keywords | load (median of 3) | memory | per 1,000 docs | match p50 / p99 | "
                  "exact_match p50 / p99 | naive, same rule p50 / p99 | speed-up p50 / p99 | I3 loop p50 / p99 | "
                  "speed-up vs I3 p50 / p99 |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in report["l0"]:
            lines.append(
                f"| {r['documents']:,} | {r['keywords']:,} | {r['load_s_median']:.2f} s | {r['memory_mb']:.1f} MB | "
                f"{r['memory_mb_per_1000_docs']:.2f} MB | {r['match']['p50_ms']:.3f} / {r['match']['p99_ms']:.3f} ms | "
                f"{r['exact_match']['p50_ms']:.3f} / "
                f"{r['exact_match']['p99_ms']:.3f} ms | {r['naive']['p50_ms']:.2f} / {r['naive']['p99_ms']:.2f} ms | "
                f"{r['speedup_p50']:.0f}x / {r['speedup_p99']:.0f}x | "
                f"{r['i3']['p50_ms']:.2f} / {r['i3']['p99_ms']:.2f} ms | "
                f"{r['speedup_vs_i3_p50']:.0f}x / {r['speedup_vs_i3_p99']:.0f}x |")
        opened = [r for r in report["l0"] if r.get("open_knowledge_base_s") is not None]
        if opened:
            lines.append(f"open_knowledge_base() over {opened[-1]['documents']:,} documents (Spec 6.3): "
                         f"{opened[-1]['open_knowledge_base_s']:.2f} s")
        last = report["l0"][-1]
        lines += ["", f"L0 query classes at {last['documents']:,} documents",
                  "| class | hits/query | match p50 / p99 | exact_match p50 / p99 | naive, same rule p50 / p99 | "
                  "I3 loop p50 / p99 |",
                  "|---|---|---|---|---|---|"]
        for name, c in last["classes"].items():
            lines.append(f"| {name} | {c['hits_per_query']} | "
                         f"{c['match']['p50_ms']:.3f} / {c['match']['p99_ms']:.3f} ms"
                         f" | {c['l0']['p50_ms']:.3f} / {c['l0']['p99_ms']:.3f} ms | "
                         f"{c['naive']['p50_ms']:.2f} / {c['naive']['p99_ms']:.2f} ms | "
                         f"{c['i3']['p50_ms']:.2f} / {c['i3']['p99_ms']:.2f} ms |")
        added = last.get("after_add")
        if added:
            lines.append(f"add() {added['add']['p50_ms']:.1f} ms (p50); the match right after it "
                         f"{added['first_match']['p50_ms']:.3f} / {added['first_match']['p99_ms']:.3f} ms (p50 / p99),"
                         f" the next one {added['next_match']['p50_ms']:.3f} / {added['next_match']['p99_ms']:.3f} ms")
    if report.get("lookups"):
        lines += ["", "lookup() end to end (ms, p50 / p99)",
                  "| model / encoder | L0-unique | (exact_match) | L0-multi | L0-miss | query-cache hit |",
                  "|---|---|---|---|---|---|"]
        for label, r in report["lookups"].items():
            hit = r.get("query_cache_hit")
            lines.append(
                f"| {label} | {r['L0-unique']['p50_ms']:.2f} / {r['L0-unique']['p99_ms']:.2f} | "
                f"{r['L0-unique']['exact_match']['p50_ms']:.3f} / {r['L0-unique']['exact_match']['p99_ms']:.3f} | "
                f"{r['L0-multi']['p50_ms']:.1f} / {r['L0-multi']['p99_ms']:.1f} | "
                f"{r['L0-miss']['p50_ms']:.1f} / {r['L0-miss']['p99_ms']:.1f} | "
                + (f"{hit['p50_ms']:.3f} / {hit['p99_ms']:.3f}" if hit else "—") + " |")
        calls = [f"{label.split(',')[-1].strip()}: {r['L0-unique']['model_calls']}"
                 for label, r in report["lookups"].items()]
        lines.append("model calls during L0-unique lookups: " + ", ".join(calls))
    if report.get("l1"):
        r = report["l1"]
        lines += ["", f"L1 full text (VectorSearcher.search, top_k=3, no model) at {r['chunks']:,} chunks "
                  f"({r['documents']:,} documents, avg {r['avg_chunk_chars']} chars), {r['queries_per_class']} "
                  "queries per class, engines alternating",
                  "| class | Milvus BM25 p50 / p99 | FTS5 p50 / p99 | speed-up p99 | found (Milvus / FTS5) |",
                  "|---|---|---|---|---|"]
        for name, c in [*r["classes"].items(), ("all", r["all"])]:
            m, f = c["milvus_bm25"], c["fts5"]
            lines.append(f"| {name} | {m['p50_ms']:.1f} / {m['p99_ms']:.1f} ms | "
                         f"{f['p50_ms']:.1f} / {f['p99_ms']:.1f} ms | {c['speedup_p99']:.1f}x | "
                         f"{m['found']:.0%} / {f['found']:.0%} |")
        p99 = r["all"]["fts5"]["p99_ms"]
        lines.append(f"build (500-row upserts, each flushes): Milvus BM25 {r['build_s']['milvus_bm25']:.1f} s, "
                     f"Milvus + FTS5 {r['build_s']['fts5']:.1f} s; corpus generated in {r['generate_s']:.1f} s; "
                     f"section {r['seconds']:.0f} s")
        lines.append(f"goal: L1 p99 <= {r['goal_p99_ms']:.0f} ms at 20,000 chunks on the embedded default (FTS5): "
                     + ("n/a below 20,000 chunks" if r["chunks"] < 20000 else
                        f"{'met' if p99 <= r['goal_p99_ms'] else 'NOT met'} ({p99:.1f} ms)"))
    if report.get("ingest"):
        r = report["ingest"]
        lines += ["", "Ingest with the BGE-M3-shaped model",
                  "| chunks | FlagEmbedding defaults | kb_core encoder | speed-up | min cosine | uploads |",
                  "|---|---|---|---|---|---|",
                  f"| {r['chunks']} (avg {r['avg_chars']} chars) | "
                  f"{r['flagembedding_defaults_chunks_per_s']:.2f} chunks/s | "
                  f"{r['kb_core_chunks_per_s']:.2f} chunks/s | "
                  f"{r['speedup']:.1f}x | {r['min_cosine_vs_flagembedding']} | "
                  f"{r['upload_docs_per_s']:.3f} docs/s, {r['upload_chunks_per_s']:.2f} chunks/s |"]
    if report.get("pages"):
        from kb_core.bench_pages import render_pages

        lines += render_pages(report["pages"])
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kb_core.bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000], help="L0 corpus sizes")
    parser.add_argument("--repeat", type=int, default=20, help="repetitions of the L0 query mix")
    parser.add_argument("--l1-docs", type=int, default=300, help="documents in the L1 collection")
    parser.add_argument("--l1-queries", type=int, default=30, help="queries per lookup class")
    parser.add_argument("--bge-m3-shaped", type=Path, default=Path.home() / ".cache/kb-console/bge-m3-shaped",
                        help="where the BGE-M3-shaped model is (built there on first use, ~2.3 GB)")
    parser.add_argument("--no-bge", action="store_true", help="skip everything that needs the BGE-M3-shaped model")
    parser.add_argument("--ingest-chunks", type=int, default=24)
    parser.add_argument("--ingest-docs", type=int, default=3)
    parser.add_argument("--l1-chunks", type=int, default=20000, help="chunks in the L1 full-text comparison")
    parser.add_argument("--l1-class-queries", type=int, default=200,
                        help="queries per class in the L1 full-text comparison")
    parser.add_argument("--page-docs", type=int, default=10000, help="documents for the page-render timings")
    parser.add_argument("--page-runs", type=int, default=5, help="reruns per page (the median is reported)")
    parser.add_argument("--skip", nargs="*", default=[], choices=["l0", "lookups", "l1", "ingest", "pages"])
    parser.add_argument("--json", type=Path, default=Path("bench-results.json"))
    parser.add_argument("--quick", action="store_true", help="a smoke run: N=50, few repetitions, no BGE model")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.quick:
        args.sizes, args.repeat, args.l1_docs, args.l1_queries, args.no_bge = [50], 2, 20, 5, True
        args.l1_chunks, args.l1_class_queries = 400, 10
        args.page_docs, args.page_runs = 50, 2

    from kb_core.settings import load_settings

    configured = load_settings().embedding_model
    bge: Path | None = None
    if not args.no_bge and ("lookups" not in args.skip or "ingest" not in args.skip):
        from model_factory import build_bge_m3_shaped

        print(f"BGE-M3-shaped model: {args.bge_m3_shaped} (building it if missing) ...", file=sys.stderr)
        bge = build_bge_m3_shaped(args.bge_m3_shaped)
    report: dict[str, Any] = {"machine": machine(), "command": " ".join(["python -m kb_core.bench", *(argv or
                              sys.argv[1:])])}
    workdir = Path(tempfile.mkdtemp(prefix="kb-bench-"))
    try:
        if "l0" not in args.skip:
            report["l0"] = []
            for n in args.sizes:
                print(f"L0 at {n:,} documents ...", file=sys.stderr)
                report["l0"].append(bench_l0(n, workdir, repeat=args.repeat))
                args.json.write_text(json.dumps(report, ensure_ascii=False, indent=2), encoding="utf-8")
        if "lookups" not in args.skip:
            print("lookups ...", file=sys.stderr)
            variants = ["configured"] + ([] if bge is None else ["flagembedding-fp32", "kb-fp32", "kb-auto"])
            report["lookups"] = bench_lookups(workdir, docs=args.l1_docs, queries=args.l1_queries, bge_path=bge,
                                              configured_model=configured, variants=variants)
            args.json.write_text(json.dumps(report, ensure_ascii=False, indent=2), encoding="utf-8")
        if "l1" not in args.skip:
            print(f"L1 full text at {args.l1_chunks:,} chunks: Milvus BM25 vs FTS5 ...", file=sys.stderr)
            report["l1"] = bench_l1(workdir, chunks=args.l1_chunks, per_class=args.l1_class_queries)
            args.json.write_text(json.dumps(report, ensure_ascii=False, indent=2), encoding="utf-8")
        if "ingest" not in args.skip and bge is not None:
            print("ingest ...", file=sys.stderr)
            report["ingest"] = bench_ingest(workdir, bge_path=bge, chunks=args.ingest_chunks, docs=args.ingest_docs)
        if "pages" not in args.skip:
            from kb_core.bench_pages import bench_pages

            print(f"page renders at {args.page_docs:,} documents ...", file=sys.stderr)
            report["pages"] = bench_pages(workdir, docs=args.page_docs, runs=args.page_runs)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    args.json.write_text(json.dumps(report, ensure_ascii=False, indent=2), encoding="utf-8")
    print(render(report))
    print(f"\n(JSON: {args.json})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
