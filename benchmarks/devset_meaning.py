"""The meaning dev set: questions that share few words with the page they ask about.

    python -m benchmarks.devset build-meaning greptime --mirror /work/.mirror/GreptimeTeam+docs/repo --out DIR
    python -m benchmarks.devset build-meaning hertzbeat --mirror /work/.mirror/apache+hertzbeat/repo --out DIR
    cd DIR/greptime-zh && kb evaluate queries.jsonl --sync --json report.json

Each tree gives two builds, one per language: `OUT/<tree>-zh/` holds only the tree's Chinese pages and is asked
mostly in English, `OUT/<tree>-en/` holds only the English pages and is asked mostly in Chinese. Each has
`knowledge_base/<tree>/<lang>/...` (laid as `build` lays it) and `queries.jsonl`. Twins are a page and its
translation at the same path in the site (`Page.key`, the way `build` groups a page's language versions).

Kinds, each expecting pages of the build's language:
- `other-language title`, `other-language summary`, `other-language body sentence`: the twin's title (shared by
  at most three pages of its language: all their twins are expected), its summary (unique in its language), a
  prose sentence no other page of its language holds; expected: the page whose twin it came from. A text the
  page holds as well (an untranslated title such as `Kafka`, a sentence left in English) is skipped, and so is
  one that is not in the twin's script: neither asks in the other language;
- `other-language question`: a question of ours in the twin's language wrapping the twin's title;
- `paraphrased title`, `paraphrased summary`, `paraphrased sentence`: the page's own title, summary and first
  sentence that no other page holds, rewritten by rule in the page's language: cut to its main clause (a summary
  or sentence, before `, including ...`, `：`), words swapped for synonyms from a small table of ours
  (`_SYNONYMS`; at least one swap), clauses reordered, the statement made a question, function words dropped
  (`rules` says which). Kept only when its overlap with the page is at most `OVERLAP` (`--overlap`, 0.5): no
  more than half of what it says is in the page's words, so BM25 alone cannot carry it. Rule-made rewrites of a
  long sentence keep most of its words: few summaries and sentences pass (their counts are smaller), titles do.

Overlap: the share of a text's distinct full-text terms (`kb_core.testing.tokenize`: jieba's words, lower-cased,
stop words dropped, the terms BM25 matches on) that occur in the page (title, summary, body), a term counting
where a page term begins with it, as BM25's word-begin matches do. Terms that more than half of the build's
pages hold are left out (BM25's idf is nil there: `greptimedb` on every GreptimeDB page). For a paraphrase it is
measured on the rewritten text without the words of our question forms ("Is it true that ..."), so a long
question of ours cannot dilute it. Every query records its `overlap` (the other-language kinds too: there it
only describes), a paraphrase also its `rules` and the text it came from (`source`). A fixed seed makes a
rebuild give the same set; each kind is sampled down to `--per-kind` (80).
"""

from __future__ import annotations

import bisect
import json
import random
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path

from benchmarks.devset import SOURCES, Page, export, sentences
from kb_core.testing import tokenize

OVERLAP = 0.5

KINDS = ("other-language title", "other-language summary", "other-language body sentence",
         "other-language question", "paraphrased title", "paraphrased summary", "paraphrased sentence")

_HAN = re.compile(r"[\u4e00-\u9fff]")
_LANGS = ("en", "zh")

