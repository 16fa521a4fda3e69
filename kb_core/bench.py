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

The L1 collection for the lookup runs holds the generated documents' chunks with random unit vectors:
those runs measure latency (query encoding + BM25 + dense search + fusion), not retrieval quality.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import math
import os
import platform
import random
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

from kb_core.retrieval.keyword_index import KnowledgeIndex
from kb_core.stats import percentile
from kb_core.testing.naive_l0 import NaiveIndex

log = logging.getLogger("kb_core.bench")

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
        for q in queries:
            assert index.exact_match(q) == naive.exact_match(q), f"L0 and the naive reference disagree on {q!r}"
    classes: dict[str, Any] = {}
    all_fast: list[float] = []
    all_match: list[float] = []
    all_naive: list[float] = []
    all_i3: list[float] = []
    for name, queries in mix.items():
        fast = _time_calls(index.exact_match, queries, repeat)
        ranked = _time_calls(_ranked_head, [(index, q) for q in queries], repeat)
        slow = _time_calls(naive.exact_match, queries, max(1, repeat // 5))
        i3 = _time_calls(i3_loop.exact_match, queries, max(1, repeat // 5))
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
    return (len(matches), matches[0], matches.tied_with_first()) if len(matches) else None


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
    parser.add_argument("--skip", nargs="*", default=[], choices=["l0", "lookups", "ingest"])
    parser.add_argument("--json", type=Path, default=Path("bench-results.json"))
    parser.add_argument("--quick", action="store_true", help="a smoke run: N=50, few repetitions, no BGE model")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.quick:
        args.sizes, args.repeat, args.l1_docs, args.l1_queries, args.no_bge = [50], 2, 20, 5, True

    from kb_core.settings import load_settings

    configured = load_settings().embedding_model
    bge: Path | None = None
    if not args.no_bge and ("lookups" not in args.skip or "ingest" not in args.skip):
        from kb_core.testing.model_factory import build_bge_m3_shaped

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
        if "ingest" not in args.skip and bge is not None:
            print("ingest ...", file=sys.stderr)
            report["ingest"] = bench_ingest(workdir, bge_path=bge, chunks=args.ingest_chunks, docs=args.ingest_docs)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    args.json.write_text(json.dumps(report, ensure_ascii=False, indent=2), encoding="utf-8")
    print(render(report))
    print(f"\n(JSON: {args.json})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
