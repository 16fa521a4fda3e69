"""Scoped questions: an agent narrows a question by `category` (a folder with its sub-folders) and
`language`; a page's `audience` limits who may read it. On the realistic fixture tree (a gateway product in en
and zh, a registry product, ops runbooks, error catalogues) opened on real stores, BM25 only.

Filters apply before L0 decides (a keyword two folders claim is one folder's unique answer once narrowed) and
inside L1's search (a narrowed question still gets its best passages there, not what is left of the whole
tree's top three); a page outside a caller's audiences is a missing page, through every tool."""

from __future__ import annotations

import shutil

import pytest
from support.paths import TESTS

from kb_core.bootstrap import parts_of
from kb_core.documents.scope import AudienceRule, Scope

FIXTURE = TESTS / "fixtures" / "realistic_kb"
RATE_QUESTION = "how to limit the request rate per consumer"

POSTMORTEM = """---
title: Gateway outage postmortem 2026-10
keywords: [outage-2026-10, postmortem]
summary: What failed in the October gateway outage and what changed since.
audience: [sre]
updated: 2026-11-02
version: "3.1"
---

# Gateway outage postmortem 2026-10

The limit-req plugin of the edge gateway rejected every request for 40 minutes after a bad rate setting was
pushed to every data plane at once. Rate limits are now rolled out one data plane at a time.
"""


@pytest.fixture
def kb(open_kb):
    return open_kb(tree=FIXTURE, files={"knowledge_base/internal/postmortem-2026-10.md": POSTMORTEM}, reconcile=True)


def sources(payload: dict) -> set[str]:
    """Every source an answer names: primary, translations, supplement, alternatives, suggestions."""
    found = set()
    primary = payload.get("primary") or {}
    found.update(x for x in [primary.get("source"), (payload.get("supplement") or {}).get("source")] if x)
    found.update(t["source"] for t in primary.get("translations") or ())
    found.update(a["source"] for a in payload.get("alternatives") or ())
    found.update(s["source"] for s in payload.get("suggestions") or ())
    return found


def test_a_category_narrows_the_keyword_match_before_l0_decides(kb):
    wide = kb.lookup_knowledge("jwt-auth")
    assert wide["primary"]["source"] == "knowledge_base/gateway/jwt-auth.md"
    assert [t["source"] for t in wide["primary"]["translations"]] == ["knowledge_base/gateway-zh/jwt-auth.md"]

    narrowed = kb.lookup_knowledge("jwt-auth", category="gateway-zh")
    assert narrowed["primary"]["source"] == "knowledge_base/gateway-zh/jwt-auth.md"
    assert narrowed["primary"]["confidence"] == "high"
    assert sources(narrowed) == {"knowledge_base/gateway-zh/jwt-auth.md"}  # no translation outside the folder

    elsewhere = kb.lookup_knowledge("jwt-auth", category="registry")
    assert not elsewhere["found"] and not sources(elsewhere)


def test_a_language_serves_that_version_and_nothing_in_another(kb):
    answer = kb.lookup_knowledge("jwt-auth", language="zh-CN")
    assert answer["primary"]["source"] == "knowledge_base/gateway-zh/jwt-auth.md"
    assert all("-zh/" in s for s in sources(answer))


def test_l1_searches_inside_the_category_so_a_narrowed_question_keeps_its_passages(kb):
    wide = kb.call_tool({"query": RATE_QUESTION}).result
    narrowed = kb.call_tool({"query": RATE_QUESTION, "category": "gateway-zh"}).result
    in_folder = [h for h in wide.trace.l1_hits if h.source.startswith("knowledge_base/gateway-zh/")]
    assert narrowed.trace.l1_hits, "the narrowed question found nothing in its folder"
    assert all(h.source.startswith("knowledge_base/gateway-zh/") for h in narrowed.trace.l1_hits)
    # searched within, not filtered afterwards: at least as many of the folder's passages as the wide search kept
    assert len(narrowed.trace.l1_hits) >= len(in_folder)
    assert narrowed.supplement.source.startswith("knowledge_base/gateway-zh/")


def test_bad_filters_are_argument_errors_and_an_empty_scope_says_so(kb):
    bad = kb.lookup_knowledge("jwt-auth", category="../etc")
    assert bad["error"].startswith("invalid arguments: invalid category")
    klingon = kb.lookup_knowledge("jwt-auth", language="klingon")
    assert klingon["error"].startswith("invalid arguments: unknown language")
    wrong = kb.call_tool({"query": "jwt-auth", "category": 7}).payload
    assert wrong["error"] == "invalid arguments: 'category' must be a string or null, got int"
    empty = kb.lookup_knowledge(RATE_QUESTION, category="no-such-folder")
    assert not empty["found"] and "no document is in this call's scope" in empty["note"]


