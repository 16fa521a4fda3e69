"""A viewer limited to some audiences gets nothing of another audience's page from any service of
`kb.as_user(viewer)`: not in a list, a record, a text, the chunks, L0's entry, the keyword map, the call log,
the trash or an evaluation's outcomes. The realistic fixture tree on real stores (SQLite, Milvus Lite), BM25
only, with one page for the `sre` audience."""

from __future__ import annotations

import json

import pytest
from support.paths import TESTS

from kb_core import Actor, Role

FIXTURE = TESTS / "fixtures" / "realistic_kb"
HIDDEN = "knowledge_base/internal/postmortem-2026-10.md"
HIDDEN_TEXT = """---
title: Gateway outage postmortem 2026-10
keywords: [outage-2026-10, postmortem-edge]
summary: What failed in the October gateway outage and what changed since.
audience: [sre]
---

# Gateway outage postmortem 2026-10

The limit-req plugin of the edge gateway rejected every request for 40 minutes after a bad rate setting was
pushed to every data plane at once. Rate limits are now rolled out one data plane at a time.
"""
SUPPORT = Actor("vic@example.com", Role.VIEWER, frozenset({"support"}))
SRE = Actor("sam@example.com", Role.VIEWER, frozenset({"sre"}))


@pytest.fixture
def kb(open_kb):
    return open_kb(tree=FIXTURE, files={HIDDEN: HIDDEN_TEXT}, reconcile=True)


def _hidden_id(kb) -> int:
    return next(d.id for d in kb.documents.list() if d.file_path == HIDDEN)


def test_a_limited_viewer_lists_reads_gets_and_chunks_nothing_of_another_audience(kb):
    doc_id = _hidden_id(kb)
    assert kb.documents.chunks(doc_id), "the unlimited service identity reads the page"
    docs = kb.as_user(SUPPORT).documents
    assert HIDDEN not in {d.file_path for d in docs.list()}
    assert len(docs.list()) == len(kb.documents.list()) - 1  # the other pages are all there
    assert docs.get(doc_id) is None
    assert docs.chunks(doc_id) == []
    assert docs.text(HIDDEN) is None and docs.text("internal/postmortem-2026-10.md") is None
    assert docs.entry(HIDDEN) is None and docs.versions(HIDDEN) == ()
    assert HIDDEN not in docs.languages()
    assert "internal" not in docs.categories() and "internal" in kb.documents.categories()
    with pytest.raises(Exception, match="no document"):
        docs.fields(HIDDEN)
    # the page's own audience reads it all
    own = kb.as_user(SRE).documents
    assert own.get(doc_id) is not None and own.chunks(doc_id) and "postmortem" in own.text(HIDDEN)


def test_the_keyword_map_of_a_limited_viewer_holds_its_pages_alone(kb):
    everything = {row.keyword: row for row in kb.keywords.map()}
    assert "postmortem-edge" in everything
    limited = kb.as_user(SUPPORT).keywords
    rows = {row.keyword: row for row in limited.map()}
    assert "postmortem-edge" not in rows and "outage-2026-10" not in rows
    assert all(HIDDEN not in row.file_paths for row in rows.values())
    assert len(limited.map().rows) == len(kb.keywords.map().rows) - 2
    assert limited.documents("postmortem-edge") == []
    assert [h.file_path for h in kb.keywords.documents("postmortem-edge")] == [HIDDEN]


def test_the_call_log_and_trash_of_a_limited_viewer_leave_the_page_out(kb):
    assert kb.lookup_knowledge("postmortem-edge")["primary"]["source"] == HIDDEN
    kb.lookup_knowledge("jwt-auth")
    kb.calls.flush()
    assert HIDDEN in {s for c in kb.calls.recent() for s in c.sources}
    limited = kb.as_user(SUPPORT)
    assert all(HIDDEN not in c.sources for c in limited.calls.recent())
    assert limited.calls.recent(), "the call about a page it may read is shown"

    kb.documents.delete(_hidden_id(kb))
    assert [i.relative_path for i in kb.trash.items()] == ["internal/postmortem-2026-10.md"]
    assert limited.trash.items() == []
    assert kb.as_user(SRE).trash.items() != []
    with pytest.raises(Exception, match="not in the trash"):
        kb.as_user(Actor("cora@example.com", Role.CURATOR, frozenset({"support"}))).trash.restore(
            "internal/postmortem-2026-10.md")


def test_evaluation_outcomes_of_a_limited_viewer_name_only_its_pages(kb):
    lines = [{"query": "postmortem-edge", "expected": ["internal/postmortem-2026-10.md"]},
             {"query": "jwt-auth", "expected": ["gateway/jwt-auth.md", "gateway-zh/jwt-auth.md"]}]
    kb.evaluation.import_set("mixed", "\n".join(json.dumps(line) for line in lines))
    job = kb.evaluation.start("mixed")
    ended = kb.jobs.wait(job.id, 120)
    assert ended is not None and ended.state == "succeeded", ended
    run_id = kb.evaluation.runs()[0].id
    assert {o.outcome.query for o in kb.evaluation.outcomes(run_id)} == {"postmortem-edge", "jwt-auth"}
    limited = kb.as_user(SUPPORT).evaluation
    assert [o.outcome.query for o in limited.outcomes(run_id)] == ["jwt-auth"]
    assert [q.query for q in limited.set("mixed")] == ["jwt-auth"]
    assert {o.query for o in limited.run(run_id).outcomes} == {"jwt-auth"}
