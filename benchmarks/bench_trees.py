"""Benchmark: documentation trees and translation groups.

    python -m benchmarks.bench_trees [--files 1000] [--docs 10000] [--json bench-trees.json]   (a few minutes)
    kb bench --skip l0 lookups l1 ingest pages zh --no-bge   # the same, as the `trees` section of `kb bench`

Two measurements, printed as tables and written as JSON (`{"machine", "command", "trees": {...}}`):

- **Reconcile of a tree.** A generated documentation tree in our own words, shaped like a Docusaurus site:
  `<product>/docs/{en,zh}/latest/[<section>/[<sub>/]]<page>.md`, 4-6 folders deep, half the pages in both
  languages (the translations share the path but for the language folder), generic keywords (the product's
  name, "Plugin") on about half the pages, short keywords, heading anchors (`## Attributes {#attributes}`),
  licence comments, MDX `import` lines, a few pages of 20-80 KB; plus files the path rule refuses (a file at
  the root, a folder with a space, a folder Windows reserves). A knowledge base without an embedding model
  (L1 on BM25 only) is opened on it and `kb.documents.reconcile()` of the whole tree is timed: wall time, documents/s,
  and memory: this process's RSS (Milvus Lite and SQLite run inside it) sampled every 20 ms from /proc during
  the reconcile, the peak minus the RSS just before (where there is no /proc: the growth of
  `resource.getrusage` ru_maxrss). Then a second reconcile with nothing changed (content hashes compared,
  nothing indexed).
- **L0 with translation groups at N documents.** A `KnowledgeIndex` over a generated tree of N documents (half
  the pages with an en and a zh version) loaded through its public `load()`, and a second index holding the
  same entries with `group=""` (groups switched off). Per query class (a page's only keyword, a keyword the
  two versions of a page share, the same in a Chinese sentence, generic keywords, misses, 500-character
  queries), side by side, the two indexes alternating: **L0**, what a lookup asks of L0 (`match()`, the first
  hit, its ties, `group_count()`, `versions()` of the first hit), and **lookup**, `HybridLookup.lookup` with
  an L1 that finds nothing (it also reads and cleans the served file). p50/p99 and the p99 ratio groups on /
  off. Budget: L0 p99 <= 0.5 ms with groups at 10,000 documents. The share of `high` answers per class shows
  what the groups change (a keyword claimed only by a page's two versions answers `high`).
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import random
import resource
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.common import bench_settings, machine, percentile_of, publish, stats, time_calls
from kb_core import HybridLookup, KnowledgeIndex, L1Hit, open_knowledge_base

log = logging.getLogger("benchmarks.bench_trees")

BUDGET_L0_P99_MS = 0.5  # our budget: L0 p99 with translation groups at 10,000 documents

# -- the generated tree -------------------------------------------------------------------------------------
_PRODUCTS = (("lumen", "Lumen Gateway"), ("kestrel", "Kestrel Mesh"), ("aster", "Aster Registry"),
             ("tallow", "Tallow Stream"))
# section -> its sub-sections (a page lies in the section, in one of its sub-sections, or right under latest/)
_SECTIONS = {"plugins": ("traffic", "auth", "observability", "transform", "security"), "getting-started": (),
             "deployment": ("kubernetes", "bare-metal", "docker"), "admin-api": ("routes", "upstreams", "consumers"),
             "tutorials": ("migration",), "terminology": (), "FAQ": ()}
_STEMS = ("limit-req", "limit-conn", "limit-count", "key-auth", "jwt-auth", "basic-auth", "proxy-cache",
          "request-id", "ip-restriction", "cors", "traffic-split", "response-rewrite", "proxy-rewrite", "prometheus",
          "zipkin", "health-check", "route", "upstream", "consumer", "service-discovery", "canary", "dns-resolver",
          "batch-requests", "mocking", "fault-injection", "body-transformer", "grpc-transcode", "real-ip",
          "redirect", "gzip", "echo", "server-info", "node-status", "log-rotate", "http-logger", "kafka-logger",
          "ua-restriction", "referer-restriction", "consumer-restriction", "csrf", "hmac-auth", "ldap-auth")
_ATTRS = ("rate", "burst", "key", "rejected_code", "rejected_msg", "nodelay", "allow_degradation", "time_window",
          "count", "policy", "header", "timeout", "retries", "pass_host", "scheme", "cache_zone", "cache_ttl",
          "include_in_response", "algorithm", "whitelist", "blacklist", "uri", "regex_uri", "status_code")
_EN_TERMS = ("rate limiting", "authentication", "load balancing", "health check", "service discovery",
             "canary release", "access log", "request tracing", "circuit breaking", "retry policy",
             "certificate rotation", "hot reload", "admin token", "upstream timeout", "consumer group",
             "response caching", "header rewrite", "traffic mirroring", "config center", "metrics export")
_ZH_TERMS = ("限流", "认证", "负载均衡", "健康检查", "服务发现", "灰度发布", "访问日志", "链路追踪", "熔断",
             "重试策略", "证书轮换", "热加载", "管理令牌", "上游超时", "消费者组", "响应缓存", "请求头改写",
             "流量镜像", "配置中心", "指标导出")
_SHORT = ("AI", "CLI", "ACL", "TLS", "mTLS", "2.0")
_EN_SENTENCES = (
    "The {name} plugin reads its settings from the route it is bound to and applies them before the request "
    "reaches the upstream.",
    "Set `{attr}` to change how {term} behaves; the default keeps the behaviour of earlier releases.",
    "When {term} is enabled, every node of the cluster shares the same counters through the config center.",
    "Requests over the limit get status {code} and an empty body unless `rejected_msg` is set.",
    "You can bind {name} to a route, a service or a consumer; the narrowest scope wins.",
    "Changes to `{attr}` take effect on the next request without a restart.")
_ZH_SENTENCES = (
    "{name} 插件从绑定的路由读取配置，并在请求到达上游之前生效。",
    "修改 `{attr}` 可以调整{term}的行为，默认值与旧版本保持一致。",
    "启用{term}后，集群中的每个节点通过配置中心共享同一份计数。",
    "超过限制的请求会收到 {code} 状态码，除非设置了 `rejected_msg`。",
    "{name} 可以绑定在路由、服务或消费者上，范围最小的配置优先生效。",
    "对 `{attr}` 的修改会在下一个请求生效，无需重启。")
_HEADINGS = {  # (anchor, English heading, Chinese heading)
    "description": ("Description", "描述"), "attributes": ("Attributes", "属性"),
    "enable-plugin": ("Enable the Plugin", "启用插件"), "example-usage": ("Example usage", "使用示例"),
    "delete-plugin": ("Delete the Plugin", "删除插件")}
_LICENCE = ("<!--\n#\n# This page belongs to the {product} documentation. It is distributed under the Apache\n"
            "# License, Version 2.0; you may use it only in compliance with that licence, a copy of which is at\n"
            "# http://www.apache.org/licenses/LICENSE-2.0\n#\n-->\n\n")
_MDX = "import Tabs from '@theme/Tabs';\nimport TabItem from '@theme/TabItem';\n\n"
# files the path rule refuses (relative to the knowledge base): a file at the root, a folder with a space,
# a folder name Windows reserves
_REFUSED = ("README.md", "lumen/docs/en/latest/my notes/draft.md", "kestrel/docs/zh/latest/con/reserved.md")


@dataclass
class Page:
    """One page of the tree: one or two language versions sharing their keywords but for one term."""

    keyword: str  # the page's own keyword (a plugin name and a number): claimed by its versions only
    langs: tuple[str, ...]  # ("en", "zh"), ("en",) or ("zh",)
    paths: tuple[str, ...]  # relative to the knowledge base, one per language


@dataclass
class Tree:
    root: Path
    pages: list[Page] = field(default_factory=list)
    refused: tuple[str, ...] = ()
    bytes: int = 0
    big_pages: int = 0  # 20-80 KB
    depths: dict[int, int] = field(default_factory=dict)  # category depth -> documents

    @property
    def documents(self) -> int:
        return sum(len(p.langs) for p in self.pages)


def _body(rng: random.Random, lang: str, product: str, name: str, terms: Sequence[str], target: int) -> str:
    zh = lang == "zh"
    sentences = _ZH_SENTENCES if zh else _EN_SENTENCES

    def paragraph(count: int) -> str:
        return " ".join(rng.choice(sentences).format(name=name, attr=rng.choice(_ATTRS), term=rng.choice(terms),
                                                     code=rng.choice((429, 403, 503))) for _ in range(count))

    parts = [_LICENCE.format(product=product)]
    if rng.random() < 0.4:
        parts.append(_MDX)
    size = 0
    example = 0
    while size < target:
        for anchor, (en, zh_heading) in _HEADINGS.items():
            if anchor == "example-usage" and example:
                block = f"### {'示例' if zh else 'Example'} {example} {{#example-{example}}}\n\n"
            else:
                block = f"## {zh_heading if zh else en} {{#{anchor}}}\n\n"
            if anchor == "attributes":
                rows = [f"| {attr} | integer | False | {rng.randint(0, 500)} | {paragraph(1)} |"
                        for attr in rng.sample(_ATTRS, rng.randint(3, 8))]
                block += ("| 名称 | 类型 | 必选项 | 默认值 | 描述 |\n" if zh else
                          "| Name | Type | Required | Default | Description |\n") + "|---|---|---|---|---|\n"
                block += "\n".join(rows) + "\n\n"
            elif anchor in ("enable-plugin", "delete-plugin"):
                block += (f"{paragraph(2)}\n\n```shell\ncurl http://127.0.0.1:9180/{product.split()[0].lower()}"
                          f"/admin/routes/{rng.randint(1, 99)} -X PUT -d '{{\"uri\": \"/get\", \"plugins\": "
                          f"{{\"{name}\": {{\"{rng.choice(_ATTRS)}\": {rng.randint(1, 9)}}}}}}}'\n```\n\n")
            else:
                block += f"{paragraph(rng.randint(3, 6))}\n\n{paragraph(rng.randint(2, 5))}\n\n"
            parts.append(block)
            size += len(block.encode())
            if size >= target:
                break
        example += 1
    return "".join(parts)


def generate_tree(root: Path, documents: int, *, seed: int = 20, min_kb: int = 2, max_kb: int = 8,
                  big_share: float = 0.04, refused: bool = True) -> Tree:
    """`documents` Markdown documents under root/knowledge_base/ (plus the refused files when `refused`)."""
    rng = random.Random(seed)
    tree = Tree(root=root)
    base = root / "knowledge_base"
    made = 0
    while made < documents:
        i = len(tree.pages)
        folder, product = rng.choice(_PRODUCTS)
        section = rng.choice(list(_SECTIONS))
        subs = _SECTIONS[section]
        shape = rng.random()
        where = [] if shape < 0.2 else [section] if shape < 0.7 or not subs else [section, rng.choice(subs)]
        stem = rng.choice(_STEMS)
        keyword = f"{stem}-{i}"
        if documents - made >= 2 and rng.random() < 0.5:
            langs: tuple[str, ...] = ("en", "zh")
        else:
            langs = ("en",) if rng.random() < 0.8 else ("zh",)
        shared = [keyword]
        if rng.random() < 0.5:  # generic keywords on half the pages
            shared.append(product)
            if section == "plugins" or rng.random() < 0.3:
                shared.append("Plugin")
        if rng.random() < 0.06:
            shared.append(rng.choice(_SHORT))
        term = rng.randrange(len(_EN_TERMS))
        big = rng.random() < big_share
        target = rng.randint(20 * 1024, 80 * 1024) if big else rng.randint(min_kb * 1024, max_kb * 1024)
        paths = []
        for lang in langs:
            relative = "/".join([folder, "docs", lang, "latest", *where, f"{stem}-{i}.md"])
            zh = lang == "zh"
            keywords = [*shared, _ZH_TERMS[term] if zh else _EN_TERMS[term]]
            summary = (f"{stem} 插件的配置与使用方法。" if zh else f"How to configure and use the {stem} plugin.")
            text = (f"---\ntitle: {stem}\nkeywords:\n" + "".join(f"  - {k}\n" for k in keywords)
                    + f"description: {summary}\n---\n\n"
                    + _body(rng, lang, product, stem, _ZH_TERMS if zh else _EN_TERMS, target))
            path = base / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            data = text.encode("utf-8")
            path.write_bytes(data)
            tree.bytes += len(data)
            tree.big_pages += big
            depth = relative.count("/")
            tree.depths[depth] = tree.depths.get(depth, 0) + 1
            paths.append(relative)
        tree.pages.append(Page(keyword, langs, tuple(paths)))
        made += len(langs)
    if refused:
        for relative in _REFUSED:
            path = base / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("---\ntitle: refused\nkeywords: [refused-by-the-path-rule]\n---\n\nNot a document.\n",
                            encoding="utf-8")
        tree.refused = _REFUSED
    return tree


# -- memory ---------------------------------------------------------------------------------------------
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _rss() -> int | None:
    """This process's resident set size in bytes, from /proc (None where there is no /proc)."""
    try:
        return int(Path("/proc/self/statm").read_text().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return None


class RssSampler:
    """Peak RSS of this process (Milvus Lite runs inside it), sampled every 20 ms from /proc."""

    def __init__(self, interval: float = 0.02):
        self._interval = interval
        self.before = _rss() or 0
        self.peak = self.before
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.peak = max(self.peak, _rss() or 0)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss() or 0)