# Synonyms of ours, one word or phrase to a few others with no shared stem (BM25 matches on word beginnings).
_SYNONYMS = {
    "en": {
        "deploy": ("roll out", "set up"), "deploying": ("rolling out",), "deployment": ("rollout", "setup"),
        "deployments": ("rollouts",), "configure": ("set up", "adjust"), "configuring": ("setting up",),
        "configuration": ("settings", "setup"), "install": ("set up",), "installation": ("setup",),
        "create": ("make", "add"), "delete": ("remove", "erase"), "remove": ("delete",), "drop": ("discard",),
        "query": ("look up", "search"), "queries": ("lookups", "searches"), "querying": ("looking up",),
        "data": ("information", "records"), "use": ("work with", "employ"), "using": ("with", "via"),
        "overview": ("introduction", "summary"), "introduction": ("overview",), "guide": ("walkthrough", "how-to"),
        "quick start": ("getting started", "first steps"), "monitor": ("watch", "observe"),
        "monitoring": ("observability", "watching"), "manage": ("administer", "handle"),
        "management": ("administration",), "support": ("handle",), "supports": ("handles", "works with"),
        "supported": ("handled", "available"), "enable": ("turn on", "switch on"), "disable": ("turn off",),
        "start": ("launch", "begin"), "stop": ("halt",), "run": ("execute",), "running": ("executing",),
        "write": ("store", "save"), "writes": ("stores", "saves"), "writing": ("storing",), "read": ("load", "fetch"),
        "reads": ("loads", "fetches"), "migrate": ("move",), "migration": ("move", "transfer"),
        "upgrade": ("update",), "backup": ("copy",), "restore": ("recover",), "performance": ("speed",),
        "error": ("failure", "fault"), "errors": ("failures", "faults"), "issue": ("problem",),
        "example": ("sample",), "examples": ("samples",), "store": ("keep", "save"), "storage": ("persistence",),
        "metrics": ("measurements",), "logs": ("event records",), "alert": ("alarm", "notification"),
        "alerts": ("alarms", "notifications"), "alarm": ("alert",), "rule": ("policy",), "rules": ("policies",),
        "function": ("routine",), "functions": ("routines",), "limit": ("cap",), "limits": ("caps",),
        "connect": ("link", "attach"), "connection": ("link",), "user": ("account",), "users": ("accounts",),
        "permission": ("access right",), "permissions": ("access rights",), "authentication": ("sign-in",),
        "security": ("protection",), "release": ("version",), "features": ("capabilities",),
        "feature": ("capability",), "integrate": ("combine",), "integration": ("connector",),
        "integrations": ("connectors",), "ingest": ("load", "import"), "ingestion": ("loading", "import"),
        "export": ("dump",), "import": ("load",), "schema": ("structure",), "database": ("store",),
        "documentation": ("docs",), "settings": ("options",), "parameters": ("arguments",),
        "parameter": ("argument",), "command": ("instruction",), "commands": ("instructions",),
        "show": ("display",), "view": ("see",), "check": ("verify",), "learn": ("find out",),
        "describes": ("explains",), "explains": ("describes",), "introduces": ("presents",),
        "provides": ("offers",), "provide": ("offer",), "allows": ("lets",), "allow": ("let",),
        "requires": ("needs",), "default": ("standard",), "custom": ("own",), "automatically": ("on its own",),
        "multiple": ("several",), "various": ("different",), "new": ("fresh",), "update": ("change",),
        "modify": ("change",), "add": ("include",), "plugin": ("extension",), "plugins": ("extensions",),
        "cluster": ("group of nodes",), "table": ("relation",), "tables": ("relations",), "service": ("server",),
        "collect": ("gather",), "collection": ("gathering",), "define": ("declare",), "specify": ("state",),
        "build": ("compile",), "access": ("reach",), "compatible": ("interoperable",),
        "compatibility": ("interoperability",), "time series": ("temporal",), "send": ("push",),
        "receive": ("get",), "notification": ("message",), "template": ("pattern",), "templates": ("patterns",),
    },
    "zh": {
        "部署": ("安装", "搭建", "上线"), "配置": ("设置",), "设置": ("配置",), "安装": ("部署",),
        "创建": ("新建", "建立"),
        "删除": ("移除", "去掉"), "查询": ("检索", "查找"), "数据": ("信息",), "使用": ("运用", "借助"),
        "概述": ("简介", "总览"), "简介": ("概述",), "介绍": ("说明",), "快速开始": ("入门",), "快速入门": ("上手",),
        "监控": ("监测", "观测"), "管理": ("维护",), "支持": ("兼容",), "写入": ("导入", "录入"), "读取": ("读出",),
        "迁移": ("搬迁",), "升级": ("更新",), "备份": ("留存副本",), "恢复": ("还原",), "性能": ("速度",),
        "错误": ("故障",), "问题": ("疑问",), "示例": ("样例", "例子"), "存储": ("保存",), "指标": ("度量",),
        "日志": ("运行记录",), "告警": ("报警",), "规则": ("策略",), "函数": ("方法",), "限制": ("上限",),
        "连接": ("接入",), "用户": ("账户",), "权限": ("授权",), "认证": ("鉴权",), "安全": ("防护",),
        "发布": ("推出",), "功能": ("特性",), "集成": ("对接",), "导出": ("输出",), "导入": ("载入",),
        "文档": ("手册",), "参数": ("选项",), "命令": ("指令",), "查看": ("浏览",), "启动": ("开启",),
        "停止": ("终止",), "运行": ("执行",), "开启": ("打开",), "关闭": ("停用",), "定义": ("声明",),
        "集群": ("群集",), "节点": ("机器",), "服务": ("服务端",), "收集": ("采集",), "采集": ("收集",),
        "通知": ("消息",), "模板": ("样板",), "兼容": ("适配",), "自定义": ("自行定义",), "默认": ("缺省",),
        "多个": ("若干",), "新的": ("全新的",), "表": ("数据表",), "时序": ("时间序列",), "指南": ("教程",),
    },
}
# Chinese has no spaces: a swap must not cut a longer word (数据库 is not 信息库, 管理员 not 维护员).
_ZH_NOT_BEFORE = {"数据": "库源集类节", "使用": "率量", "管理": "员", "服务": "器端", "问题": "单", "表": "达示格明现",
                  "配置": "项文", "设置": "项", "支持": "者", "功能": "区", "指标": "数", "连接": "器池"}
