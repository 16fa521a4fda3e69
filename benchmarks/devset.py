"""The dev set: real public documentation trees and labelled queries derived from every page.

    python -m benchmarks.devset build greptime --mirror /work/.mirror/GreptimeTeam+docs/repo --out /tmp/devset
    python -m benchmarks.devset build hertzbeat --mirror /work/.mirror/apache+hertzbeat/repo --out /tmp/devset
    cd /tmp/devset/greptime && kb evaluate queries.jsonl --sync --json report.json

`--mirror` is a git directory of the source repository (the search tool's `fetch github:OWNER/NAME` brings
one; `git clone --bare https://github.com/OWNER/NAME` works as well). The pinned commit of each tree is in
`SOURCES`; `build` exports that commit's English and Chinese pages to `OUT/<tree>/knowledge_base/<tree>/{en,zh}/`
(one category per tree; the path is the page's path in the site) and writes `OUT/<tree>/queries.jsonl`.
Neither the pages nor the derived queries enter this repository: only this script and the figures do.

The queries are derived from the pages alone, with a fixed seed, so a rebuild gives the same set:
- `title`: the page's title (frontmatter `title`, else its first `# ` heading); every page of that language
  with the same title is expected, and titles shared by more than three pages are skipped;
- `summary`: the frontmatter `summary` (or `description`), when no other page has the same one;
- `body sentence`: a prose sentence of the body that no other page of the language contains;
- `identifier`: a code-like word of the body (`snake_case`, `kebab-case`, `dotted.names`, `camelCase`,
  letters with digits) that at most the page and its translation contain;
- `keyword in a sentence`: a keyword only the page (and its translation) claims, inside a question of ours;
- `typo'd identifier`: one or two edits (drop, swap, double, replace a letter) of an identifier keyword or of
  a body identifier as above, bare or inside a question; the edited word occurs nowhere in the tree;
- `off-topic question` and `unknown code`: questions of ours no documentation tree answers and code-shaped
  words that occur nowhere in the tree (`expected` empty: the answer must be `found: false`).
A query expects the page it was derived from in all its language versions (the answer's language is
scored apart, as "in the query's language"). Each kind is sampled down to `--per-kind` queries (default 80),
so a tree asks about 600.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from kb_core import KnowledgeIndex, parse_frontmatter


@dataclass(frozen=True)
class Source:
    repo: str
    commit: str
    licence: str
    # language -> folder of that language's current pages in the repository
    folders: tuple[tuple[str, str], ...]


# Trees with `keywords` in their frontmatter, in English and Chinese, under a permissive licence. Not used,
# because they are held out for acceptance: apache/apisix, nacos-group/nacos-group.github.io, pingcap/docs-cn.
SOURCES: dict[str, Source] = {
    "greptime": Source("GreptimeTeam/docs", "fc8e02ff03c5280822a84059e832301106f38e24", "Apache-2.0",
                       (("en", "docs"), ("zh", "i18n/zh/docusaurus-plugin-content-docs/current"))),
    "hertzbeat": Source("apache/hertzbeat", "f64da5fcf70c969a333268f0273964cb06bb49d0", "Apache-2.0",
                        (("en", "home/docs"), ("zh", "home/i18n/zh-cn/docusaurus-plugin-content-docs/current"))),
}

KINDS = ("title", "summary", "body sentence", "identifier", "keyword in a sentence", "typo'd identifier",
         "off-topic question", "unknown code")

# Questions of ours that no product documentation answers.
_OFF_TOPIC = {
    "en": ("What is the capital of France?", "How long should I boil an egg for a soft yolk?",
           "Who won the football world cup in 1998?", "What is a good name for a golden retriever puppy?",
           "How do I remove a red wine stain from a carpet?", "Which planets in the solar system have rings?",
           "What is the best time of year to visit Kyoto?", "How many strings does a cello have?",
           "Recommend a novel to read on a long flight.", "How do I grow tomatoes on a balcony?",
           "What rhymes with orange?", "How far is the moon from the earth?",
           "What should I pack for a weekend of hiking?", "Why is the sky blue during the day?",
           "How do I change a flat bicycle tyre?", "What is the plot of Hamlet in two sentences?",
           "Which wine goes with grilled salmon?", "How do penguins keep their eggs warm?",
           "What are the rules of chess castling?", "How do I make sourdough starter at home?"),
    "zh": ("法国的首都是哪里？", "红烧肉怎么做才好吃？", "明天会下雨吗？", "推荐几本适合假期读的小说。",
           "怎么给猫剪指甲？", "长城有多长？", "学游泳要多久才能学会？", "周末去哪里爬山比较好？",
           "月亮离地球有多远？", "怎样才能睡得更好？", "西红柿炒鸡蛋先放哪个？", "熊猫每天吃多少竹子？",
           "如何去除衣服上的油渍？", "春节有哪些传统习俗？", "怎么养一盆绿萝？", "冬天怎么保养皮肤？",
           "跑马拉松前要准备什么？", "为什么天空是蓝色的？", "怎样泡一壶好茶？", "自行车胎漏气了怎么补？"),
}
_KEYWORD_QUESTIONS = {
    "en": ("How do I configure {kw}?", "What does {kw} do and when should I use it?",
           "Is there an example of {kw} somewhere?", "I need help with {kw} in production.",
           "Where can I read about {kw}?"),
    "zh": ("{kw} 怎么配置？", "请问 {kw} 是做什么用的？", "有没有 {kw} 的示例？", "生产环境里 {kw} 要注意什么？",
           "在哪里可以看到 {kw} 的说明？"),
}
_TYPO_QUESTIONS = {
    "en": ("how do I set {kw}", "{kw} does not work", "what is {kw} for"),
    "zh": ("{kw} 怎么设置", "{kw} 不生效", "{kw} 是什么意思"),
}

_IDENTIFIER = re.compile(r"(?<![\w./-])([A-Za-z][A-Za-z0-9]*(?:[_.-][A-Za-z0-9]+)+|[a-z]+[A-Z][A-Za-z0-9]*"
                         r"|[A-Za-z]+[0-9]+[A-Za-z0-9]*)(?![\w/-])")
_WORDS = re.compile(r"[A-Za-z0-9_.-]+")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_HAN = re.compile(r"[\u4e00-\u9fff]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])|(?<=[。！？])")
# emphasis and code marks; an underscore only at a word's edge (`BUILD_INFO`, `max_execution_time` keep theirs)
_MARKUP = re.compile(r"`+|\*{1,3}|(?<![0-9A-Za-z])_{1,3}|_{1,3}(?![0-9A-Za-z])")


@dataclass
class Page:
    path: str  # relative to knowledge_base/: <tree>/<lang>/<path in the site>
    lang: str
    key: str  # the path without the language: the translation group
    title: str
    summary: str
    keywords: tuple[str, ...]
    body: str
    prose: tuple[str, ...]


def export(tree: str, mirror: Path, out: Path, write: Collection[str] | None = None) -> list[Page]:
    """Every page of the tree's languages; those of the languages in `write` (all by default) are also written
    under `out/knowledge_base/`. A one-language build still reads the other language: its pages are the twins
    the questions come from."""
    source = SOURCES[tree]
    pages: list[Page] = []
    # the folder of the knowledge base that will hold the pages: its path rule decides which ones it refuses
    base = KnowledgeIndex("knowledge_base", app_root=out).folder
    for lang, folder in source.folders:
        names = _git(mirror, "ls-tree", "-r", "--name-only", source.commit, "--", folder + "/").splitlines()
        for name in sorted(names):
            if not name.endswith((".md", ".mdx")):
                continue
            rel = name[len(folder) + 1:]
            if base.place_problem(f"{tree}/{lang}/{rel}") is not None:
                continue  # the path rule refuses the page (`usage-&-billing/`): nothing could answer about it
            text = _git(mirror, "show", f"{source.commit}:{name}")
            if write is None or lang in write:
                target = out / "knowledge_base" / tree / lang / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
            pages.append(_page(f"{tree}/{lang}/{rel}", lang, rel, text))
    return pages


def _git(mirror: Path, *args: str) -> str:
    return subprocess.run(["git", f"--git-dir={mirror}", *args], check=True, capture_output=True,
                          text=True).stdout


def _page(path: str, lang: str, key: str, text: str) -> Page:
    meta = parse_frontmatter(text)
    body = text
    if text.startswith("---"):
        end = text.find("\n---", 3)
        body = text[end + 4:] if end > 0 else text
    prose = tuple(_prose_lines(body))
    heading = next((line[2:].strip() for line in body.splitlines() if line.startswith("# ")), "")
    title = (meta.title if meta else "") or _plain(heading)
    return Page(path, lang, key.rsplit(".", 1)[0], title, meta.summary if meta else "",
                meta.keywords if meta else (), body, prose)


def _plain(text: str) -> str:
    text = _LINK.sub(r"\1", text)
    text = re.sub(r"\{#[^}]*\}", "", text)
    return _MARKUP.sub("", text).strip()


def _prose_lines(body: str) -> Iterator[str]:
    fence = None
    for raw in body.splitlines():
        line = raw.strip()
        if fence:
            if line.startswith(fence):
                fence = None
            continue
        if line.startswith(("```", "~~~")):
            fence = line[:3]
            continue
        if (not line or line.startswith(("#", "|", "<", ":::", "import ", "export ", "!", ">", "{", "-->"))
                or line.endswith(">")):
            continue
        line = re.sub(r"^([-*+]|\d+\.)\s+", "", line)
        yield _plain(line)


def sentences(page: Page) -> Iterator[str]:
    for line in page.prose:
        for part in _SENTENCE_END.split(line):
            part = part.strip()
            if page.lang == "zh":
                if 12 <= len(part) <= 90 and len(_HAN.findall(part)) >= 8:
                    yield part
            elif 50 <= len(part) <= 220 and len(part.split()) >= 8 and not _HAN.search(part):
                yield part


def identifiers(page: Page) -> set[str]:
    found = set()
    for match in _IDENTIFIER.finditer(_LINK.sub(r"\1", page.body)):
        word = match.group(1).strip(".-_")
        if 6 <= len(word) <= 40 and not word.lower().startswith(("http", "www.")) and not re.fullmatch(
                r"v?[\d.]+|[A-Za-z]+\.(md|mdx|png|jpg|svg|html)", word):
            found.add(word)
    return found


def derive(pages: list[Page], seed: int = 31, per_kind: int = 80) -> list[dict[str, object]]:
    rng = random.Random(seed)
    by_lang: dict[str, list[Page]] = defaultdict(list)
    for page in pages:
        by_lang[page.lang].append(page)
    vocabulary = {w.lower() for p in pages for w in _WORDS.findall(p.body + " " + " ".join(p.keywords))}
    candidates: dict[str, list[dict[str, object]]] = {kind: [] for kind in KINDS}
    key_of = {p.path: p.key for p in pages}

    group_of: dict[str, list[str]] = defaultdict(list)
    for page in pages:
        group_of[page.key].append(page.path)

    def add(kind: str, query: str, expected: Iterable[str], lang: str) -> None:
        # A page's other language versions are the same page: the answer's language is scored on its own.
        paths = {member for path in expected for member in group_of[key_of[path]]}
        candidates[kind].append({"query": query, "kind": kind, "expected": sorted(paths), "lang": lang})

    # Who contains what: an identifier or a keyword is usable when only one translation group holds it.
    ident_pages: dict[str, set[str]] = defaultdict(set)
    keyword_pages: dict[str, set[str]] = defaultdict(set)
    for page in pages:
        for word in identifiers(page):
            ident_pages[word.lower()].add(page.path)
        for kw in page.keywords:
            keyword_pages[kw.lower()].add(page.path)

    def one_group(paths: set[str]) -> bool:
        return len({key_of[p] for p in paths}) == 1

    for lang, group in by_lang.items():
        titles = Counter(p.title.lower() for p in group if p.title)
        summaries = Counter(p.summary.lower() for p in group if p.summary)
        sentence_count = Counter(s.lower() for p in group for s in set(sentences(p)))
        for page in group:
            if page.title and titles[page.title.lower()] <= 3 and len(page.title) >= 3:
                add("title", page.title, (p.path for p in group if p.title.lower() == page.title.lower()), lang)
            if page.summary and summaries[page.summary.lower()] == 1 and len(page.summary) >= 20:
                add("summary", page.summary, [page.path], lang)
            unique = [s for s in dict.fromkeys(sentences(page)) if sentence_count[s.lower()] == 1]
            if unique:
                add("body sentence", rng.choice(unique), [page.path], lang)
            idents = sorted(w for w in identifiers(page) if one_group(ident_pages[w.lower()]))
            if idents:
                word = rng.choice(idents)
                add("identifier", word, ident_pages[word.lower()], lang)
            own = [kw for kw in page.keywords if one_group(keyword_pages[kw.lower()]) and len(kw) >= 3]
            if own:
                kw = rng.choice(own)
                add("keyword in a sentence", rng.choice(_KEYWORD_QUESTIONS[lang]).format(kw=kw),
                    keyword_pages[kw.lower()], lang)
            typo_sources = [kw for kw in own if _IDENTIFIER.fullmatch(kw) and len(kw) >= 6] or idents
            for _ in range(5):
                if not typo_sources:
                    break
                word = rng.choice(typo_sources)
                typo = _typo(word, rng)
                if typo.lower() in vocabulary or typo.lower() == word.lower():
                    continue
                expected = keyword_pages.get(word.lower()) or ident_pages[word.lower()]
                query = typo if rng.random() < 0.5 else rng.choice(_TYPO_QUESTIONS[lang]).format(kw=typo)
                add("typo'd identifier", query, expected, lang)
                break
        for question in _OFF_TOPIC[lang]:
            add("off-topic question", question, [], lang)
    for code in _unknown_codes(ident_pages, vocabulary, rng, per_kind):
        add("unknown code", code, [], "en")

    queries: list[dict[str, object]] = []
    for kind in KINDS:
        chosen = candidates[kind]
        if len(chosen) > per_kind:
            chosen = rng.sample(chosen, per_kind)
        queries.extend(chosen)
    return queries


def _typo(word: str, rng: random.Random) -> str:
    letters = [i for i, c in enumerate(word) if c.isalpha()]
    chars = list(word)
    for _ in range(rng.choice((1, 1, 2))):
        i = rng.choice(letters[1:] or letters)
        op = rng.choice(("drop", "swap", "double", "replace"))
        if op == "drop" and len(chars) > 5:
            del chars[i]
        elif op == "swap" and i + 1 < len(chars):
            chars[i], chars[i + 1] = chars[i + 1], chars[i]
        elif op == "double":
            chars.insert(i, chars[i])
        else:
            chars[i] = rng.choice([c for c in "aeiourstnl" if c != chars[i].lower()])
        letters = [j for j, c in enumerate(chars) if c.isalpha()]
    return "".join(chars)


def _unknown_codes(ident_pages: dict[str, set[str]], vocabulary: set[str], rng: random.Random,
                   count: int) -> Iterator[str]:
    """Code-shaped words in the tree's own style that occur nowhere: a real identifier's shape, new parts."""
    shapes = sorted(ident_pages)
    made = 0
    while shapes and made < count:
        word = rng.choice(shapes)
        new = re.sub(r"[a-z]+", lambda m: "".join(rng.choice("bcdfghjklmnpqrstvwxz") for _ in m.group()),
                     word)
        new = re.sub(r"\d", lambda m: rng.choice("0123456789"), new)
        if new.lower() not in vocabulary and len(new) >= 6:
            made += 1
            yield new.upper() if rng.random() < 0.3 else new


def _record(tree: str, report_path: Path, label: str, l1: str, results: Path) -> int:
    """The figures only: the failed queries quote the tree's text, which stays out of the repository."""
    import datetime as dt

    from benchmarks.common import machine

    report = json.loads(report_path.read_text(encoding="utf-8"))
    data = json.loads(results.read_text(encoding="utf-8")) if results.exists() else {"trees": {}}
    source = SOURCES[tree]
    entry = data["trees"].setdefault(tree, {"source": f"github.com/{source.repo}", "commit": source.commit,
                                            "licence": source.licence, "runs": {}})
    entry["runs"][label] = {"date": dt.date.today().isoformat(), "l1": l1, "machine": machine(),
                            "kinds": report["kinds"], "overall": report["overall"]}
    results.write_text(json.dumps(data, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    print(f"recorded {tree} / {label} in {results}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.devset", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="export a tree and derive its labelled queries")
    build.add_argument("tree", choices=sorted(SOURCES))
    build.add_argument("--mirror", required=True, type=Path, help="git directory of the source repository")
    build.add_argument("--out", required=True, type=Path, help="folder for OUT/<tree>/ (outside the repository)")
    build.add_argument("--per-kind", type=int, default=80)
    build.add_argument("--seed", type=int, default=31)
    meaning = sub.add_parser("build-meaning", help="one-language builds of a tree asked in the other language "
                                                   "and in paraphrases (benchmarks/devset_meaning.py)")
    meaning.add_argument("tree", choices=sorted(SOURCES))
    meaning.add_argument("--mirror", required=True, type=Path, help="git directory of the source repository")
    meaning.add_argument("--out", required=True, type=Path,
                         help="folder for OUT/<tree>-en/ and OUT/<tree>-zh/ (outside the repository)")
    meaning.add_argument("--only", choices=("en", "zh"), action="append",
                         help="the language of the build's pages (default: both builds)")
    meaning.add_argument("--per-kind", type=int, default=80)
    meaning.add_argument("--seed", type=int, default=31)
    meaning.add_argument("--overlap", type=float, default=0.5,
                         help="keep a paraphrase whose overlap with its page is at most this")
    sub.add_parser("sources", help="print the trees, commits and licences")
    record = sub.add_parser("record", help="keep a `kb evaluate --json` report's figures (no query text) in "
                                           "docs/devset-results.json under a label, e.g. before / after")
    record.add_argument("tree", choices=sorted(SOURCES))
    record.add_argument("report", type=Path)
    record.add_argument("--label", required=True)
    record.add_argument("--l1", default="BM25 only", help="what L1 ran on, for the table's heading")
    record.add_argument("--results", type=Path, default=Path(__file__).resolve().parents[1] / "docs" /
                        "devset-results.json")
    record_meaning = sub.add_parser("record-meaning", help="keep a meaning build's `kb evaluate --json` figures in "
                                                          "docs/devset-meaning-results.json, model off or on")
    record_meaning.add_argument("build", help="<tree>-<lang>, e.g. greptime-zh")
    record_meaning.add_argument("report", type=Path)
    record_meaning.add_argument("--label", required=True)
    record_meaning.add_argument("--model", choices=("off", "on"), required=True,
                                help="off: BM25 only (KB_EMBEDDING_FALLBACK=none); on: the dense model")
    record_meaning.add_argument("--l1", help="what L1 ran on, as the run printed it")
    record_meaning.add_argument("--wall", type=float, help="the run's wall time in seconds")
    record_meaning.add_argument("--code", help="the commit of the code that answered")
    record_meaning.add_argument("--results", type=Path, default=Path(__file__).resolve().parents[1] / "docs" /
                                "devset-meaning-results.json")
    args = parser.parse_args(argv)
    if args.command in ("build-meaning", "record-meaning"):
        return _meaning(args)
    if args.command == "record":
        return _record(args.tree, args.report, args.label, args.l1, args.results)
    if args.command == "sources":
        for name, source in SOURCES.items():
            folders = ", ".join(f"{lang}: {folder}" for lang, folder in source.folders)
            print(f"{name}: github.com/{source.repo} @ {source.commit[:12]} ({source.licence}; {folders})")
        return 0
    out = args.out / args.tree
    pages = export(args.tree, args.mirror, out)
    queries = derive(pages, seed=args.seed, per_kind=args.per_kind)
    with open(out / "queries.jsonl", "w", encoding="utf-8") as fh:
        for query in queries:
            fh.write(json.dumps(query, ensure_ascii=False) + "\n")
    counts = Counter(str(q["kind"]) for q in queries)
    print(f"{len(pages)} pages in {out / 'knowledge_base'}; {len(queries)} queries in {out / 'queries.jsonl'}")
    for kind in KINDS:
        print(f"  {kind}: {counts[kind]}")
    return 0


def _meaning(args: argparse.Namespace) -> int:
    # imported here: benchmarks/devset_meaning.py builds on this module
    from benchmarks import devset_meaning

    if args.command == "record-meaning":
        return devset_meaning.record(args.report, args.build, args.label, args.model, args.results, wall=args.wall,
                                     code=args.code, l1=args.l1)
    for folder, pages, queries in devset_meaning.build(args.tree, args.mirror, args.out, seed=args.seed,
                                                       per_kind=args.per_kind, threshold=args.overlap,
                                                       langs=args.only or ("en", "zh")):
        counts = Counter(str(q["kind"]) for q in queries)
        print(f"{len(pages)} pages in {folder / 'knowledge_base'}; {len(queries)} queries in "
              f"{folder / 'queries.jsonl'}")
        for kind in devset_meaning.KINDS:
            print(f"  {kind}: {counts[kind]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