def test_read_document_serves_the_version_in_a_language_and_says_how_fresh_a_page_is(kb):
    read = kb.read_document_tool("gateway/jwt-auth.md", language="zh")
    assert read["primary"]["source"] == "knowledge_base/gateway-zh/jwt-auth.md"
    assert read["primary"]["updated"].endswith("Z")  # no `updated` in its frontmatter: the file's time
    only_en = kb.read_document_tool("gateway/acl.md", language="zh")
    assert only_en["primary"]["source"] == "knowledge_base/gateway/acl.md"
    assert "no version in language" in only_en["note"]
    stamped = kb.read_document_tool("internal/postmortem-2026-10.md")
    assert (stamped["primary"]["updated"], stamped["primary"]["version"]) == ("2026-11-02", "3.1")
    assert kb.lookup_knowledge("outage-2026-10")["primary"]["updated"] == "2026-11-02"


def test_a_page_outside_the_callers_audiences_does_not_exist_for_it(kb):
    support = Scope(audiences=frozenset({"support"}))
    sre = Scope(audiences=frozenset({"sre"}))
    page = "knowledge_base/internal/postmortem-2026-10.md"
    # its keyword, a question its text answers, and reading it by name: the same as for a missing page
    hidden = kb.lookup_knowledge("outage-2026-10", scope=support)
    missing = kb.lookup_knowledge("outage-2099-01", scope=support)
    assert hidden == missing
    assert page not in sources(kb.lookup_knowledge("bad rate setting pushed to every data plane", scope=support))
    refused = kb.read_document_tool(page, scope=support)
    missing_read = kb.read_document_tool("knowledge_base/internal/no-such-page.md", scope=support)
    assert refused["error"] == missing_read["error"].replace("no-such-page", "postmortem-2026-10")
    # the audience reads it through every tool
    assert kb.lookup_knowledge("outage-2026-10", scope=sre)["primary"]["source"] == page
    assert page in sources(kb.lookup_knowledge("bad rate setting pushed to every data plane", scope=sre))
    assert kb.read_document_tool(page, scope=sre)["found"]
    # a caller without a scope (an in-process agent's service identity) reads every page
    assert kb.lookup_knowledge("outage-2026-10")["primary"]["source"] == page


def test_a_folder_default_audience_applies_to_pages_without_their_own(kb):
    rule = AudienceRule.of_mapping({"ops": ["sre"]})
    support = Scope(audiences=frozenset({"support"}), rule=rule)
    assert not kb.lookup_knowledge("config-reference", scope=support)["found"]
    index = parts_of(kb).index
    mask = index.scope_mask(support)
    shown = {e.file_path for i, e in enumerate(index.view.entries[p] for p in range(index.view.size)) if mask[i]}
    assert shown and not any(p.startswith("knowledge_base/ops/") for p in shown)
    assert "knowledge_base/gateway/acl.md" in shown


def test_a_wide_scope_searched_a_few_times_wider_finds_what_the_list_filter_finds(open_kb, tmp_path, monkeypatch):
    """Above `FILTER_IDS` documents in a scope, Milvus is asked a few times the limit unfiltered and the hits
    outside the scope are left out; only when too few remain is the id list sent. Both give the same chunks."""
    from kb_core.storage import vector_store

    for folder in ("gateway", "gateway-zh", "faq"):  # a smaller tree: its dense vectors are computed here
        shutil.copytree(FIXTURE / folder, tmp_path / "knowledge_base" / folder)
    kb = open_kb(embedding_fallback="use-multilingual-v3")
    kb.documents.reconcile()
    parts = parts_of(kb)
    assert parts.documents.dense_ready()
    vector = parts.embedder.encode_queries([RATE_QUESTION])[0]
    for folder in ("gateway-zh", "gateway"):  # a third of the documents, then most of them
        ids = frozenset(d.id for d in kb.documents.list() if d.category == folder)
        listed = parts.vectors.search_dense(vector, limit=5, doc_ids=ids)
        monkeypatch.setattr(vector_store, "FILTER_IDS", 0)
        wider = parts.vectors.search_dense(vector, limit=5, doc_ids=ids)
        monkeypatch.setattr(vector_store, "FILTER_IDS", 256)
        assert len(listed) == 5 and all(h.row.doc_id in ids for h in listed)
        assert [h.row.chunk_id for h in wider] == [h.row.chunk_id for h in listed], folder