_ZH_NOT_AFTER = {"表": "列代发图报外年时", "设置": "预", "服务": "微", "存储": "对", "限制": "无"}
_VERBS = {
    "en": {"deploy", "configure", "install", "create", "delete", "remove", "query", "use", "monitor", "manage",
           "enable", "disable", "start", "stop", "run", "write", "read", "migrate", "upgrade", "back", "restore",
           "connect", "integrate", "ingest", "export", "import", "set", "roll", "make", "add", "erase", "look",
           "search", "work", "employ", "watch", "observe", "administer", "handle", "turn", "switch", "launch",
           "begin", "halt", "execute", "store", "save", "load", "fetch", "move", "update", "copy", "recover",
           "link", "attach", "combine", "dump", "get", "send", "push", "build", "compile", "define", "declare",
           "gather", "collect", "change", "modify", "include", "adjust", "discard", "verify", "check", "reach"},
    "zh": set(
        "部署 配置 安装 创建 删除 查询 使用 监控 管理 设置 搭建 新建 建立 "
        "移除 去掉 检索 查找 迁移 搬迁 升级 更新 写入 导入 录入 读取 读出 "
        "导出 输出 连接 接入 开启 打开 关闭 停用 启动 停止 终止 运行 执行 "
        "集成 对接 备份 恢复 还原 定义 声明 查看 浏览 运用 借助 监测 观测 "
        "维护 上线 收集 采集".split()),
}
_FUNCTION_WORDS = {
    "en": re.compile(r"\b(?:the|a|an|of|that|which|is|are|will|can|just|also|very)\b\s*", re.IGNORECASE),
    "zh": re.compile(r"(?<![目端])的(?![确])|了(?![解])|(?<![之])地(?![址区点图方])|一个|一些|这个|该(?=[^\s])"),
}
_CONNECTIVES = {
    "en": re.compile(r"\s(in|on|with|for|from|into|using|via|by)\s", re.IGNORECASE),
    "zh": re.compile(r"(与|和|及)"),
}
# Where a summary or a sentence says what it is about; what follows lists details a short question leaves out.
_MAIN_CLAUSE = {
    "en": re.compile(r",? (?:including|such as|for example|e\.g\.|which|where|so that) |; |: | - | \("),
    "zh": re.compile(r"[，,]?(?:包括|例如|比如|其中|以便|从而)|[；：（(]| - "),
}
# Questions of ours, by the shape of what they wrap: a title that starts with a verb, another title, a statement.
_QUESTION_FORMS = {
    ("en", "verb"): ("How do I {text}?", "How can I {text}?", "What is the way to {text}?"),
    ("en", "noun"): ("What is {text}?", "Tell me about {text}.", "What should I know about {text}?",
                     "Where can I read about {text}?", "Can you explain {text} to me?"),
    ("en", "statement"): ("Is it true that {text}?", "Does the documentation say that {text}?",
                          "Which page explains that {text}?"),
    ("zh", "verb"): ("如何{text}？", "怎么{text}？", "{text}要怎么做？"),
    ("zh", "noun"): ("{text}是什么？", "什么是{text}？", "介绍一下{text}", "关于{text}有什么说明？",
                     "哪里可以看到{text}的文档？"),
    ("zh", "statement"): ("{text}吗？", "是不是{text}？", "听说{text}，是这样吗？"),
}


def _synonym_pattern(lang: str) -> re.Pattern[str]:
    words = sorted(_SYNONYMS[lang], key=len, reverse=True)
    if lang == "en":
        return re.compile(r"\b(" + "|".join(re.escape(w) for w in words) + r")\b", re.IGNORECASE)
    parts = []
    for word in words:
        before = f"(?<![{_ZH_NOT_AFTER[word]}])" if word in _ZH_NOT_AFTER else ""
        after = f"(?![{_ZH_NOT_BEFORE[word]}])" if word in _ZH_NOT_BEFORE else ""
        parts.append(before + re.escape(word) + after)
    return re.compile("(" + "|".join(parts) + ")")


