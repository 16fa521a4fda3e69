"""L1 on real stores (SQLite + Milvus Lite, BM25): answers carry body text, titles rank first, and codes
that occur nowhere find nothing."""

from __future__ import annotations

import pytest
from support.documents import doc

from kb_core.bootstrap import parts_of

GATEWAY = doc("Gateway upstream keepalive", [], "How the gateway reuses upstream connections.",
              "# Keepalive\n\nSet `keepalive_pool_size` to the number of idle connections kept per upstream.\n\n"
              "## Timeouts\n\nIdle connections close after `keepalive_timeout` seconds.\n")
REGISTRY = doc("注册中心集群部署", [], "介绍注册中心集群的部署方式和节点数量建议",
               "# 集群\n\n生产环境建议至少三个节点，节点之间通过 Raft 协议同步数据。\n")


@pytest.fixture
def kb(open_kb):
    return open_kb(uploads=[("keepalive.md", GATEWAY.encode(), "gateway"),
                            ("cluster.md", REGISTRY.encode(), "registry")])


def test_a_summary_query_is_answered_with_body_text_not_the_metadata_chunk(kb):
    result = kb.lookup("How the gateway reuses upstream connections")
    assert result.supplement is not None and result.supplement.source.endswith("gateway/keepalive.md")
    assert "keywords:" not in result.supplement.content and "keepalive" in result.supplement.content.lower()
    assert result.trace.l1_hits[0].heading != "(frontmatter)"


@pytest.mark.parametrize("title", ["注册中心集群部署", "gateway upstream keepalive"])
def test_a_title_query_ranks_that_document_first(kb, title):
    assert kb.lookup(title).supplement.source.endswith(("registry/cluster.md", "gateway/keepalive.md"))
    assert kb.lookup(title).trace.l1_hits[0].source == kb.lookup(title).supplement.source


def test_identifiers_must_occur_whole(kb):
    assert kb.lookup("keepalive_pool_size").supplement.source.endswith("gateway/keepalive.md")
    assert kb.lookup("what is keepalive_pool_size_max").found is False
    assert kb.lookup("keepalive_pool 怎么设置").found is False  # a part of an identifier is not the identifier
    assert kb.lookup("完全不存在的内容XYZ").found is False


def test_question_words_do_not_count_as_content(kb):
    """"如何" / "有关" / "how" are not what a question is about: the topic words alone must carry it."""
    result = kb.lookup("有关注册中心集群部署节点数量的建议是什么")
    assert result.supplement is not None and result.supplement.source.endswith("registry/cluster.md")


def test_a_summary_is_not_taken_for_the_title_of_a_document_without_one(open_kb):
    """The frontmatter chunk's first line is the title; without a title it is empty, not the summary. So a
    document titled with the query outranks an untitled one whose summary (and body) say it word for word,
    although BM25 prefers the latter: were the summary read as a title, both would rank as title matches and
    BM25 would put the untitled one first."""
    kb = open_kb()
    sentence = "Rotate the signing keys every ninety days"
    kb.documents.upload("untitled.md", doc("", [], sentence, f"# Keys\n\n{sentence}. {sentence}.\n").encode(), "ops")
    kb.documents.upload("titled.md", doc(sentence, [], "key hygiene",
                                         "# Certificates\n\nUnrelated body text.\n").encode(),
              "ops")
    hits = kb.lookup(sentence).trace.l1_hits
    assert hits and hits[0].source.endswith("ops/titled.md")
    assert any(h.source.endswith("ops/untitled.md") for h in hits)  # found on its words, as any other chunk


def test_an_identifier_made_of_common_words_is_found_below_bm25s_first_candidates(open_kb):
    """`is_default` is the words "is" and "default" for BM25: thirty pages that say "default" over and over
    rank above the one chunk that holds `is_default` whole. L1 looks deeper once for such a query."""
    kb = open_kb()
    for i in range(30):
        kb.documents.upload(f"defaults-{i}.md", doc(f"Defaults {i}", [], "Default values",
                                          "# Defaults\n\n" + "The default is the default value by default. " * 12
                                          ).encode(), "ref")
    kb.documents.upload("collations.md", doc("COLLATIONS", [], "The collations table",
                                   "# Columns\n\n* `is_default`: whether the collation is the charset's default.\n"
                                   ).encode(), "sql")
    first = parts_of(kb).searcher.search_with("is_default", top_k=3, retrievers=("bm25",))
    assert first and first[0].source.endswith("sql/collations.md"), [h.source for h in first]
    assert kb.lookup("is_default").supplement.source.endswith("sql/collations.md")
    assert kb.lookup("is_defualt_x").found is False  # still: a code that occurs nowhere finds nothing
