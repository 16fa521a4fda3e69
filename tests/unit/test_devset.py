"""The meaning dev set's derivation (benchmarks/devset_meaning.py) on a tiny bilingual tree of our own words, laid
out as a git repository the way the real trees' mirrors are: the one-language builds, the twins' pairing, the
pages each query expects, the overlap filter, and the same set on every rebuild."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import pytest
from support.stores import make_settings

from benchmarks import devset, devset_meaning
from benchmarks.devset import Source

TREE = "tiny"

# key -> (English page, Chinese page); frontmatter title and summary, a body of prose sentences
PAGES = {
    "ops/deploy": (
        ("Deploy the cluster on Kubernetes",
         "How to deploy a three node cluster on Kubernetes with the operator chart.",
         "The operator creates every node of the cluster from one chart file kept in the repository.\n\n"
         "You can scale the frontend pods later without stopping any of the incoming writes."),
        ("在 Kubernetes 上部署集群", "介绍如何使用 operator chart 在 Kubernetes 上部署三节点集群。",
         "operator 根据仓库里的一个 chart 文件创建集群中的每一个节点。\n\n"
         "之后可以在不停止写入的情况下随时扩容前端容器组。")),
    "ops/alerts": (
        ("Configure alert rules", "Set thresholds for alerts and send notifications to the team chat when a rule "
         "fires.", "A rule compares the latest sample with its threshold once every minute by default.\n\n"
         "When the comparison holds for five minutes in a row the team chat receives a message."),
        ("配置告警规则", "为告警设置阈值，并在规则触发时向团队群聊发送通知。",
         "默认情况下，规则每分钟把最新的采样值和阈值比较一次。\n\n"
         "比较结果连续五分钟成立时，团队群聊会收到一条消息。")),
    "ops/backup": (
        ("Back up and restore data", "Copy the data folder to object storage every night and restore it after a "
         "failure.", "The nightly job copies the whole data folder to the bucket named in the settings file.\n\n"
         "Restoring stops the server, replaces the folder and starts the server again."),
        ("备份与恢复数据", "每天夜里把数据目录复制到对象存储，故障之后再把它恢复回来。",
         "夜间任务会把整个数据目录复制到设置文件中指定的存储桶里。\n\n"
         "恢复时先停止服务器，替换目录，然后重新启动服务器。")),
    # the same title in both languages (an untranslated product name): not a question in the other language
    "connectors/kafka": (
        ("Kafka", "Read messages from a Kafka topic and write each of them as one row of a table.",
         "Each message of the topic becomes one row, its key and timestamp kept as columns of that row."),
        ("Kafka", "从 Kafka 主题读取消息，并把每条消息写成表中的一行。",
         "主题中的每条消息都会变成一行，消息的键和时间戳作为这一行的列保存下来。")),
}
ONLY_EN = ("reference/glossary", ("Glossary of terms", "The words this documentation uses and what each one means.",
                                  "A shard is the part of a table that one server keeps on its own disk."))
ONLY_ZH = ("faq/common", ("常见问题解答", "用户最常问到的问题以及对应的回答。",
                          "如果服务器无法启动，请先检查端口是否已经被其他程序占用。"))


def _markdown(title: str, summary: str, body: str) -> str:
    return f"---\ntitle: {title}\nsummary: {summary}\n---\n\n# {title}\n\n{body}\n"


@pytest.fixture
def tiny_tree(tmp_path, monkeypatch):
    """A git directory holding the tree (English under docs/, Chinese under i18n/zh/), registered as a source."""
    repo = tmp_path / "repo"
    files = {f"docs/{key}.md": _markdown(*en) for key, (en, _) in PAGES.items()}
    files |= {f"i18n/zh/{key}.md": _markdown(*zh) for key, (_, zh) in PAGES.items()}
    files[f"docs/{ONLY_EN[0]}.md"] = _markdown(*ONLY_EN[1])
    files[f"i18n/zh/{ONLY_ZH[0]}.md"] = _markdown(*ONLY_ZH[1])
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text, encoding="utf-8")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "tiny"], check=True)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    monkeypatch.setitem(devset.SOURCES, TREE, Source("own/tiny", commit, "CC0-1.0",
                                                     (("en", "docs"), ("zh", "i18n/zh"))))
    return repo / ".git"


def _build(mirror: Path, out: Path, **options) -> dict[str, list[dict]]:
    return {folder.name: queries for folder, _, queries in devset_meaning.build(TREE, mirror, out, per_kind=50,
                                                                                **options)}


def _texts(lang: str) -> dict[str, str]:
    """Every title, summary and body of the language -> its page key."""
    index = 0 if lang == "en" else 1
    found = {}
    for key, pair in [*PAGES.items(), ONLY_EN if lang == "en" else ONLY_ZH]:
        page = pair[index] if isinstance(pair[0], tuple) else pair
        for text in page:
            found[text] = key
    return found


def test_each_build_holds_only_its_language_and_asks_with_the_twins_texts(tiny_tree, tmp_path):
    built = _build(tiny_tree, tmp_path / "out")
    assert set(built) == {"tiny-en", "tiny-zh"}
    for only, other in (("zh", "en"), ("en", "zh")):
        folder = tmp_path / "out" / f"tiny-{only}"
        pages = sorted(p.relative_to(folder / "knowledge_base").as_posix()
                       for p in (folder / "knowledge_base").rglob("*.md"))
        own = ONLY_ZH if only == "zh" else ONLY_EN
        assert pages == sorted(f"{TREE}/{only}/{key}.md" for key in [*PAGES, own[0]])
        written = [json.loads(line) for line in (folder / "queries.jsonl").read_text(encoding="utf-8").splitlines()]
        assert written == built[f"tiny-{only}"]
        texts = _texts(other)
        cross = [q for q in written if q["kind"].startswith("other-language")]
        assert {q["kind"] for q in cross} == {"other-language title", "other-language summary",
                                             "other-language body sentence", "other-language question"}
        for q in cross:
            assert q["lang"] == other
            # the text came from a page of the other language; the twin of that page is what is expected
            asked = q["query"].lower()
            source = next(key for text, key in texts.items() if asked in text.lower() or
                          (q["kind"] == "other-language question" and text.lower() in asked and len(text) < 40))
            assert q["expected"] == [f"{TREE}/{only}/{source}.md"], q
            assert source in PAGES  # a page without a twin cannot be asked about in the other language
        assert "Kafka" not in {q["query"] for q in cross}
        assert not any("Kafka" == q["query"] for q in written)
        assert all(e.startswith(f"{TREE}/{only}/") and (folder / "knowledge_base" / e).is_file()
                   for q in written for e in q["expected"])


def test_paraphrases_are_in_the_pages_language_and_share_few_words_with_it(tiny_tree, tmp_path):
    built = _build(tiny_tree, tmp_path / "out")
    for name, queries in built.items():
        only = name.rsplit("-", 1)[1]
        para = [q for q in queries if q["kind"].startswith("paraphrased")]
        assert para, name
        texts = _texts(only)
        for q in para:
            assert q["lang"] == only and "synonyms" in q["rules"] and q["query"] != q["source"]
            assert q["expected"] == [f"{TREE}/{only}/{texts[q['source']]}.md"]
            assert q["overlap"] <= devset_meaning.OVERLAP
    # the filter decides: with no overlap allowed, fewer paraphrases are kept, and none above the threshold
    strict = _build(tiny_tree, tmp_path / "strict", threshold=0.0)
    loose = _build(tiny_tree, tmp_path / "loose", threshold=1.0)
    count = {label: sum(q["kind"].startswith("paraphrased") for qs in b.values() for q in qs)
             for label, b in (("strict", strict), ("default", built), ("loose", loose))}
    assert count["strict"] < count["default"] < count["loose"]
    assert all(q["overlap"] == 0.0 for qs in strict.values() for q in qs if q["kind"].startswith("paraphrased"))
    assert any(q["overlap"] > devset_meaning.OVERLAP for qs in loose.values() for q in qs
               if q["kind"].startswith("paraphrased"))


def test_a_rebuild_gives_the_same_set_and_another_seed_another(tiny_tree, tmp_path):
    first, again = _build(tiny_tree, tmp_path / "a"), _build(tiny_tree, tmp_path / "b")
    assert first == again
    for name in first:
        assert (tmp_path / "a" / name / "queries.jsonl").read_bytes() == \
            (tmp_path / "b" / name / "queries.jsonl").read_bytes()
    assert _build(tiny_tree, tmp_path / "c", seed=5) != first


def test_overlap_counts_where_a_page_word_begins_and_leaves_common_terms_out():
    page = devset._page("t/en/p.md", "en", "p", _markdown("Rotation", "Rotate the logs.", "Keep seven archives."))
    terms = devset_meaning.Terms(page)
    assert devset_meaning.overlap("rotate archives", terms) == 1.0
    assert devset_meaning.overlap("rot seven buckets", terms) == round(2 / 3, 3)  # `rot` begins `rotate`
    assert devset_meaning.overlap("otate buckets", terms) == 0.0  # not where a word begins
    assert devset_meaning.overlap("rotate buckets", terms, frozenset({"rotate"})) == 0.0
    assert devset_meaning.overlap("the of", terms) == 1.0  # nothing to tell the page apart: never kept


def test_the_rules_rewrite_in_each_language():
    rng = random.Random(1)
    swapped, count = devset_meaning.swap_synonyms("Deploy the cluster", "en", rng)
    assert count == 2 and "deploy" not in swapped.lower() and "cluster" not in swapped.lower()
    assert devset_meaning.swap_synonyms("数据库的数据", "zh", rng) == ("数据库的信息", 1)  # 数据库 is not cut
    assert devset_meaning.reorder("Logs are kept, the oldest are removed.", "en") == \
        "the oldest are removed, logs are kept"
    assert devset_meaning.reorder("Run GreptimeDB on Kubernetes", "en") == "on Kubernetes, run GreptimeDB"
    assert devset_meaning.reorder("指标与日志", "zh") == "日志与指标"
    assert devset_meaning.drop_function_words("The rule of the team", "en") == "rule team"
    assert devset_meaning.as_question("Deploy GreptimeDB", "en", "title", random.Random(0)).endswith(
        "deploy GreptimeDB?")
    assert devset_meaning.as_question("部署集群", "zh", "title", random.Random(0)) in (
        "如何部署集群？", "怎么部署集群？", "部署集群要怎么做？")
    assert devset_meaning.main_clause("Copy the data folder, including the logs and the index", "en") == \
        "Copy the data folder"
    assert devset_meaning.paraphrase("Glossary", "en", "title", rng) is None  # no word of the table


def test_kb_evaluate_scores_the_new_kinds(tiny_tree, tmp_path):
    from kb_core import open_knowledge_base
    from kb_core.evaluation.scoring import evaluate, format_table, load_queries

    _build(tiny_tree, tmp_path / "out", langs=("zh",))
    root = tmp_path / "out" / "tiny-zh"
    kb = open_knowledge_base(make_settings(root))
    try:
        kb.documents.reconcile()
        queries = load_queries(root / "queries.jsonl")
        report = evaluate(kb, queries)
    finally:
        kb.close()
    kinds = {k.kind for k in report.kinds}
    assert {"other-language title", "other-language body sentence", "paraphrased title"} <= kinds
    assert all(k.with_answer == k.queries for k in report.kinds)
    table = format_table(report)
    assert "| other-language title |" in table and "| paraphrased title |" in table