def test_a_viewer_limited_to_an_audience_sees_no_call_that_named_a_page_it_may_not_read(kb):
    from kb_core.access import Actor, Role

    kb.lookup_knowledge("outage-2026-10")  # the service identity reads every page: the call names the postmortem
    kb.lookup_knowledge("jwt-auth")
    kb.calls.flush()
    viewer = kb.as_user(Actor("vic@example.com", Role.VIEWER, frozenset({"support"})))
    shown = {s for c in viewer.calls.recent() for s in c.sources}
    assert "knowledge_base/gateway/jwt-auth.md" in shown
    assert "knowledge_base/internal/postmortem-2026-10.md" not in shown
    assert "knowledge_base/internal/postmortem-2026-10.md" in {s for c in kb.calls.recent() for s in c.sources}
    # and the viewer's own lookups run in its scope
    assert not viewer.lookup_knowledge("outage-2026-10")["found"]


def test_a_page_that_gains_an_audience_leaves_a_callers_passages_at_once(kb):
    """The id set a scope's L1 searches within is read again in the background after a write; until then the
    lookup checks every passage's page against L0, which the write updated: no moment of leak."""
    support = Scope(audiences=frozenset({"support"}))
    question = "bad rate setting pushed to every data plane"
    opened = POSTMORTEM.replace("audience: [sre]\n", "")
    kb.documents.upload("postmortem-2026-10.md", opened.encode(), "internal")
    page = "knowledge_base/internal/postmortem-2026-10.md"
    assert page in sources(kb.lookup_knowledge(question, scope=support))  # for everyone now: the set holds it
    kb.documents.upload("postmortem-2026-10.md", POSTMORTEM.encode(), "internal")  # back to [sre]
    assert page not in sources(kb.lookup_knowledge(question, scope=support))
    assert not kb.lookup_knowledge("outage-2026-10", scope=support)["found"]


# -- what a limited viewer sees in the console's services and the Python API -----------------------------
QUESTION = "bad rate setting pushed to every data plane"  # the postmortem's text, through L1
PAGE = "knowledge_base/internal/postmortem-2026-10.md"


def _as(kb, name: str, *audiences: str):
    from kb_core.access import Actor, Role

    return kb.as_user(Actor(name, Role.VIEWER, frozenset(audiences)))


def test_the_bench_shows_a_limited_viewer_rows_only_from_pages_it_may_read(kb):
    from kb_core.errors import InvalidInputError
    from kb_core.retrieval.trial import TrialOptions

    support, sre = _as(kb, "vic@example.com", "support"), _as(kb, "sam@example.com", "sre")
    for options in (TrialOptions(retriever="bm25", top_k=20), TrialOptions(retriever="hybrid", top_k=20),
                    TrialOptions(retriever="bm25", top_k=20, languages=("en",))):
        shown = support.playground.run(QUESTION, options)
        assert PAGE not in {r.source for r in shown.rows}, options
        assert "40 minutes" not in " ".join(r.content for r in shown.rows)
        assert PAGE not in sources(shown.payload)
        assert PAGE in {r.source for r in sre.playground.run(QUESTION, options).rows}, options  # its audience does
    # its keyword: no L0 row, no answer
    keyword = support.playground.run("outage-2026-10")
    assert not keyword.payload["found"] and not keyword.result.trace.l0_matches
    # a folder whose every page it may not read is no folder for it, as a folder nobody uses
    with pytest.raises(InvalidInputError, match="there is no category 'internal'"):
        support.playground.run(QUESTION, TrialOptions(retriever="bm25", categories=("internal",)))
    assert {r.source for r in sre.playground.run(QUESTION, TrialOptions(retriever="bm25",
                                                                        categories=("internal",))).rows} \
        == {PAGE}


