"""What the benchmarks share: the synthetic corpus, timing and statistics helpers, the machine description and the
settings of a benchmark's own knowledge base.

Every benchmark module imports this one and nothing imports a benchmark module back (`bench` runs the `pages`
section from `bench_pages`, which needs only this), so there is no import circle. The benchmarks use kb_core's
public faces only (`kb_core`, `kb_core.console`, `kb_core.testing`; tests/unit/test_bench.py checks): a module
that measures one component apart from the knowledge base takes it from `kb_core.testing` and says so where it
does. They never import tests/ (its helpers are pytest's, on pytest's path).
"""

from __future__ import annotations

import json
import os
import platform
import random
import re
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kb_core import KnowledgeEntry, Settings, load_settings
from kb_core.console import percentile

REPO = Path(__file__).resolve().parent.parent
NO_MODEL = "no-such-org/no-such-model"  # not a folder, not in the hub cache: L1 runs on BM25 only


def bench_settings(root: Path, *, model: str = NO_MODEL, **extra: Any) -> Settings:
    """Settings of a benchmark's own knowledge base under `root`: its own SQLite file and Milvus Lite directory
    (never the ones `KB_*` variables name), no folder watcher unless asked."""
    values: dict[str, Any] = {"app_root": root, "embedding_model": model, "watch": False,
                              "database_url": f"sqlite:///{root}/kb.sqlite3", "milvus_uri": str(root / "kb_milvus.db")}
    return load_settings(**{**values, **extra})


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


def _keywords(i: int, rng: random.Random, shared: list[str]) -> list[str]:
    """Document i's keywords: its error code, maybe an API name, generic and short keywords at their shares,
    1-3 shared terms, now and then a hot one; 3 to 7 in all."""
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
    return keywords


def corpus_entries(n: int, *, seed: int = 7) -> tuple[Corpus, list[Any]]:
    """`generate_corpus`'s keywords as N L0 entries in memory, without files (an L0-only benchmark at 100,000
    documents): every tenth document is the previous page's other language version, in one translation group."""
    rng = random.Random(seed)
    shared = [p + s for p in _ZH_PREFIX for s in _ZH_SUFFIX] + _EN_TERMS
    corpus = Corpus(root=Path("knowledge_base"), shared_terms=shared)
    entries = []
    for i in range(n):
        pair = i % 10 == 9
        keywords = corpus.keywords[-1] if pair else _keywords(i, rng, shared)
        corpus.keywords.append(keywords)
        page = i - 1 if pair else i
        entries.append(KnowledgeEntry(
            f"knowledge_base/{['api', 'domain', 'troubleshooting'][page % 3]}/doc-{page:06d}{'.zh' if pair else ''}.md",
            f"{keywords[0]} 排查手册 {i}", tuple(keywords), f"关于 {keywords[0]} 的说明与处理步骤",
            lang="zh" if pair else "en", group=f"doc-{page}" if pair or i % 10 == 8 else ""))
    return corpus, entries


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
            keywords = _keywords(i, rng, shared)
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


FIXTURE_KB = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "realistic_kb"
_IDENTIFIER = re.compile(r"^[A-Za-z][A-Za-z0-9]*(?:[_.-][A-Za-z0-9]+)+$|^[A-Z]+[0-9]+$|^[a-z]+(?:-[a-z]+)+$")


def generate_fixture_shaped(root: Path, n: int, *, max_lines_per_section: int = 3) -> int:
    """About `n` documents shaped like the evaluation fixture's real documentation (tests/fixtures/realistic_kb):
    copy k of each page lies at `<its folder>/copy-<k // 50>/<name>-<k>.md`, translation pairs stay pairs
    (`gateway/…` and `gateway-zh/…` copies share k), keywords get the copy's number so they stay specific,
    except the generic ones (on 5 or more of the fixture's pages: the product's name, "Plugin"), which stay
    shared, and the body keeps its licence header, MDX lines and every heading with the first lines under it.
    Returns the number of files written."""
    import yaml

    pages = sorted(p for p in FIXTURE_KB.rglob("*.md"))
    claims: dict[str, int] = {}
    for page in pages:
        text = page.read_text(encoding="utf-8")
        if text.startswith("---\n") and text.find("\n---\n", 4) > 0:
            for keyword in (yaml.safe_load(text[4:text.find("\n---\n", 4)]) or {}).get("keywords") or []:
                claims[str(keyword)] = claims.get(str(keyword), 0) + 1
    written, copy = 0, 0
    while written < n:
        for page in pages:
            if written >= n:
                break
            text = page.read_text(encoding="utf-8")
            relative = page.relative_to(FIXTURE_KB)
            body, front = text, None
            if text.startswith("---\n"):
                end = text.find("\n---\n", 4)
                if end > 0:
                    front, body = yaml.safe_load(text[4:end]) or {}, text[end + 5:]
            kept, lines_left = [], max_lines_per_section
            for line in body.splitlines():
                if line.startswith("#"):
                    lines_left = max_lines_per_section
                    kept.append(line)
                elif lines_left > 0 or line.startswith(("<", "import ", "-->", "#")):
                    kept.append(line)
                    lines_left -= bool(line.strip())
            if isinstance(front, dict):
                front = dict(front)
                keywords = front.get("keywords") or []
                front["keywords"] = [k if claims.get(str(k), 0) >= 5 else
                                     f"{k}-{copy}" if _IDENTIFIER.match(str(k)) else f"{k} {copy}" for k in keywords]
                front["title"] = f"{front.get('title', relative.stem)} ({copy})"
                head = "---\n" + yaml.safe_dump(front, allow_unicode=True, sort_keys=False) + "---\n"
            else:
                head = ""
            target = root / relative.parent / f"copy-{copy // 50}" / f"{relative.stem}-{copy}.md"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(head + "\n".join(kept) + "\n", encoding="utf-8")
            written += 1
        copy += 1
    return written


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
def percentile_of(values: Sequence[float], p: float) -> float:
    value = percentile(values, p)
    if value is None:
        raise ValueError("no samples")
    return value


def time_calls(fn: Callable[[str], Any], queries: Sequence[str], repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        for q in queries:
            started = time.perf_counter_ns()
            fn(q)
            samples.append((time.perf_counter_ns() - started) / 1e6)
    return samples


def stats(samples: Sequence[float]) -> dict[str, float]:
    return {"p50_ms": round(statistics.median(samples), 4), "p99_ms": round(percentile_of(samples, 99), 4),
            "n": len(samples)}


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


def publish(path: Path, report: dict[str, Any], table: str) -> int:
    """The end of every benchmark command: the JSON written, the table printed; exit status 0."""
    write_json(path, report)
    print(table)
    print(f"\n(JSON: {path})")
    return 0


def write_json(path: Path, report: dict[str, Any]) -> None:
    """The report as the docs expect it (copied into docs/bench-*.json after a run; benchmarks/make_docs.py)."""
    path.write_text(json.dumps(report, ensure_ascii=False, indent=2), encoding="utf-8")