def _mb(value: float) -> float:
    return round(value / 2**20, 1)


# -- 1. reconcile of a tree ---------------------------------------------------------------------------------
def bench_reconcile(workdir: Path, *, files: int) -> dict[str, Any]:
    root = workdir / f"tree-{files}"
    started = time.perf_counter()
    tree = generate_tree(root, max(1, files - len(_REFUSED)), seed=20, refused=True)
    generate_s = time.perf_counter() - started
    kb = open_knowledge_base(bench_settings(root), load_model=False)
    try:
        gc.collect()
        on_proc = _rss() is not None
        maxrss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        with RssSampler() as memory:
            started = time.perf_counter()
            report = kb.documents.reconcile()
            reconcile_s = time.perf_counter() - started
        if not on_proc:  # no /proc: the growth of the peak (ru_maxrss: KiB on Linux, bytes on macOS)
            unit = 1 if sys.platform == "darwin" else 1024
            memory.peak = memory.before + (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - maxrss_before) * unit
        started = time.perf_counter()
        again = kb.documents.reconcile()
        again_s = time.perf_counter() - started
        counts = kb.status(max_age=0).counts
    finally:
        kb.close()
    if report.failed or again.failed:
        raise RuntimeError(f"reconcile failed on {(report.failed + again.failed)[:3]}")
    if len(report.added) != tree.documents or len(again.unchanged) != tree.documents or again.changed:
        raise RuntimeError(f"reconcile indexed {len(report.added)} of {tree.documents} documents; the second run "
                           f"found {len(again.unchanged)} unchanged ({again.summary()})")
    return {
        "files": tree.documents + len(tree.refused),
        "documents": tree.documents,
        "pages": len(tree.pages),
        "translated_pages": sum(len(p.langs) == 2 for p in tree.pages),
        "refused": len(report.refused),
        "refused_why": sorted({why.split(" (")[0].split(":")[0] for _, why in report.refused}),
        "depths": {str(d): n for d, n in sorted(tree.depths.items())},
        "mb": _mb(tree.bytes),
        "big_pages": tree.big_pages,
        "generate_s": round(generate_s, 1),
        "reconcile_s": round(reconcile_s, 2),
        "documents_per_s": round(tree.documents / reconcile_s, 1),
        "rss_before_mb": _mb(memory.before),
        "peak_rss_mb": _mb(memory.peak),
        "rss_growth_mb": _mb(memory.peak - memory.before),
        "memory_measure": ("this process's RSS (Milvus Lite and SQLite run inside it), sampled every 20 ms from "
                           "/proc/self/statm during the reconcile: the peak minus the RSS just before"
                           if on_proc else "resource.getrusage(RUSAGE_SELF).ru_maxrss: the growth of the peak"),
        "second_reconcile_s": round(again_s, 2),
        "second_unchanged": len(again.unchanged),
        "l0_equals_database": counts.consistent and counts.l0_not_in_database == 0,
    }