def test_tool_call_summaries_and_suggestions_leave_out_what_a_viewer_may_not_read(kb):
    from datetime import timedelta

    day = timedelta(days=1)
    kb.lookup_knowledge(QUESTION)  # the service identity: an L1-only answer from the postmortem, needing attention
    kb.lookup_knowledge("how do I rotate the tls certificate of the gateway")
    kb.lookup_knowledge("jwt-auth")
    kb.calls.flush()
    support, sre = _as(kb, "vic@example.com", "support"), _as(kb, "sam@example.com", "sre")

    assert QUESTION in {g.query for g in kb.calls.needing_attention(day)}
    assert QUESTION not in {g.query for g in support.calls.needing_attention(day)}
    assert not any(PAGE in g.sources for g in support.calls.needing_attention(day))
    assert QUESTION in {g.query for g in sre.calls.needing_attention(day)}

    everything = kb.calls.buckets(day)
    assert sum(b.calls for b in everything) == 3
    assert sum(b.calls for b in support.calls.buckets(day)) == 2
    # the calls a limited viewer may see are counted apart, the way the database counts them all
    assert sre.calls.buckets(day) == everything

    assert PAGE in {s.file_path for s in kb.documents.suggest(QUESTION)}
    assert PAGE in {s.file_path for s in sre.documents.suggest(QUESTION)}
    hidden = support.documents.suggest(QUESTION)
    assert PAGE not in {s.file_path for s in hidden} and "40 minutes" not in " ".join(s.excerpt for s in hidden)
    assert support.documents.suggest(RATE_QUESTION), "a limited viewer still gets suggestions from its pages"


def test_the_python_lookup_reads_what_the_acting_identity_may(open_kb):
    kb = open_kb(tree=FIXTURE, files={"knowledge_base/internal/postmortem-2026-10.md": POSTMORTEM}, reconcile=True,
                 service_audiences=["support"])
    assert not kb.lookup("outage-2026-10").found
    assert PAGE not in sources(kb.lookup(QUESTION).to_dict())
    assert kb.lookup("outage-2026-10").to_dict() == kb.lookup("outage-2099-01").to_dict()
    assert not _as(kb, "vic@example.com", "support").lookup("outage-2026-10").found
    assert _as(kb, "sam@example.com", "sre").lookup("outage-2026-10").primary.source == PAGE
    assert kb.lookup("outage-2026-10", scope=Scope()).primary.source == PAGE  # a scope named is the one applied


def test_kb_lookup_from_the_saved_l0_reads_only_what_the_service_identity_may(tmp_path, monkeypatch, capsys):
    """`kb lookup` answers a keyword from the L0 snapshot without opening the database: there too, a page
    outside `KB_SERVICE_AUDIENCES` (its own audience or its folder's default in `auth.audiences`) does not
    exist."""
    import json
    import os

    from support.documents import doc, write_doc
    from support.stores import NO_MODEL

    from kb_core import open_knowledge_base
    from kb_core.cli import main

    for name in list(os.environ):
        if name.startswith("KB_"):
            monkeypatch.delenv(name)
    for name, value in {"KB_APP_ROOT": str(tmp_path), "KB_DATABASE_URL": f"sqlite:///{tmp_path / 'kb.sqlite3'}",
                        "KB_MILVUS_URI": str(tmp_path / "kb_milvus.db"), "KB_EMBEDDING_MODEL": NO_MODEL,
                        "KB_WATCH": "0"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    write_doc(tmp_path, "knowledge_base/ops/bridges.md",
              doc("Bridges", ["OPS-ONLY-1"]).replace("summary:", "audience: [ops]\nsummary:"))
    write_doc(tmp_path, "knowledge_base/ops/pager.md", doc("Pager", ["OPS-FOLDER-2"]))
    write_doc(tmp_path, "knowledge_base/api/errors.md", doc("Errors", ["PUBLIC-3"]))
    kb = open_knowledge_base()
    kb.documents.reconcile()
    kb.close()  # writes the L0 snapshot the fast path answers from

    def lookup(query: str) -> dict:
        assert main(["lookup", query]) == 0
        return json.loads(capsys.readouterr().out)

    assert lookup("OPS-ONLY-1")["primary"]["source"] == "knowledge_base/ops/bridges.md"  # every page, by default
    monkeypatch.setenv("KB_SERVICE_AUDIENCES", '["support"]')
    monkeypatch.setenv("KB_AUDIENCES", '{"ops": ["ops"]}')
    missing = lookup("OPS-NOWHERE-9")
    for hidden in ("OPS-ONLY-1", "OPS-FOLDER-2"):
        answer = lookup(hidden)
        assert not answer["found"] and "knowledge_base/ops/" not in json.dumps(answer), answer
        assert answer == missing
    assert lookup("PUBLIC-3")["primary"]["source"] == "knowledge_base/api/errors.md"
    monkeypatch.setenv("KB_SERVICE_AUDIENCES", '["ops"]')
    assert lookup("OPS-FOLDER-2")["primary"]["source"] == "knowledge_base/ops/pager.md"