_SYNONYM_PATTERNS = {lang: _synonym_pattern(lang) for lang in _LANGS}


def swap_synonyms(text: str, lang: str, rng: random.Random) -> tuple[str, int]:
    """Every word of the table swapped for one of its synonyms, and how many were swapped."""
    count = 0

    def swap(match: re.Match[str]) -> str:
        nonlocal count
        word = match.group(1)
        new = rng.choice(_SYNONYMS[lang][word.lower()])
        count += 1
        return new[0].upper() + new[1:] if word[0].isupper() else new

    return _SYNONYM_PATTERNS[lang].sub(swap, text), count


def _lower_first(text: str) -> str:
    """`Deploy GreptimeDB` -> `deploy GreptimeDB`; names (`GreptimeDB`, `SQL`) keep their capitals."""
    first = text.split(" ", 1)[0]
    return text[0].lower() + text[1:] if first[1:].islower() else text


def main_clause(text: str, lang: str) -> str:
    """The text up to where it starts listing details (`, including`, `：`, `（`), when that leaves three
    terms or more; else the text."""
    match = _MAIN_CLAUSE[lang].search(text)
    if match is None or len(tokenize(text[:match.start()])) < 3:
        return text
    return text[:match.start()].rstrip(" ，,")


def _split(text: str, lang: str) -> tuple[str, str, str] | None:
    """(head, connective, tail) at the first connective inside the text (`X on Y`; in Chinese `X与Y`)."""
    match = _CONNECTIVES[lang].search(text)
    if match is None or match.start() == 0 or not text[match.end():].strip():
        return None
    return text[:match.start()], match.group(1), text[match.end():]


def reorder(text: str, lang: str) -> str:
    """Two clauses swapped: at the first comma, else around the first connective (`X on Y` -> `on Y, X`; in
    Chinese `X与Y` -> `Y与X`). The text unchanged when it has neither."""
    end = "。" if lang == "zh" else "."
    body = text.rstrip(end + "?？")
    comma = "，" if lang == "zh" else ", "
    if comma in body:
        head, tail = body.split(comma, 1)
        if head and tail:
            return (tail + comma + (head if lang == "zh" else _lower_first(head))).strip()
    parts = _split(body, lang)
    if parts is None:
        return text
    head, connective, tail = parts
    if lang == "zh":
        # only short coordinated names (`指标与日志`): in a long sentence 和 often joins the last two of a list
        return tail + connective + head if len(head) <= 12 and len(tail) <= 12 else text
    return f"{connective.lower()} {tail}, {_lower_first(head)}"


def drop_function_words(text: str, lang: str) -> str:
    return re.sub(r"\s{2,}", " ", _FUNCTION_WORDS[lang].sub("", text)).strip()


def as_question(text: str, lang: str, form: str, rng: random.Random, front: bool = False) -> str:
    """A title as a how-to or what-is question (by its first word), a summary or sentence as a yes-no one.
    `front`: an English title's phrase after its first connective leads the question (`On Kubernetes, how do
    I roll out GreptimeDB?`), the reordering a title allows."""
    text = text.rstrip("。.？?！! ")
    lead = ""
    if front and form == "title" and lang == "en" and (parts := _split(text, lang)) and " " in parts[0]:
        head, connective, tail = parts
        lead, text = f"{connective.capitalize()} {tail}, ", head
    if form == "title":
        first = text.split(" ", 1)[0].lower()
        verb = first in _VERBS["en"] if lang == "en" else any(text.startswith(v) for v in _VERBS["zh"])
        shape = "verb" if verb else "noun"
    else:
        shape = "statement"
    if lang == "en" and (shape != "noun" or lead):
        text = _lower_first(text)
    question = rng.choice(_QUESTION_FORMS[(lang, shape)]).format(text=text)
    return lead + (_lower_first(question) if lead else question)


