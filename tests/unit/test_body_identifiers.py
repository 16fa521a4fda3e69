"""The "did you mean" suggestions reach identifiers that only the pages' text names (no keyword declares them),
also around a typo inside a sentence; real stores (SQLite FTS5 beside Milvus Lite), real suggester."""

from __future__ import annotations

from kb_core.bootstrap import parts_of

READ_REPLICAS = """---
title: Querying read replicas
keywords: [read replica]
summary: Send queries to the replicas of a region
---
# Querying read replicas

## Hints

Set the `other_ranges` hint to let a query read the ranges that are not local to the replica, and
`strict_headers` to refuse a request whose headers the gateway does not know. The default is `false`.
"""

COPY = """---
title: COPY statement
keywords: [COPY]
summary: Import and export tables
---
# COPY statement

`COPY` writes a table to files. The `format` option names the file format; `pattern` filters file names.
"""


def _kb(open_kb):
    kb = open_kb()
    kb.documents.upload("query-read-replicas.md", READ_REPLICAS.encode(), "enterprise")
    kb.documents.upload("copy.md", COPY.encode(), "sql")
    kb.prepare_suggestions()
    return kb


def _named(answer: dict) -> list[tuple[str, str]]:
    return [(s["keyword"], s["source"]) for s in answer.get("suggestions", [])]


def test_a_typo_of_an_identifier_in_the_text_names_its_page(open_kb):
    kb = _kb(open_kb)
    answer = kb.lookup_knowledge("othre_anges")  # two slips in a word that no keyword holds
    assert not answer["found"]
    assert _named(answer)[:1] == [("other_ranges", "knowledge_base/enterprise/query-read-replicas.md")], answer
    around = kb.lookup_knowledge("strict_ehaders does not work")  # inside a sentence
    assert ("strict_headers", "knowledge_base/enterprise/query-read-replicas.md") in _named(around), around


def test_an_identifier_spelt_right_is_no_suggestion_and_far_ones_name_nothing(open_kb):
    kb = _kb(open_kb)
    right = kb.lookup_knowledge("what does other_ranges do")
    assert right["found"] and not right.get("suggestions"), right
    far = kb.lookup_knowledge("qzxv_wplk")  # nothing within two edits
    assert not far.get("suggestions"), far


def test_the_vocabulary_follows_the_chunks(open_kb):
    kb = _kb(open_kb)
    kb.documents.upload("limits.md", (COPY.replace("COPY statement", "Limits").replace("`pattern`",
                                                                                       "`max_concurrent_flushes`")
                            .replace("[COPY]", "[limits]")).encode(), "sql")
    kb.prepare_suggestions()  # what the background refresh does once the chunks have changed
    assert _named(kb.lookup_knowledge("max_concurent_flushes")) == [
        ("max_concurrent_flushes", "knowledge_base/sql/limits.md")]
    doc = parts_of(kb).metadata.get_by_path("knowledge_base/sql/limits.md")
    kb.documents.delete(doc.id)
    kb.prepare_suggestions()
    assert not _named(kb.lookup_knowledge("max_concurent_flushes"))


def test_background_refreshes_leave_no_connection_behind(open_kb):
    """Each refresh runs on a thread of its own; the full-text index keeps a connection per thread that uses
    its shared connections, so the refresh reads through connections it closes."""
    import threading

    kb = _kb(open_kb)
    fulltext = parts_of(kb).vectors._fulltext  # noqa: SLF001
    suggester = parts_of(kb).lookup._body_suggester
    before = len(fulltext._connections)  # noqa: SLF001
    for _ in range(5):
        suggester._built_version = None  # noqa: SLF001 - force a rebuild each time
        worker = threading.Thread(target=suggester.refresh)
        worker.start()
        worker.join()
    assert len(fulltext._connections) == before  # noqa: SLF001
    assert _named(kb.lookup_knowledge("othre_anges"))
