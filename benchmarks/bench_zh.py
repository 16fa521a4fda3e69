"""Benchmark: lookups that call L1 on a Chinese-heavy knowledge base.

    python -m benchmarks.bench_zh [--docs 1238] [--queries 150] [--json bench-zh.json]   (about 10 minutes)
    python -m benchmarks.bench_zh --cache ~/.cache/kb-console/bench-zh      # keep the built knowledge base
    python -m benchmarks.bench_zh --dense      # with the built-in dense model: every chunk embedded (~15 min)
    kb bench --skip l0 lookups l1 ingest pages trees --no-bge               # the same, as the `zh` section

The corpus: generated Chinese product documentation in our own words, shaped like a cloud vendor's manual
(about 60 imaginary products of the "天穹" family, each with its overview, quick start, billing, parameter
reference, FAQ, error codes, API reference ...): frontmatter with a title, 3-7 keywords (the product's name
on all of its pages, generic keywords such as "控制台" on some) and a summary of one to three long sentences;
a body of 10-80 KB (log-normal around 17 KB, 20 KB on average) in `##` / `###` sections of prose, numbered
steps, parameter tables and code blocks, with English identifiers (`max_connections`, `CreateInstance`,
`InvalidParameter.InstanceId`) as real Chinese manuals have them. 1,238 documents make 20,702 chunks
through the project's chunker (556 characters on average).

The knowledge base is the real one: the files are written under `knowledge_base/`, a knowledge base without
an embedding model (L1 on BM25 only, SQLite FTS5; with `--dense`, the built-in model) is opened on them and
`kb.documents.reconcile()` indexes them, so the chunks and their tokens are the ones production makes. Then
`kb.lookup()` is timed for queries that call L1 (checked on the trace; L0 finds nothing or several documents):

- **summary**: a page's summary, as it stands or asked about ("我想了解：..."), 60-250 characters;
- **body sentence**: one or two sentences of a page's body, 20-160 characters;
- **question**: a short question built from a page's words ("天穹对象存储 如何 开启 跨域访问？").

Per kind p50 / p99 of the whole lookup, and a breakdown of the same queries into stages, each timed on its
own through the components the lookup uses (the knowledge base's own full-text file, opened read-only a
second time): tokenising the query, the FTS5 query with fetching its rows, the query analysis of the
relevance check, the relevance check over the candidates (coverage), and L1 as a whole; plus cProfile's
most expensive functions over one pass of the lookups.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import hashlib
import io
import json
import logging
import math
import os
import pstats
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.common import bench_settings, machine, publish, stats
from kb_core import open_knowledge_base

log = logging.getLogger("benchmarks.bench_zh")

GOAL_P99_MS = 80.0  # our goal: lookups that call L1 on a Chinese-heavy knowledge base of ~20,000 chunks
KINDS = ("summary", "body sentence", "question")
TYPICAL_BYTES = 17_000  # the median page (log-normal, clipped to 10-80 KB)
CORPUS_VERSION = 1  # bump when the generator changes (a cached knowledge base is rebuilt)

_BRAND = "天穹"
# (category, product names); each product gets a page of every kind below
_PRODUCTS = {
    "compute": ["弹性计算实例", "裸金属服务器", "函数计算", "容器服务", "批量计算", "边缘计算节点", "弹性伸缩",
                "专属宿主机"],
    "storage": ["对象存储", "文件存储", "块存储", "归档存储", "存储网关", "混合云备份", "数据湖存储"],
    "database": ["云数据库 MySQL 版", "云数据库 PostgreSQL 版", "分布式缓存 Redis 版", "文档数据库", "时序数据库",
                 "图数据库", "分布式关系型数据库", "数据传输服务", "数据库审计"],
    "network": ["专有网络", "负载均衡", "内容分发网络", "弹性公网 IP", "NAT 网关", "云企业网", "VPN 网关",
                "云解析", "全球加速"],
    "security": ["密钥管理服务", "访问控制", "证书管理服务", "云防火墙", "DDoS 防护", "堡垒机", "安全中心",
                 "数据安全审计"],
    "middleware": ["消息队列 Kafka 版", "消息队列 RocketMQ 版", "API 网关", "配置中心", "服务注册中心",
                   "微服务治理", "分布式任务调度", "事件总线"],
    "observability": ["日志服务", "云监控", "链路追踪", "应用性能监控", "操作审计", "告警中心"],
    "ai": ["机器学习平台", "智能语音交互", "图像识别", "自然语言处理", "机器翻译", "文字识别", "人脸核身"],
    "devops": ["代码托管", "持续交付流水线", "制品仓库", "容器镜像服务", "资源编排", "云效测试"],
}
_DOC_KINDS = [
    ("产品简介", ["产品定义", "产品架构", "核心概念"]), ("产品优势", ["性能优势", "成本优势", "可靠性"]),
    ("应用场景", ["典型场景", "行业方案", "场景架构"]), ("快速入门", ["开通服务", "创建实例", "连接实例"]),
    ("创建与管理实例", ["实例规格", "实例状态", "释放实例"]), ("配置说明", ["配置项", "参数模板", "配置变更"]),
    ("参数参考", ["参数列表", "默认值", "取值范围"]), ("计费说明", ["计费方式", "按量付费", "包年包月"]),
    ("购买与续费", ["购买指南", "续费管理", "欠费停机"]), ("权限管理", ["访问控制策略", "子账号授权", "服务角色"]),
    ("安全加固", ["白名单", "数据加密", "安全组"]), ("监控与告警", ["监控指标", "告警规则", "阈值"]),
    ("备份与恢复", ["自动备份", "数据恢复", "快照"]), ("迁移指南", ["迁移方案", "数据同步", "割接"]),
    ("性能调优", ["性能瓶颈", "连接池", "慢查询"]), ("常见问题", ["连接失败", "性能下降", "费用疑问"]),
    ("错误码", ["错误码列表", "错误原因", "处理建议"]), ("API 参考", ["接口列表", "请求参数", "返回参数"]),
    ("SDK 使用指南", ["安装 SDK", "初始化客户端", "调用示例"]), ("版本发布说明", ["新增功能", "功能优化", "问题修复"]),
    ("最佳实践", ["高可用部署", "成本优化", "容量规划"]),
]
_GENERIC = [("控制台", 0.25), ("天穹云", 0.3), ("API", 0.15), ("计费", 0.1)]
_DOMAIN = """实例 集群 节点 地域 可用区 交换机 安全组 白名单 账号 权限 角色 策略 存储空间 容量 带宽 流量 连接数 并发
吞吐量 延迟 副本 分片 索引 快照 备份 日志 监控 告警 阈值 指标 控制台 命令行 接口 请求 响应 签名 密钥 证书 域名 端口
协议 规格 配额 计费 包年包月 按量付费 欠费 续费 退款 订单 资源包 镜像 容器 磁盘 内存 网卡 版本 升级 降配 迁移 同步
恢复 回滚 读写分离 主备切换 高可用 容灾 加密 审计 合规 标签 资源组 事件 任务 队列 消息 主题 订阅 消费者 生产者 偏移量
分区 重试 超时 限流 熔断 降级 灰度 发布 回调 触发器 函数 运行时 冷启动 缓存 命中率 过期时间 淘汰策略 键值 数据表 字段
查询语句 慢查询 死锁 事务 隔离级别 参数模板 连接池 会话 令牌 访问密钥 子账号 授权 跨域 防盗链 回源 加速 刷新 预热
生命周期 版本控制 多版本 冷热分层 低频访问 归档 解冻 挂载点 文件系统 吞吐 读写权限 网络类型 私网地址 公网地址 弹性网卡
负载 健康检查 监听 转发规则 会话保持 证书链 加密套件 调度策略 伸缩组 伸缩规则 定时任务 工作流 流水线 制品 构建 部署
环境变量 配置文件 命名空间 服务实例 注册 发现 权重 路由 网关 插件 鉴权 签名算法 时间戳 随机数 请求头 返回码 错误信息
数据源 数据集 模型 训练 推理 标注 识别率 准确率 并发数 调用次数 资源配额 工单 运维 巡检 诊断 报表 仪表盘 日志投递
检索 分词 聚合 投递 采集 探针 采样率 链路 拓扑 依赖 告警通知 联系人 回调地址 事件规则 目标 过滤规则""".split()
_ACTS = ["修改配置", "重启实例", "扩容节点", "创建快照", "切换主备", "开启日志投递", "调整规格", "更新证书",
         "刷新缓存", "释放资源", "绑定弹性公网 IP", "添加白名单", "配置告警规则", "导出监控数据", "回滚版本",
         "提交工单", "升级内核版本", "开启自动备份", "设置生命周期规则", "授权子账号"]
_CONDS = ["业务高峰期", "跨地域访问", "实例规格较小", "连接数接近上限", "磁盘使用率超过百分之八十", "网络抖动",
          "主节点故障", "证书即将过期", "账号欠费", "配置变更失败", "请求量突增", "存在大量慢查询"]
_METRICS = ["CPU 使用率", "内存使用率", "磁盘使用率", "连接数", "每秒请求数", "平均响应时间", "错误率",
            "网络流入带宽", "网络流出带宽", "消息堆积量", "缓存命中率", "复制延迟"]
_UNITS = ["秒", "分钟", "小时", "天", "GB", "MB", "个", "次"]
_EN_PARTS = ("max min default idle timeout connection pool size buffer cache log level retention interval "
             "replica shard batch queue thread worker region zone instance bucket object policy rule key token "
             "secret endpoint route weight health check limit rate burst window period").split()
_API_VERBS = ["Create", "Describe", "Modify", "Delete", "List", "Start", "Stop", "Restart", "Reset", "Attach",
              "Detach", "Enable", "Disable"]
_API_NOUNS = ["Instance", "Instances", "Cluster", "Bucket", "Snapshot", "Backup", "Account", "Policy",
              "Certificate", "Listener", "Rule", "Topic", "Group", "Alarm", "Task", "Parameter", "Whitelist"]
_ERR_PREFIX = ["InvalidParameter", "MissingParameter", "OperationDenied", "ResourceNotFound", "QuotaExceeded",
               "Forbidden", "InternalError", "Throttling", "IncorrectStatus", "InvalidAccessKeyId"]

_TEMPLATES = [
    "{p}支持{f}，用户可以在控制台的{f2}页面中{act}。",
    "在{cond}时，建议先检查{metric}和{f}，再决定是否{act}。",
    "开启{f}后，系统会自动完成{f2}，整个过程通常需要{n}{unit}，期间业务不受影响。",
    "参数 `{param}` 的默认值为 {num}，取值范围为 {lo} 到 {hi}，修改后需要{act}才能生效。",
    "如果{metric}连续{n}分钟超过阈值，{p}会触发告警，并通过短信和邮件通知告警联系人。",
    "通过 `{api}` 接口可以查询{f}的当前状态，返回结果中包含{f2}、{f3}以及最近一次变更的时间。",
    "{p}的{f}按照{billing}计费，费用在每个计费周期结束后统一结算，账单可以在费用中心查看。",
    "为了保证数据安全，{p}默认对{f}进行加密存储，加密使用的密钥由密钥管理服务统一托管。",
    "当{f}与{f2}同时启用时，{f}的优先级更高，{f2}中与之冲突的设置不会生效。",
    "建议在业务低峰期执行{act}操作，并提前通知相关业务方，以免影响线上的{f}。",
    "使用{f}之前，需要先为子账号授予 `{perm}` 权限，否则调用会返回错误码 `{code}`。",
    "每个地域最多可以创建 {n} 个{f}，如果需要更多配额，请在配额中心提交申请或联系技术支持。",
    "出现错误码 `{code}` 通常表示{reason}，请检查{f}的配置是否正确，然后重试请求。",
    "{f}目前只在部分地域开放，各地域的开放情况和{f2}的支持范围以控制台显示为准。",
    "迁移完成后，请对比源端和目标端的{f}与{f2}，确认数据完全一致后再切换业务流量。",
    "{p}会定期对{f}进行巡检，发现{f2}异常时自动隔离故障节点，并在{n}{unit}内完成恢复。",
    "在控制台左侧导航栏选择{f}，单击{f2}，在弹出的对话框中填写名称和描述，然后单击确定。",
    "{f}的数据会保留 {n} 天，超过保留时间的数据将被自动删除，且删除后无法恢复。",
    "对于读多写少的业务，推荐开启{f}，并把只读请求路由到只读节点，以降低主节点的{metric}。",
    "{p}与{p2}可以配合使用：前者负责{f}，后者负责{f2}，两者通过内网互通，不产生公网流量费用。",
    "SDK 会在请求失败时按照指数退避的方式自动重试，最多重试 {n} 次，可以通过 `{param}` 调整。",
    "变更{f}会导致实例短暂重启，连接会中断约 {n} 秒，请确保应用具备自动重连能力。",
    "{f}的计量数据每小时汇总一次，并在{n}小时内推送到费用中心，用于生成账单明细。",
    "如果您在{cond}的情况下遇到{f}异常，可以先查看操作日志，确认最近是否执行过{act}。",
    "推荐的{f}规格取决于业务的{metric}，一般按照峰值的一点五倍进行容量规划。",
    "{p}提供了{f}、{f2}和{f3}三种能力，分别适用于不同规模和不同可靠性要求的业务场景。",
    "调用 `{api}` 时必须指定地域和实例 ID，其余参数可选，不传时使用系统默认值。",
    "当{f}处于变更中状态时，不允许再次发起{act}，请等待当前任务完成后再操作。",
]
_REASONS = ["请求参数的格式不正确", "当前账号没有足够的权限", "资源不存在或者已经被释放", "超出了地域内的配额限制",
            "实例状态不允许当前操作", "请求过于频繁触发了限流", "签名校验失败", "账号存在欠费"]
_BILLING = ["按量付费", "包年包月", "资源包抵扣", "阶梯价格"]


class ZhProductWriter:
    """Generated Chinese product pages: templates filled with the product's own features and the domain's
    vocabulary, mixed with free sentences of jieba's frequent Chinese words for a realistic long tail."""

    def __init__(self, seed: int = 20261201):
        import jieba

        from kb_core.testing import STOP_WORDS  # (left out of the vocabulary, as the full-text index ignores them)

        self.rng = rng = random.Random(seed)
        words = []
        for line in (Path(jieba.__file__).parent / "dict.txt").read_text(encoding="utf-8").splitlines():
            word, freq, pos = line.split(" ")
            if (2 <= len(word) <= 4 and pos in {"n", "v", "vn", "a", "ad", "an", "nz", "l", "i", "d"}
                    and all("\u4e00" <= ch <= "\u9fff" for ch in word) and word not in STOP_WORDS):
                words.append((int(freq), word))
        self.zh = [w for _, w in sorted(words, reverse=True)[:5000]]
        self.zh_cw = list(__import__("itertools").accumulate(1 / (r + 1) ** 0.9 for r in range(len(self.zh))))
        self.products = [(category, name) for category, names in _PRODUCTS.items() for name in names]
        self.features = {name: rng.sample(_DOMAIN, 14) + [f"{name}{s}" for s in rng.sample(
            ["控制台", "实例", "集群", "服务", "规格", "网络", "日志"], 2)] for _, name in self.products}
        self.params = {name: list(dict.fromkeys(
            "_".join(rng.sample(_EN_PARTS, rng.randint(2, 3))) for _ in range(12))) for _, name in self.products}
        self.apis = {name: [rng.choice(_API_VERBS) + rng.choice(_API_NOUNS) for _ in range(8)]
                     for _, name in self.products}

    def _free_sentence(self, feats: list[str]) -> str:
        rng = self.rng
        words = []
        for _ in range(rng.randint(6, 16)):
            r = rng.random()
            words.append(rng.choice(feats) if r < 0.25 else rng.choice(_DOMAIN) if r < 0.4
                         else rng.choices(self.zh, cum_weights=self.zh_cw)[0])
            if rng.random() < 0.3:
                words.append(rng.choice(["的", "了", "和", "在", "是", "将", "可以", "需要", "通过", "对"]))
            if rng.random() < 0.07:
                words.append("，")
        return "".join(words).strip("，") + rng.choice("。。。；")

    def sentence(self, product: str, feats: list[str]) -> str:
        rng = self.rng
        if rng.random() < 0.3:
            return self._free_sentence(feats)
        f, f2, f3 = rng.sample(feats, 3)
        lo = rng.randint(0, 100)
        values = {"p": f"{_BRAND}{product}", "p2": f"{_BRAND}{rng.choice(self.products)[1]}", "f": f, "f2": f2,
                  "f3": f3, "act": rng.choice(_ACTS), "cond": rng.choice(_CONDS), "metric": rng.choice(_METRICS),
                  "n": rng.randint(2, 60), "unit": rng.choice(_UNITS), "param": rng.choice(self.params[product]),
                  "num": rng.randint(1, 4096), "lo": lo, "hi": lo + rng.randint(10, 65535),
                  "api": rng.choice(self.apis[product]), "billing": rng.choice(_BILLING),
                  "perm": f"{rng.choice(['ReadOnly', 'FullAccess', 'Manage'])}{rng.choice(_API_NOUNS)}",
                  "code": (f"{rng.choice(_ERR_PREFIX)}.{rng.choice(_API_NOUNS)}"
                           f"{rng.choice(['Id', 'Name', 'Status', ''])}"),
                  "reason": rng.choice(_REASONS)}
        return rng.choice(_TEMPLATES).format(**values)

    def _paragraph(self, product: str, feats: list[str]) -> str:
        return "".join(self.sentence(product, feats) for _ in range(self.rng.randint(3, 9)))

    def _block(self, product: str, feats: list[str]) -> str:
        rng, r = self.rng, self.rng.random()
        if r < 0.1:
            lang = rng.choice(["bash", "json", "yaml", "python"])
            lines = []
            for _ in range(rng.randint(3, 12)):
                key, value = rng.choice(self.params[product]), rng.choice(["true", "false", str(rng.randint(1, 9999))])
                lines.append({"json": f'  "{key}": {value},', "yaml": f"{key}: {value}",
                              "python": f"client.{rng.choice(self.apis[product])}({key}={value})"}.get(
                    lang, f"tqcli {product[:2]} {rng.choice(self.apis[product])} --{key.replace('_', '-')} {value}"))
            return f"```{lang}\n" + "\n".join(lines) + "\n```"
        if r < 0.2:
            rows = ["| 参数 | 类型 | 默认值 | 说明 |", "|---|---|---|---|"]
            keys = rng.sample(self.params[product], rng.randint(3, 8))
            rows += [f"| `{key}` | {rng.choice(['String', 'Integer', 'Boolean', 'Long'])} | {rng.randint(0, 1000)} | "
                     f"{self.sentence(product, feats)} |" for key in keys]
            return "\n".join(rows)
        if r < 0.3:
            return "\n".join(f"{i}. {self.sentence(product, feats)}" for i in range(1, rng.randint(3, 7)))
        return self._paragraph(product, feats)

    def document(self, i: int) -> tuple[str, str, str, str]:
        """(category, file name, summary, Markdown with frontmatter) of the i-th page (0-based)."""
        rng = self.rng
        category, product = self.products[i % len(self.products)]
        kind, kind_terms = _DOC_KINDS[(i // len(self.products)) % len(_DOC_KINDS)]
        feats = self.features[product] + kind_terms
        title = f"{_BRAND}{product}{kind}"
        keywords = [product, *rng.sample(kind_terms, rng.randint(1, 2)), *rng.sample(self.features[product][:14], 2)]
        keywords += [k for k, share in _GENERIC if rng.random() < share]
        keywords = list(dict.fromkeys(keywords))[:7]
        summary = "".join(self.sentence(product, feats) for _ in range(rng.randint(1, 3)))
        summary = summary.replace("`", "").replace('"', "")
        target = min(80_000, max(10_000, int(rng.lognormvariate(math.log(TYPICAL_BYTES), 0.35))))
        body = [f"# {title}", self._paragraph(product, feats)]
        size = sum(len(b.encode()) for b in body)
        section = 0
        while size < target:
            section += 1
            heading = f"## {rng.choice(feats)}{rng.choice(['说明', '概述', '配置', '操作步骤', '注意事项', '限制'])}"
            parts = [heading]
            for _ in range(rng.randint(3, 7)):
                parts.append(self._block(product, feats))
            if rng.random() < 0.25:
                parts.append(f"### {rng.choice(feats)}{rng.choice(['示例', '常见错误', '最佳实践'])}")
                parts += [self._block(product, feats) for _ in range(rng.randint(2, 4))]
            text = "\n\n".join(parts)
            body.append(text)
            size += len(text.encode())
        front = (f'---\ntitle: "{title}"\nkeywords:\n' + "".join(f'  - "{k}"\n' for k in keywords)
                 + f'summary: "{summary}"\n---\n\n')
        return category, f"{product.replace(' ', '-').lower()}-{i:04d}.md", summary, front + "\n\n".join(body) + "\n"


def zh_documents(n: int, *, seed: int = 20261201) -> Iterator[tuple[str, str, str, str]]:
    writer = ZhProductWriter(seed)
    for i in range(n):
        yield writer.document(i)


def write_corpus(root: Path, n: int, *, seed: int = 20261201) -> list[dict[str, Any]]:
    """The pages under root/knowledge_base/<category>/; returns [{path, summary, text}] per page."""
    pages = []
    for category, name, summary, text in zh_documents(n, seed=seed):
        path = root / "knowledge_base" / category / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        pages.append({"path": f"knowledge_base/{category}/{name}", "summary": summary, "text": text})
    return pages


_SENTENCE = re.compile(r"[^。；！？\n]{12,}[。；！？]")


def zh_queries(pages: list[dict[str, Any]], per_kind: int, *, seed: int = 5) -> dict[str, list[str]]:
    """Candidate queries per kind (more than needed: the caller keeps those that call L1)."""
    import jieba

    rng = random.Random(seed)
    out: dict[str, list[str]] = {k: [] for k in KINDS}
    while min(len(v) for v in out.values()) < per_kind:
        page = rng.choice(pages)
        summary = page["summary"]
        out["summary"].append(rng.choice(["", "", "我想了解：", "请问"]) + summary)
        body = page["text"].split("\n---\n", 1)[-1]
        sentences = [s for s in _SENTENCE.findall(body) if "|" not in s and "`" not in s]
        if sentences:
            start = rng.randrange(len(sentences))
            out["body sentence"].append("".join(sentences[start:start + rng.choice([1, 1, 2])]).strip()[:160])
            words = [w for w in jieba.cut(rng.choice(sentences)) if re.fullmatch(r"[\u4e00-\u9fff]{2,6}", w)]
            if len(words) >= 2:
                picked = rng.sample(words, min(len(words), rng.randint(2, 4)))
                out["question"].append(f"{_BRAND}{page['path'].split('/')[-1].rsplit('-', 1)[0]} "
                                       f"{rng.choice(['如何', '怎么', '为什么'])} {' '.join(picked)}？")
    return out


# -- building the knowledge base ---------------------------------------------------------------------------
def _settings(root: Path, dense: bool) -> Any:
    """BM25 only, or with the built-in dense model (what a fresh offline install embeds with)."""
    return bench_settings(root, embedding_fallback="use-multilingual-v3" if dense else "none")


def build(root: Path, docs: int, *, cache: Path | None = None,
          dense: bool = False) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Write the pages and index them through `kb.documents.reconcile()` (with `dense`, the built-in model embeds every
    chunk). With `cache`, a knowledge base built before for the same corpus is reused (its whole application
    root copied back), and a new one is kept there."""
    key = hashlib.sha256(f"{CORPUS_VERSION}|{docs}|{'dense' if dense else 'bm25'}".encode()).hexdigest()[:12]
    kept = cache / key if cache is not None else None
    info: dict[str, Any] = {"documents": docs, "cached": False}
    if kept is not None and (kept / "done.json").is_file():
        shutil.copytree(kept / "root", root)
        pages = [{"path": f"knowledge_base/{category}/{name}", "summary": summary, "text": text}
                 for category, name, summary, text in zh_documents(docs)]
        info.update(json.loads((kept / "done.json").read_text()), cached=True)
        return pages, info
    pages = write_corpus(root, docs)
    kb = open_knowledge_base(_settings(root, dense), load_model=dense)
    try:
        if dense and not kb.wait_for_model().ready:
            raise RuntimeError("the built-in dense model did not load")
        started = time.perf_counter()
        report = kb.documents.reconcile()
        info["reconcile_s"] = round(time.perf_counter() - started, 1)
        if report.failed:
            raise RuntimeError(f"{len(report.failed)} documents failed to index: {report.failed[:3]}")
    finally:
        kb.close()
    if kept is not None:
        shutil.rmtree(kept, ignore_errors=True)
        shutil.copytree(root, kept / "root", ignore=shutil.ignore_patterns("*.locks", "*.opening", "*.server.json"))
        (kept / "done.json").write_text(json.dumps({"reconcile_s": info["reconcile_s"]}))
    return pages, info


def _fulltext_file(root: Path) -> Path:
    found = sorted(root.rglob("*fulltext*.sqlite3"))
    if not found:
        raise RuntimeError(f"no full-text file under {root}")
    return found[0]


# -- timing ------------------------------------------------------------------------------------------------
VARIANTS = ("two steps", "one FTS5 query")


@contextlib.contextmanager
def variant(name: str) -> Iterator[None]:
    """`two steps`: the full-text index as it is (long queries over a large index: candidates on the rarest
    tokens, scored with all of them); `one FTS5 query`: every search one FTS5 query ranked by bm25(), as before
    the two steps."""
    from kb_core.testing import SqliteFullTextIndex  # the component whose two ways are compared

    saved = SqliteFullTextIndex.two_steps
    SqliteFullTextIndex.two_steps = name == "two steps"
    try:
        yield
    finally:
        SqliteFullTextIndex.two_steps = saved


def _answer(result: Any) -> tuple:
    return (result.found, result.primary.source if result.primary else None,
            result.supplement.source if result.supplement else None, tuple(h.chunk_id for h in result.trace.l1_hits))


def _stage_times(fts_path: Path, queries: list[str]) -> dict[str, list[float]]:
    """The stages of L1, each timed on its own over the same queries, through the components a lookup uses."""
    from kb_core.testing import SqliteFullTextIndex, VectorSearcher, analyse_query, coverage, tokenize

    index = SqliteFullTextIndex(fts_path)
    searcher = VectorSearcher(_FtsStore(index), None)
    out: dict[str, list[float]] = {k: [] for k in ("tokenize query", "FTS5 query + rows", "analyse query",
                                                   "relevance (coverage)", "L1 search")}

    def timed(name: str, fn: Any, *args: Any) -> Any:
        began = time.perf_counter_ns()
        value = fn(*args)
        out[name].append((time.perf_counter_ns() - began) / 1e6)
        return value

    try:
        for q in queries:
            index.search(q, 20)  # warm: document frequencies
        for q in queries:
            tokens_ms = time.perf_counter_ns()
            tokenize(q)
            tokens_ms = (time.perf_counter_ns() - tokens_ms) / 1e6
            out["tokenize query"].append(tokens_ms)
            hits = timed("FTS5 query + rows", index.search, q, 20)
            out["FTS5 query + rows"][-1] = max(0.0, out["FTS5 query + rows"][-1] - tokens_ms)
            analysed = timed("analyse query", analyse_query, q)

            def relevance(analysed: Any = analysed, hits: Any = hits) -> None:
                for hit in hits:
                    coverage(list(analysed.terms), hit.row.text, analysed.whole)
                    if analysed.required:
                        coverage(analysed.required, hit.row.text, analysed.whole)

            timed("relevance (coverage)", relevance)
            timed("L1 search", searcher.search, q, 3)
    finally:
        index.close()
    return out


class _FtsStore:
    """The slice of a chunk store that `VectorSearcher` needs, over the knowledge base's FTS5 file."""

    has_dense = False

    def __init__(self, index: Any):
        self._index = index

    def search_bm25(self, query: str, *, limit: int, category: str | None = None) -> list[Any]:
        return self._index.search(query, limit, category)

    def search_dense(self, vector: list[float], *, limit: int, category: str | None = None) -> list[Any]:
        return []

    def chunks_of(self, doc_id: int) -> list[Any]:
        return self._index.chunks_of(doc_id)

    def document_frequencies(self, terms: Any) -> tuple[dict[str, int], int]:
        return self._index.document_frequencies(terms)


def _profile(kb: Any, queries: list[str], top: int = 14) -> list[dict[str, Any]]:
    """cProfile over one pass of the lookups: the functions with the most time of their own."""
    profiler = cProfile.Profile()
    profiler.enable()
    for q in queries:
        kb.lookup(q)
    profiler.disable()
    st = pstats.Stats(profiler, stream=io.StringIO())
    total = sum(v[2] for v in st.stats.values()) or 1.0  # type: ignore[attr-defined]
    rows = []
    for (file, line, func), (_cc, calls, tottime, cumtime, _callers) in st.stats.items():  # type: ignore[attr-defined]
        rows.append({"function": f"{Path(file).name}:{line}({func})", "calls": calls,
                     "own_ms_per_lookup": round(tottime * 1000 / len(queries), 3),
                     "cum_ms_per_lookup": round(cumtime * 1000 / len(queries), 3),
                     "own_share": round(tottime / total, 3)})
    return sorted(rows, key=lambda r: -r["own_ms_per_lookup"])[:top]


def bench_zh(workdir: Path, *, docs: int = 1238, per_kind: int = 150, repeat: int = 2,
             cache: Path | None = None, dense: bool = False) -> dict[str, Any]:
    """Build (or reuse) the knowledge base, keep the queries that call L1, then time `kb.lookup()` per kind in
    both variants, query by query alternating which runs first: wall time and this thread's CPU time (the
    machines are shared; CPU time is what another worker's load does not inflate)."""
    from kb_core.testing import warm_up_tokenizer

    started = time.perf_counter()
    load = [round(os.getloadavg()[0], 2)]
    warm_up_tokenizer()
    root = workdir / "zh"
    pages, built = build(root, docs, cache=cache, dense=dense)
    kb = open_knowledge_base(_settings(root, dense), load_model=dense)
    try:
        if dense and not kb.wait_for_model().ready:
            raise RuntimeError("the built-in dense model did not load")
        status = kb.status()
        candidates = zh_queries(pages, per_kind * 3)
        queries: dict[str, list[str]] = {}
        l0_hits: dict[str, list[int]] = {}
        for kind, qs in candidates.items():  # keep the queries that call L1 (and warm up)
            kept, hits = [], []
            for q in dict.fromkeys(qs):
                result = kb.lookup(q)
                if result.trace.l1_called:
                    kept.append(q)
                    hits.append(result.trace.l0_total)
                if len(kept) == per_kind:
                    break
            queries[kind], l0_hits[kind] = kept, hits
        gc.collect()
        wall = {(v, k): [] for v in VARIANTS for k in KINDS}
        cpu = {(v, k): [] for v in VARIANTS for k in KINDS}
        answers: dict[tuple[str, str], list[tuple]] = {(v, k): [] for v in VARIANTS for k in KINDS}
        turn = 0
        for _ in range(repeat):  # the kinds interleaved, query by query, the variants alternating
            for i in range(per_kind):
                for kind in KINDS:
                    if i >= len(queries[kind]):
                        continue
                    for name in (VARIANTS if turn % 2 == 0 else VARIANTS[::-1]):
                        with variant(name):
                            began, began_cpu = time.perf_counter_ns(), time.thread_time_ns()
                            result = kb.lookup(queries[kind][i])
                            cpu[(name, kind)].append((time.thread_time_ns() - began_cpu) / 1e6)
                            wall[(name, kind)].append((time.perf_counter_ns() - began) / 1e6)
                        answers[(name, kind)].append(_answer(result))
                    turn += 1
        every = [q for kind in KINDS for q in queries[kind]]
        profile = _profile(kb, every)
    finally:
        kb.close()
    stages: dict[str, dict[str, Any]] = {}
    for name in VARIANTS:
        with variant(name):
            stages[name] = {kind: {stage: stats(v) for stage, v in _stage_times(_fulltext_file(root), qs).items()}
                            for kind, qs in queries.items()}

    def row(kind: str) -> dict[str, Any]:
        n = max(1, len(l0_hits[kind]))
        out: dict[str, Any] = {
            "queries": len(queries[kind]), "avg_chars": round(statistics.mean(len(q) for q in queries[kind]), 1)
            if queries[kind] else 0,
            "l0_miss": round(sum(1 for h in l0_hits[kind] if h == 0) / n, 3),
            "l0_several": round(sum(1 for h in l0_hits[kind] if h > 1) / n, 3)}
        for name in VARIANTS:
            found = sum(1 for a in answers[(name, kind)] if a[3]) / max(1, len(answers[(name, kind)]))
            out[name] = {**stats(wall[(name, kind)]), "cpu": stats(cpu[(name, kind)]), "l1_found": round(found, 3),
                         "stages": stages[name][kind]}
        pairs = list(zip(answers[(VARIANTS[0], kind)], answers[(VARIANTS[1], kind)], strict=True))
        out["same_answer"] = round(sum(1 for a, b in pairs if a[:3] == b[:3]) / max(1, len(pairs)), 3)
        out["same_l1_hits"] = round(sum(1 for a, b in pairs if a == b) / max(1, len(pairs)), 3)
        out["speedup_p99"] = round(out[VARIANTS[1]]["p99_ms"] / out[VARIANTS[0]]["p99_ms"], 1)
        return out

    kinds = {kind: row(kind) for kind in KINDS}
    every_variant = {name: {**stats([s for k in KINDS for s in wall[(name, k)]]),
                            "cpu": stats([s for k in KINDS for s in cpu[(name, k)]])} for name in VARIANTS}
    sizes = [len(p["text"].encode()) for p in pages]
    return {"documents": docs, "chunks": _count_chunks(_fulltext_file(root)),
            "avg_kb": round(statistics.mean(sizes) / 1024, 1), "min_kb": round(min(sizes) / 1024, 1),
            "max_kb": round(max(sizes) / 1024, 1), "l1_mode": status.l1_mode, "build": built,
            "repeat": repeat, "kinds": kinds, "all": every_variant, "goal_p99_ms": GOAL_P99_MS,
            "profile": profile, "load_average": [*load, round(os.getloadavg()[0], 2)],
            "seconds": round(time.perf_counter() - started, 1)}


def _count_chunks(fts_path: Path) -> int:
    from kb_core.testing import SqliteFullTextIndex

    index = SqliteFullTextIndex(fts_path)
    try:
        return index.count_chunks()
    finally:
        index.close()


def render_zh(r: dict[str, Any]) -> list[str]:
    new, old = VARIANTS
    lines = ["", f"Lookups that call L1 on a Chinese-heavy knowledge base: {r['documents']:,} generated product pages "
             f"({r['min_kb']:.0f}-{r['max_kb']:.0f} KB, {r['avg_kb']:.0f} KB on average), {r['chunks']:,} chunks; "
             f"{r['l1_mode']}; kb.lookup(), {r['repeat']} passes, kinds interleaved, variants alternating",
             f"| query kind | queries | avg chars | L0 miss / several | {new} p50 / p99 | (CPU p50 / p99) | "
             f"{old} p50 / p99 | (CPU p50 / p99) | speed-up p99 | same answer / same L1 hits |",
             "|---|---|---|---|---|---|---|---|---|---|"]

    def ms(x: dict[str, Any]) -> str:
        return f"{x['p50_ms']:.1f} / {x['p99_ms']:.1f} ms"

    for kind, k in r["kinds"].items():
        lines.append(f"| {kind} | {k['queries']} | {k['avg_chars']:.0f} | {k['l0_miss']:.0%} / {k['l0_several']:.0%} | "
                     f"{ms(k[new])} | {ms(k[new]['cpu'])} | {ms(k[old])} | {ms(k[old]['cpu'])} | "
                     f"{k['speedup_p99']:.1f}x | {k['same_answer']:.0%} / {k['same_l1_hits']:.0%} |")
    a = r["all"]
    lines.append(f"| **all** | | | | {ms(a[new])} | {ms(a[new]['cpu'])} | {ms(a[old])} | {ms(a[old]['cpu'])} | "
                 f"{a[old]['p99_ms'] / a[new]['p99_ms']:.1f}x | |")
    names = list(next(iter(r["kinds"].values()))[new]["stages"])
    lines += ["", "Stages of L1, each timed on its own over the same queries (ms, p50 / p99)",
              "| query kind | variant | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
    for kind, k in r["kinds"].items():
        for name in VARIANTS:
            st = k[name]["stages"]
            lines.append(f"| {kind} | {name} | " + " | ".join(
                f"{st[n]['p50_ms']:.2f} / {st[n]['p99_ms']:.2f}" for n in names) + " |")
    lines += ["", f"cProfile, one pass of the lookups ({new}): the functions with the most time of their own "
              "(ms per lookup)", "| function | calls | own | cumulative |", "|---|---|---|---|"]
    lines += [f"| {p['function']} | {p['calls']:,} | {p['own_ms_per_lookup']:.2f} | {p['cum_ms_per_lookup']:.2f} |"
              for p in r["profile"]]
    p99, cpu99 = a[new]["p99_ms"], a[new]["cpu"]["p99_ms"]
    cached = " (built before, cached)" if r["build"].get("cached") else ""
    lines.append(f"index: kb.documents.reconcile() {r['build'].get('reconcile_s', '?')} s{cached}; "
                 f"section {r['seconds']:.0f} s; "
                 f"load average {' → '.join(str(v) for v in r['load_average'])} (start → end)")
    lines.append(f"goal: lookups that call L1 p99 <= {r['goal_p99_ms']:.0f} ms at ~20,000 chunks: "
                 f"{'met' if p99 <= r['goal_p99_ms'] else 'NOT met'} ({p99:.1f} ms wall, {cpu99:.1f} ms CPU)")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_zh", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=1238, help="generated product pages")
    parser.add_argument("--queries", type=int, default=150, help="queries per kind")
    parser.add_argument("--repeat", type=int, default=2, help="passes over the queries")
    parser.add_argument("--cache", type=Path, default=None,
                        help="keep the built knowledge base here and reuse it (same corpus version and size)")
    parser.add_argument("--dense", action="store_true",
                        help="embed with the built-in dense model too (query embedding timed in each lookup)")
    parser.add_argument("--against", default=None,
                        help="a commit whose code builds and asks the same corpus in the same run, after this one's "
                             "(its own knowledge base: another version may index differently)")
    parser.add_argument("--json", type=Path, default=Path("bench-zh.json"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    given = sys.argv[1:] if argv is None else argv
    report: dict[str, Any] = {"machine": machine(), "command": " ".join(["python -m benchmarks.bench_zh", *given])}
    with tempfile.TemporaryDirectory(prefix="kb-bench-zh-") as workdir:
        report["zh"] = bench_zh(Path(workdir), docs=args.docs, per_kind=args.queries, repeat=args.repeat,
                                cache=args.cache, dense=args.dense)
        if args.against:
            report["against"] = {"rev": args.against, **_other_version(
                args.against, Path(workdir), ["--docs", str(args.docs), "--queries", str(args.queries), "--repeat",
                                              str(args.repeat), *(["--dense"] if args.dense else [])])}
    m = report["machine"]
    return publish(args.json, report, "\n".join([
        f"machine: {m.get('cpu', '?')}, {m['cpus']} cores, {m.get('memory_gb', '?')} GiB, Python {m['python']}",
        *render_zh(report["zh"]), *render_against(report["zh"], report.get("against"))]))


def _other_version(rev: str, workdir: Path, args: list[str]) -> dict[str, Any]:
    """The same benchmark with `rev`'s code (its benchmarks and its kb_core), in a process of its own."""
    from benchmarks.bench_cold import _worktree

    with _worktree(rev) as code:
        return run_with_code(code, workdir, args)


def run_with_code(code: Path, workdir: Path, args: list[str]) -> dict[str, Any]:
    """This benchmark as the checkout at `code` has it (its benchmarks, its kb_core): the figures to compare."""
    from benchmarks.bench_cold import _PREAMBLE

    out = workdir / "against.json"
    script = _PREAMBLE.format(root=str(code)) + "from benchmarks.bench_zh import main; raise SystemExit(main())"
    subprocess.run([sys.executable, "-c", script, *args, "--json", str(out)], cwd=code, check=True,
                   capture_output=True, text=True, timeout=7200)
    other = json.loads(out.read_text(encoding="utf-8"))["zh"]
    return {"all": other["all"], "kinds": {k: {v: other["kinds"][k][v] for v in VARIANTS}
                                           for k in other["kinds"]}, "l1_mode": other.get("l1_mode")}


def render_against(mine: dict[str, Any], other: dict[str, Any] | None) -> list[str]:
    """This commit's L1-led lookups beside another version's, the default full-text search (`VARIANTS[0]`)."""
    if not other:
        return []
    rev, variant = other["rev"], VARIANTS[0]
    lines = ["", f"Beside {rev} (the same corpus and queries, its own knowledge base, run after this one; "
             f"{variant}; ms, p50 / p99):", f"| query kind | this commit | {rev} | ratio p99 ({rev} / this) |",
             "|---|---|---|---|"]
    rows = [(k, mine["kinds"][k][variant], other["kinds"][k][variant]) for k in mine["kinds"] if k in other["kinds"]]
    rows.append(("**all**", mine["all"][variant], other["all"][variant]))
    for kind, a, b in rows:
        lines.append(f"| {kind} | {a['p50_ms']:.1f} / {a['p99_ms']:.1f} | {b['p50_ms']:.1f} / {b['p99_ms']:.1f} | "
                     f"{b['p99_ms'] / a['p99_ms']:.2f}x |")
    return lines


if __name__ == "__main__":
    sys.exit(main())