def paraphrase(text: str, lang: str, form: str, rng: random.Random) -> tuple[str, str, tuple[str, ...]] | None:
    """(the question, its text without our question's words, the rules applied), or None when no word of the
    table is in the text: without a swap the rest only moves the page's own words around."""
    rules: list[str] = []
    if form != "title" and rng.random() < 0.7:
        shorter = main_clause(text, lang)
        if shorter != text:
            text, rules = shorter, ["main clause"]
    core, swapped = swap_synonyms(text, lang, rng)
    if not swapped:
        return None
    rules.append("synonyms")
    front = False
    if rng.random() < 0.5:
        moved = reorder(core, lang) if form != "title" or lang == "zh" else core
        front = form == "title" and lang == "en" and _split(core, lang) is not None
        if moved != core or front:
            core, rules = moved, [*rules, "reordered clauses"]
    if rng.random() < 0.5:
        shorter = drop_function_words(core, lang)
        if shorter != core and shorter:
            core, rules = shorter, [*rules, "dropped function words"]
    if form == "title" or rng.random() < 0.7:
        return as_question(core, lang, form, rng, front=front), core, (*rules, "question form")
    return core, core, tuple(rules)


class Terms:
    """A page's full-text terms, for the overlap of a text with it."""

    def __init__(self, page: Page):
        self.terms = sorted(set(tokenize(f"{page.title}\n{page.summary}\n{page.body}")))

    def holds(self, term: str) -> bool:
        i = bisect.bisect_left(self.terms, term)
        return i < len(self.terms) and self.terms[i].startswith(term)


def common_terms(pages: Iterable[Terms]) -> frozenset[str]:
    """The terms more than half the pages hold: BM25 gives them no weight (idf <= 0), so they say nothing
    about which page a text is close to (`greptimedb` on GreptimeDB's pages)."""
    pages = list(pages)
    counts = Counter(t for p in pages for t in p.terms)
    return frozenset(t for t, n in counts.items() if n > len(pages) / 2)


def overlap(text: str, terms: Terms, common: frozenset[str] = frozenset()) -> float:
    """The share of the text's distinct terms, the `common` ones left out, that the page holds (1.0 for a text
    with no other term: nothing in it tells the page apart, so it is not a paraphrase that tests meaning)."""
    mine = set(tokenize(text)) - common
    return round(sum(terms.holds(t) for t in mine) / len(mine), 3) if mine else 1.0


def in_language(text: str, lang: str) -> bool:
    """Whether the text is written in the language's script: Chinese has Han characters, English none."""
    han = len(_HAN.findall(text))
    return han >= 2 if lang == "zh" else han == 0


def derive_meaning(pages: list[Page], only: str, seed: int = 31, per_kind: int = 80,
                   threshold: float = OVERLAP) -> list[dict[str, object]]:
    """The labelled queries of the build that holds only the pages of language `only`."""
    rng = random.Random(seed)
    mine = [p for p in pages if p.lang == only]
    terms = {p.path: Terms(p) for p in mine}
    common = common_terms(terms.values())
    candidates: dict[str, list[dict[str, object]]] = {kind: [] for kind in KINDS}

    def add(kind: str, query: str, expected: Iterable[str], lang: str, target: str, text: str | None = None,
            **extra: object) -> None:
        candidates[kind].append({"query": query, "kind": kind, "expected": sorted(set(expected)), "lang": lang,
                                 "overlap": overlap(query if text is None else text, terms[target], common),
                                 **extra})

    _other_language(pages, only, rng, add)
    _paraphrases(mine, terms, common, only, rng, threshold, add)
    queries: list[dict[str, object]] = []
    for kind in KINDS:
        chosen = candidates[kind]
        if len(chosen) > per_kind:
            chosen = rng.sample(chosen, per_kind)
        queries.extend(chosen)
    return queries


def twins(pages: Iterable[Page]) -> dict[str, dict[str, Page]]:
    """Translation groups: the site path (`Page.key`) -> language -> page."""
    groups: dict[str, dict[str, Page]] = defaultdict(dict)
    for page in pages:
        groups[page.key][page.lang] = page
    return groups