# -- 2. L0 with translation groups --------------------------------------------------------------------------
class NoL1:
    """An L1 that finds nothing: the lookup's cost is L0's and the file read's."""

    def search(self, query: str, top_k: int = 3, category: str | None = None) -> list[L1Hit]:
        return []


_FILLER = ("我们的网关在高峰期间偶尔出现请求被拒绝的情况，日志里有很多 429 状态码，需要确认配置是否合理。"
           "The gateway sometimes rejects requests at peak hours and the logs are full of 429 responses; we want "
           "to know whether the configuration is right and what to change. ")


def tree_queries(tree: Tree, count: int, *, seed: int = 11) -> dict[str, list[str]]:
    """The fixed query mix: a single page's keyword, a keyword the two versions of a page share (bare and in a
    Chinese sentence), generic keywords, misses and 500-character queries."""
    rng = random.Random(seed)
    singles = [p.keyword for p in tree.pages if len(p.langs) == 1]
    twins = [p.keyword for p in tree.pages if len(p.langs) == 2]
    products = [name for _, name in _PRODUCTS]
    return {
        "exact (one version)": [rng.choice(singles) for _ in range(count)],
        "twin (en + zh)": [rng.choice(twins) for _ in range(count)],
        "twin, Chinese sentence": [f"{rng.choice(twins)} 插件的参数应该怎么配置？" for _ in range(count)],
        "generic": [rng.choice(["Plugin", "plugin", rng.choice(products), f"How do I write a Plugin for "
                                f"{rng.choice(products)}?", f"{rng.choice(products)} 的 Plugin 怎么配置"])
                    for _ in range(count)],
        "miss": [rng.choice([f"完全无关的问题 {rng.randint(0, 10**9)} qwxz",
                             f"why does the nightly export stop at {rng.randint(0, 10**9)}"]) for _ in range(count)],
        "500 chars": [(_FILLER * 3)[:480] + f" {rng.choice(twins)}" for _ in range(count)],
    }


def l0_path(index: KnowledgeIndex) -> Callable[[str], Any]:
    """What a lookup asks of L0: the ranked matches, the first hit, its ties, the pages and the first's versions."""
    def run(query: str) -> Any:
        matches = index.match(query)
        if not len(matches):
            return None
        first = matches[0]
        return matches.tied_count(), matches.group_count(), index.versions(first.entry.file_path)
    return run


def bench_groups(workdir: Path, *, docs: int, queries: int = 100, repeat: int = 20,
                 lookup_repeat: int = 5) -> dict[str, Any]:
    root = workdir / f"groups-{docs}"
    tree = generate_tree(root, docs, seed=40, min_kb=1, max_kb=3, big_share=0.0, refused=False)
    grouped = KnowledgeIndex("knowledge_base", app_root=root)
    started = time.perf_counter()
    grouped.load()
    load_s = time.perf_counter() - started
    plain = KnowledgeIndex("knowledge_base", app_root=root)  # the same entries, groups switched off
    with plain.bulk():
        for entry in grouped.entries():
            plain.add(entry.replace(group=""))
    if len(grouped) != tree.documents or len(plain) != tree.documents:
        raise RuntimeError(f"L0 holds {len(grouped)} / {len(plain)} of {tree.documents} documents")
    variants = {"groups": grouped, "no_groups": plain}
    lookups = {name: HybridLookup(index, NoL1()) for name, index in variants.items()}
    mix = tree_queries(tree, queries)

    answers: dict[str, dict[str, dict[str, float]]] = {}
    for cls, qs in mix.items():  # what the groups change, read once outside the timing
        answers[cls] = {}
        for name, lookup in lookups.items():
            results = [lookup.lookup(q) for q in qs]
            high = sum(r.primary is not None and r.primary.confidence == "high" for r in results)
            zh = sum(r.primary is not None and "/docs/zh/" in r.primary.source for r in results)
            answered = sum(r.primary is not None for r in results)
            answers[cls][name] = {"high": round(high / len(qs), 3),
                                  "zh_served": round(zh / answered, 3) if answered else None}

    fast = {name: l0_path(index) for name, index in variants.items()}
    for fn in fast.values():  # warm up
        for qs in mix.values():
            time_calls(fn, qs[:20], 1)
    l0_samples = {name: {cls: [] for cls in mix} for name in variants}
    lookup_samples = {name: {cls: [] for cls in mix} for name in variants}
    for r in range(max(repeat, lookup_repeat)):  # the two indexes alternate, a block each, order flipped
        order = list(variants) if r % 2 == 0 else list(variants)[::-1]
        for name in order:
            for cls, qs in mix.items():
                if r < repeat:
                    l0_samples[name][cls] += time_calls(fast[name], qs, 1)
                if r < lookup_repeat:
                    lookup_samples[name][cls] += time_calls(lookups[name].lookup, qs, 1)

    def side_by_side(samples: dict[str, dict[str, list[float]]], cls: str | None) -> dict[str, Any]:
        picked = {name: samples[name][cls] if cls else [s for v in samples[name].values() for s in v]
                  for name in variants}
        row: dict[str, Any] = {name: stats(values) for name, values in picked.items()}
        row["p50_ratio"] = round(statistics.median(picked["groups"]) / statistics.median(picked["no_groups"]), 2)
        row["p99_ratio"] = round(percentile_of(picked["groups"], 99) / percentile_of(picked["no_groups"], 99), 2)
        return row

    classes = {}
    for cls, qs in mix.items():
        matched = [grouped.match(q) for q in qs]
        classes[cls] = {"hits_per_query": round(statistics.mean(len(m) for m in matched), 1),
                        "pages_per_query": round(statistics.mean(m.group_count() for m in matched), 1),
                        "l0": side_by_side(l0_samples, cls), "lookup": side_by_side(lookup_samples, cls),
                        "answers": answers[cls]}
    every = {"l0": side_by_side(l0_samples, None), "lookup": side_by_side(lookup_samples, None)}
    worst = max(c["l0"]["groups"]["p99_ms"] for c in classes.values())
    return {
        "documents": tree.documents,
        "pages": len(tree.pages),
        "translation_groups": len(grouped.snapshot.group_members),
        "keywords": sum(len(e.keywords) for e in grouped.entries()),
        "load_s": round(load_s, 2),
        "queries_per_class": queries,
        "repeat": repeat,
        "lookup_repeat": lookup_repeat,
        "classes": classes,
        "all": every,
        "budget_p99_ms": BUDGET_L0_P99_MS,
        "worst_class_p99_ms": worst,
        "budget_met": worst <= BUDGET_L0_P99_MS and every["l0"]["groups"]["p99_ms"] <= BUDGET_L0_P99_MS,
    }