def _other_language(pages: list[Page], only: str, rng: random.Random, add) -> None:  # noqa: ANN001
    """The twins' titles, summaries, sentences and title questions, asked of the pages of `only`."""
    other = next(lang for lang in _LANGS if lang != only)
    groups = twins(pages)
    theirs = [p for p in pages if p.lang == other and only in groups[p.key]]
    everyone = [p for p in pages if p.lang == other]
    titles = Counter(p.title.lower() for p in everyone if p.title)
    summaries = Counter(p.summary.lower() for p in everyone if p.summary)
    sentence_count = Counter(s.lower() for p in everyone for s in set(sentences(p)))
    for src in theirs:
        dst = groups[src.key][only]
        held = " ".join((dst.title, dst.summary, *dst.prose)).lower()
        title = src.title
        if title and len(title) >= 3 and titles[title.lower()] <= 3 and in_language(title, other) \
                and title.lower() not in held:
            expected = [groups[p.key][only].path for p in theirs if p.title.lower() == title.lower()]
            add("other-language title", title, expected, other, dst.path)
            question = as_question(title, other, "title", rng)
            add("other-language question", question, expected, other, dst.path, text=title)
        summary = src.summary
        if summary and len(summary) >= 20 and summaries[summary.lower()] == 1 and in_language(summary, other) \
                and summary.lower() not in held:
            add("other-language summary", summary, [dst.path], other, dst.path)
        unique = [s for s in dict.fromkeys(sentences(src)) if sentence_count[s.lower()] == 1
                  and s.lower() not in held]
        if unique:
            add("other-language body sentence", rng.choice(unique), [dst.path], other, dst.path)


def _paraphrases(mine: list[Page], terms: dict[str, Terms], common: frozenset[str], lang: str, rng: random.Random,
                 threshold: float, add) -> None:  # noqa: ANN001
    """The pages' own titles, summaries and first sentences in other words, when they share few with the page."""
    titles = Counter(p.title.lower() for p in mine if p.title)
    summaries = Counter(p.summary.lower() for p in mine if p.summary)
    sentence_count = Counter(s.lower() for p in mine for s in set(sentences(p)))
    for page in mine:
        sources = []
        if page.title and len(page.title) >= 3 and titles[page.title.lower()] <= 3:
            same = [p.path for p in mine if p.title.lower() == page.title.lower()]
            sources.append(("paraphrased title", "title", page.title, same))
        if page.summary and len(page.summary) >= 20 and summaries[page.summary.lower()] == 1:
            sources.append(("paraphrased summary", "summary", page.summary, [page.path]))
        first = next((s for s in sentences(page) if sentence_count[s.lower()] == 1), None)
        if first:
            sources.append(("paraphrased sentence", "sentence", first, [page.path]))
        for kind, form, text, expected in sources:
            for _ in range(3):  # another draw of synonyms and rules may share fewer words
                made = paraphrase(text, lang, form, rng)
                if made is None:
                    break
                question, core, rules = made
                if overlap(core, terms[page.path], common) <= threshold:
                    add(kind, question, expected, lang, page.path, text=core, rules=list(rules), source=text)
                    break


def build(tree: str, mirror: Path, out: Path, seed: int = 31, per_kind: int = 80, threshold: float = OVERLAP,
          langs: Iterable[str] = _LANGS) -> Iterator[tuple[Path, list[Page], list[dict[str, object]]]]:
    """For each language of `langs`, OUT/<tree>-<lang>/ with only that language's pages and its queries."""
    for only in langs:
        folder = out / f"{tree}-{only}"
        pages = export(tree, mirror, folder, write=(only,))
        queries = derive_meaning(pages, only, seed=seed, per_kind=per_kind, threshold=threshold)
        with open(folder / "queries.jsonl", "w", encoding="utf-8") as fh:
            for query in queries:
                fh.write(json.dumps(query, ensure_ascii=False) + "\n")
        yield folder, [p for p in pages if p.lang == only], queries


def record(report_path: Path, build_name: str, label: str, model: str, results: Path, wall: float | None = None,
           code: str | None = None, l1: str | None = None) -> int:
    """Keep a `kb evaluate --json` report's figures (no query text: it quotes the tree) under the build, the
    label and the model (`off`: BM25 only, `on`: the dense model), so that the page can set both side by side."""
    import datetime as dt

    from benchmarks.common import machine

    tree, only = build_name.rsplit("-", 1)
    source = SOURCES[tree]
    report = json.loads(report_path.read_text(encoding="utf-8"))
    data = json.loads(results.read_text(encoding="utf-8")) if results.exists() else {"builds": {}}
    entry = data["builds"].setdefault(build_name, {
        "tree": tree, "only": only, "source": f"github.com/{source.repo}", "commit": source.commit,
        "licence": source.licence, "runs": {}})
    run = {"date": dt.date.today().isoformat(), "l1": l1 or ("BM25 only" if model == "off" else "hybrid"),
           "machine": machine(), "kinds": report["kinds"], "overall": report["overall"]}
    if wall is not None:
        run["wall_seconds"] = wall
    if code:
        run["code"] = code
    entry["runs"].setdefault(label, {})[model] = run
    results.write_text(json.dumps(data, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    print(f"recorded {build_name} / {label} / model {model} in {results}")
    return 0