# -- the section --------------------------------------------------------------------------------------------
def bench_trees(workdir: Path, *, files: int = 1000, docs: int = 10000, queries: int = 100, repeat: int = 20,
                lookup_repeat: int = 5) -> dict[str, Any]:
    """Both measurements (the `trees` section of `kb bench`)."""
    load = [_load_average()]  # the machines are shared: how busy this one was tells how to read the p99s
    print(f"trees: reconcile of a {files:,}-file tree ...", file=sys.stderr)
    reconcile = bench_reconcile(workdir, files=files)
    print(f"trees: L0 with translation groups at {docs:,} documents ...", file=sys.stderr)
    groups = bench_groups(workdir, docs=docs, queries=queries, repeat=repeat, lookup_repeat=lookup_repeat)
    return {"reconcile": reconcile, "l0_groups": groups, "load_average": [*load, _load_average()]}


def _load_average() -> float | None:
    """The one-minute load average (None where the platform has none)."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def _pair(s: dict[str, Any], digits: int = 3) -> str:
    return f"{s['p50_ms']:.{digits}f} / {s['p99_ms']:.{digits}f}"


def render_trees(t: dict[str, Any]) -> list[str]:
    r, g = t["reconcile"], t["l0_groups"]
    depths = ", ".join(f"{n:,} at depth {d}" for d, n in r["depths"].items())
    lines = ["", f"Reconcile of a documentation tree ({r['documents']:,} documents of {r['pages']:,} pages, "
             f"{r['translated_pages']:,} in en + zh; {r['mb']:.1f} MB, {r['big_pages']} pages of 20-80 KB; "
             f"categories {depths}; {r['refused']} files refused: {'; '.join(r['refused_why'])}); BM25 only",
             "| files | reconcile | documents/s | RSS growth (peak − before) | second reconcile (unchanged) | "
             "L0 = database |", "|---|---|---|---|---|---|",
             f"| {r['files']:,} | {r['reconcile_s']:.1f} s | {r['documents_per_s']:.1f} | "
             f"{r['rss_growth_mb']:.0f} MB ({r['rss_before_mb']:.0f} → {r['peak_rss_mb']:.0f} MB) | "
             f"{r['second_reconcile_s']:.2f} s ({r['second_unchanged']:,}) | "
             f"{'yes' if r['l0_equals_database'] else 'NO'} |",
             f"memory: {r['memory_measure']}",
             "", f"L0 with translation groups at {g['documents']:,} documents ({g['pages']:,} pages, "
             f"{g['translation_groups']:,} translation groups; loaded in {g['load_s']:.2f} s); groups on vs off "
             "(every entry group=\"\"), alternating; L0 = match + first hit + ties + group_count + versions; lookup "
             "= HybridLookup with an empty L1",
             "| class | hits / pages per query | L0 groups p50 / p99 ms | L0 no groups p50 / p99 ms | L0 p99 ratio | "
             "lookup groups p50 / p99 ms | lookup no groups p50 / p99 ms | lookup p99 ratio | high (groups / none) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, c in [*g["classes"].items(), ("all", g["all"])]:
        a = c.get("answers")
        high = f"{a['groups']['high']:.0%} / {a['no_groups']['high']:.0%}" if a else ""
        count = f"{c['hits_per_query']:g} / {c['pages_per_query']:g}" if "hits_per_query" in c else ""
        lines.append(f"| {name} | {count} | {_pair(c['l0']['groups'])} | {_pair(c['l0']['no_groups'])} | "
                     f"{c['l0']['p99_ratio']:.2f} | {_pair(c['lookup']['groups'], 2)} | "
                     f"{_pair(c['lookup']['no_groups'], 2)} | {c['lookup']['p99_ratio']:.2f} | {high} |")
    lines.append(f"budget: L0 p99 <= {g['budget_p99_ms']} ms with groups: "
                 f"{'met' if g['budget_met'] else 'NOT met'} (worst class {g['worst_class_p99_ms']:.3f} ms, all "
                 f"{g['all']['l0']['groups']['p99_ms']:.3f} ms)")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_trees", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=1000, help="Markdown files in the reconciled tree")
    parser.add_argument("--docs", type=int, default=10000, help="documents in the L0 index with translation groups")
    parser.add_argument("--queries", type=int, default=100, help="queries per class")
    parser.add_argument("--repeat", type=int, default=20, help="repetitions of the query mix for L0")
    parser.add_argument("--lookup-repeat", type=int, default=5, help="repetitions of the query mix for lookups")
    parser.add_argument("--json", type=Path, default=Path("bench-trees.json"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    given = sys.argv[1:] if argv is None else argv
    report: dict[str, Any] = {"machine": machine(), "command": " ".join(["python -m benchmarks.bench_trees", *given])}
    with tempfile.TemporaryDirectory(prefix="kb-bench-trees-") as workdir:
        report["trees"] = bench_trees(Path(workdir), files=args.files, docs=args.docs, queries=args.queries,
                                      repeat=args.repeat, lookup_repeat=args.lookup_repeat)
    m = report["machine"]
    return publish(args.json, report, "\n".join([
        f"machine: {m.get('cpu', '?')}, {m['cpus']} cores, {m.get('memory_gb', '?')} GiB, Python {m['python']}; "
        f"load average {' → '.join(str(v) for v in report['trees']['load_average'])} (start → end)",
        *render_trees(report["trees"])]))


if __name__ == "__main__":
    sys.exit(main())
