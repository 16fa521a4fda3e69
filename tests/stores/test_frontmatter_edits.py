"""Editing title, summary, keywords and sections in place on real stores (SQLite and MariaDB, Milvus Lite): the edit
goes through the upload path and every store follows; an edit of a file changed meanwhile is refused and writes
nothing; roles; bulk keyword plans (rename, remove) with a document changed meanwhile; the documents L1 finds for
a "needs attention" query and the query added as a keyword."""

from __future__ import annotations

import json

import pytest
from support.documents import doc, write_doc
from support.stores import assert_consistent

from kb_core import Actor, FrontmatterError, Role
from kb_core.bootstrap import parts_of
from kb_core.console import AccessDeniedError, DocumentConflictError, EditConflictError
from kb_core.errors import InvalidInputError

PAY = "knowledge_base/api/payment-errors.md"
GATE = "knowledge_base/gateway/timeouts.md"
OPS = "knowledge_base/ops/timeout-runbook.md"
PLAIN = "knowledge_base/ops/runbook-latency.md"  # no frontmatter: L1 only
PAY_DOC = """---
# payment gateway: the error codes agents look up
title: 支付网关错误码
keywords:
  - ERR_TIMEOUT   # the code itself
  - 超时
summary: >
  错误码及排查方向,
  每类一节。
sections:
  超时排查: "## 1. 超时类错误"
tags: [payments]
---

# 支付网关

## 1. 超时类错误

ERR_TIMEOUT 表示上游超时。

## 2. 业务类错误

余额不足。
"""
VIEWER = Actor("vera@example.com", Role.VIEWER)
CURATOR = Actor("carl@example.com", Role.CURATOR)


@pytest.fixture
def kb(open_kb, db_url):
    return open_kb(files={
        PAY: PAY_DOC,
        GATE: doc("Gateway timeouts", ["超时", "upstream timeout"], body="# Gateway\n\n504\n"),
        OPS: doc("Timeout runbook", ["超时", "runbook"], body="# Runbook\n\nrestart\n"),
        PLAIN: "# Latency runbook\n\nWhen p99 latency climbs, check the connection pool first.\n",
    }, db_url=db_url, reconcile=True)


def _disk(kb, path: str) -> bytes:
    return parts_of(kb).folder.resolve(path).read_bytes()


def test_several_fields_are_edited_in_place_and_every_store_follows(kb):
    before = _disk(kb, PAY)
    edit = kb.documents.prepare_edit(PAY, title="支付网关错误码定义", summary="错误码、含义及排查方向。",
                                       keywords=["ERR_TIMEOUT", "支付超时"],
                                       sections=[("超时排查", "## 1. 超时类错误"), ("业务错误", "## 2. 业务类错误")])
    assert edit.fields == ("title", "keywords", "summary", "sections")
    assert edit.removed == ("超时",) and edit.added == ("支付超时",)
    assert edit.edited.sections == (("超时排查", "## 1. 超时类错误"), ("业务错误", "## 2. 业务类错误"))
    assert "-title: 支付网关错误码\n+title: 支付网关错误码定义" in edit.diff and "+  业务错误:" in edit.diff
    assert edit.preview.can_upload and edit.preview.replaces_existing
    assert _disk(kb, PAY) == before  # a preview writes nothing
    outcome = kb.documents.save_edit(edit)
    assert outcome.action == "replaced"
    text = _disk(kb, PAY).decode()
    assert text == edit.data.decode()
    # only the edited values changed: comments, the tags line and the body are byte for byte
    assert text.startswith("---\n# payment gateway: the error codes agents look up\ntitle: 支付网关错误码定义\n"
                           "keywords:\n  - ERR_TIMEOUT\n  - 支付超时\nsummary: >\n  错误码、含义及排查方向。\n")
    assert text.endswith("tags: [payments]\n---\n" + PAY_DOC.split("---\n", 2)[2])
    row = next(r for r in kb.documents.list() if r.file_path == PAY)
    assert row.frontmatter["title"] == "支付网关错误码定义"
    entry = kb.documents.entry(PAY)
    assert entry.title == "支付网关错误码定义" and entry.keywords == ("ERR_TIMEOUT", "支付超时")
    assert [name for name, _ in entry.section_names] == ["超时排查", "业务错误"]
    assert kb.lookup("支付超时").primary.source == PAY
    answer = kb.lookup_knowledge("ERR_TIMEOUT", section_title="业务错误")["primary"]  # the new name serves
    assert answer["availableSections"] == ["超时排查", "业务错误"] and "余额不足" in answer["content"]
    assert_consistent(kb)


def test_an_edit_of_a_file_changed_meanwhile_is_refused_and_writes_nothing(kb):
    edit = kb.documents.prepare_edit(GATE, title="Gateway timeouts (504)")
    path = parts_of(kb).folder.resolve(GATE)
    newer = path.read_text(encoding="utf-8").replace("504", "504 and 502")
    path.write_text(newer, encoding="utf-8")
    with pytest.raises(EditConflictError, match="changed on disk since the preview") as caught:
        kb.documents.save_edit(edit)
    assert isinstance(caught.value, DocumentConflictError) and caught.value.expected == edit.base_sha256
    assert path.read_text(encoding="utf-8") == newer  # nothing written
    row = next(r for r in kb.documents.list() if r.file_path == GATE)
    assert row.content_sha256 == edit.base_sha256  # the index still holds the version it had
    path.unlink()
    with pytest.raises(EditConflictError, match="it is no longer there"):
        kb.documents.save_edit(edit)


def test_a_change_right_after_the_check_is_caught_by_the_upload_under_the_lock(kb, monkeypatch):
    import kb_core.services.editing as facade

    edit = kb.documents.prepare_edit(GATE, summary="What a 504 means")
    path = parts_of(kb).folder.resolve(GATE)
    checked = facade.check_unchanged

    def check_then_someone_writes(index, prepared):
        checked(index, prepared)
        path.write_text(doc("Someone else", ["超时"]), encoding="utf-8")  # between the check and the upload

    monkeypatch.setattr(facade, "check_unchanged", check_then_someone_writes)
    with pytest.raises(DocumentConflictError):
        kb.documents.save_edit(edit)
    assert "Someone else" in path.read_text(encoding="utf-8")


def test_only_curators_edit_and_kb_core_enforces_it(kb):
    viewer, curator = kb.as_user(VIEWER), kb.as_user(CURATOR)
    before = _disk(kb, GATE)
    for attempt in (lambda: viewer.documents.prepare_edit(GATE, title="x"),
                    lambda: viewer.documents.prepare_edit(GATE, keywords=["x"]),
                    lambda: viewer.keywords.prepare_addition(GATE, "x"),
                    lambda: viewer.keywords.prepare_rename("超时", "超时问题"),
                    lambda: viewer.keywords.prepare_removal("超时")):
        with pytest.raises(AccessDeniedError, match="vera@example.com \\(viewer\\) may not edit documents"):
            attempt()
    edit = curator.documents.prepare_edit(GATE, title="Gateway timeouts (504)")
    with pytest.raises(AccessDeniedError):
        viewer.documents.save_edit(edit)  # a prepared edit is no pass
    with pytest.raises(AccessDeniedError):
        viewer.keywords.apply(curator.keywords.prepare_removal("runbook"))
    assert _disk(kb, GATE) == before
    assert curator.documents.save_edit(edit).action == "replaced"
    assert next(r for r in kb.documents.list() if r.file_path == GATE).changed_by == "carl@example.com"


def test_values_that_cannot_be_stored_as_given_are_refused_before_anything(kb):
    with pytest.raises(FrontmatterError, match="spans lines"):
        kb.documents.prepare_edit(GATE, title="two\nlines")
    with pytest.raises(FrontmatterError, match="named twice"):
        kb.documents.prepare_edit(GATE, sections={"A": "## A", "a": "## B"})
    unchanged = kb.documents.prepare_edit(GATE, title="  Gateway timeouts ", keywords=["超时", "upstream timeout"])
    assert not unchanged.changed and unchanged.data == _disk(kb, GATE) and unchanged.diff == ""


def test_a_rename_across_documents_skips_one_changed_meanwhile_and_the_others_go_on(kb):
    plan = kb.keywords.prepare_rename("超时", "超时排查")
    assert [i.file_path for i in plan.items] == [PAY, GATE, OPS]
    assert {i.file_path: i.after for i in plan.items}[PAY] == ("ERR_TIMEOUT", "超时排查")  # keeps its place
    assert len(plan.ready) == 3 and plan.describe() == "rename “超时” to “超时排查” in 3 of 3 documents"
    messages = " | ".join(f.message for f in plan.findings)
    assert "after the rename 3 pages claim “超时排查”" in messages  # the clash is renamed, not fixed
    path = parts_of(kb).folder.resolve(GATE)
    path.write_text(path.read_text(encoding="utf-8").replace("504", "504!"), encoding="utf-8")  # meanwhile
    seen = []
    report = kb.keywords.apply(plan, progress=lambda stage, done, total: seen.append((stage, done, total)))
    assert seen == [("editing", 0, 3), ("editing", 1, 3), ("editing", 2, 3), ("done", 3, 3)]
    status = {o.file_path: (o.status, o.message) for o in report.outcomes}
    assert status[PAY][0] == status[OPS][0] == "saved"
    assert status[GATE][0] == "skipped" and "changed on disk since the preview" in status[GATE][1]
    assert (report.saved, report.skipped, report.failed) == (2, 1, 0)
    assert "超时" in path.read_text(encoding="utf-8") and "504!" in path.read_text(encoding="utf-8")
    assert "  - 超时排查\n" in _disk(kb, PAY).decode()  # the block list stays a block list
    kb.documents.reconcile()  # the hand edit of GATE is indexed
    assert {m.entry.file_path for m in parts_of(kb).index.match("超时排查")} >= {PAY, OPS}
    paths = (e.file_path for e in parts_of(kb).index.entries())
    assert [p for p in paths if "超时" in kb.documents.entry(p).keywords] \
        == [GATE]
    assert_consistent(kb)


def test_a_removal_says_which_documents_keep_no_keyword_and_a_rename_lints_the_new_keyword(kb, tmp_path):
    write_doc(tmp_path, "knowledge_base/ops/only.md", doc("Only", ["lonely"]))
    kb.documents.reconcile()
    plan = kb.keywords.prepare_removal("lonely")
    messages = " | ".join(f.message for f in plan.findings)
    assert "1 document(s) keep no keyword L0 uses" in messages and "no document will claim “lonely”" in messages
    report = kb.keywords.apply(plan)
    assert report.saved == 1 and kb.keywords.of("knowledge_base/ops/only.md") == ()
    renamed = kb.keywords.prepare_rename("runbook", "upstream timeout")
    messages = " | ".join(f.message for f in renamed.findings)
    assert "“upstream timeout” is already claimed by 1 other document(s) (knowledge_base/gateway/timeouts.md)" \
        in messages
    item, = renamed.items  # its own notes: the clash the rename makes, not the one on 超时 it keeps
    assert item.notes == (f"L0 will be ambiguous for: upstream timeout — also in {GATE}",)
    assert any(f.message.startswith("L0 will be ambiguous for: 超时") for f in item.edit.preview.findings)
    weak = kb.keywords.prepare_rename("runbook", "的")
    assert any("is ignored by L0" in f.message for f in weak.findings)
    with pytest.raises(InvalidInputError, match="already spelled that way"):
        kb.keywords.prepare_rename("runbook", " runbook ")
    with pytest.raises(InvalidInputError, match="remove it instead"):
        kb.keywords.prepare_rename("runbook", "  ")
    assert kb.keywords.prepare_removal("no-such-keyword").items == ()


def test_a_rename_that_makes_a_generic_keyword_says_so(tmp_path, open_kb):
    for i in range(4):
        write_doc(tmp_path, f"knowledge_base/faq/q{i}.md", doc(f"Q{i}", [f"faq-{i}", "common"]))
    kb = open_kb(tmp_path, l0_generic_docs=2)
    kb.documents.reconcile()
    plan = kb.keywords.prepare_rename("faq-0", "common")
    assert any("“common” becomes a generic keyword (4 pages, more than 2)" in f.message for f in plan.findings)
    edit = kb.keywords.prepare_addition("knowledge_base/faq/q1.md", "faq-2")
    assert not any("generic" in f.message for f in edit.preview.findings)
    write_doc(tmp_path, "knowledge_base/faq/q9.md", doc("Q9", ["other"]))
    kb.documents.reconcile()
    edit = kb.keywords.prepare_addition("knowledge_base/faq/q9.md", "common")
    assert any("“common” is a generic keyword: 5 pages will claim it" in f.message for f in edit.preview.findings)


def test_the_documents_l1_finds_for_a_query_and_the_query_made_a_keyword(kb):
    calls = len(kb.calls.recent())
    found = kb.documents.suggest("connection pool latency")
    assert found and found[0].file_path == PLAIN and found[0].title == "runbook-latency.md"
    assert "connection pool" in found[0].excerpt
    assert kb.documents.suggest("完全不存在的内容XYZ") == []
    assert len(kb.calls.recent()) == calls  # not a tool call: looking never counts a query again
    with pytest.raises(InvalidInputError, match="limit"):
        kb.documents.suggest("x", limit=0)

    edit = kb.keywords.prepare_addition(PLAIN, "connection pool latency")
    assert edit.fields == ("keywords",) and not edit.original.exists
    assert edit.data.decode().startswith("---\nkeywords: [connection pool latency]\n---\n# Latency runbook\n")
    kb.documents.save_edit(edit)
    answer = kb.lookup_knowledge("connection pool latency")
    assert answer["primary"]["source"] == PLAIN and answer["primary"]["confidence"] == "high"
    again = kb.keywords.prepare_addition(PLAIN, "Connection Pool Latency")  # already there (normalised)
    assert not again.changed
    assert_consistent(kb)


def test_the_edit_is_recorded_in_the_rows_metadata_as_json(kb):
    kb.documents.save_edit(kb.documents.prepare_edit(OPS, sections={"Restart": "# Runbook"}))
    row = parts_of(kb).metadata.get(next(r.id for r in kb.documents.list() if r.file_path == OPS))
    assert json.loads(row.metadata_json)["extra"]["sections"] == {"Restart": "# Runbook"}


def test_the_document_l1_finds_is_in_the_query_s_language(open_kb, tmp_path):
    """Both language versions hold the same identifiers, and BM25 may rank the Chinese one first: for an English
    query the fix offers the English page."""
    body_zh = "# 重试\n\nRETRY_BUDGET_EXCEEDED 表示重试预算 RETRY_BUDGET_EXCEEDED 已用完；RETRY_BUDGET_EXCEEDED。\n"
    body_en = "# Retries\n\nRETRY_BUDGET_EXCEEDED means the retry budget is spent.\n"
    write_doc(tmp_path, "knowledge_base/gateway/zh/retries.md", doc("重试", ["重试预算"], body=body_zh))
    write_doc(tmp_path, "knowledge_base/gateway/en/retries.md", doc("Retries", ["retry budget"], body=body_en))
    kb = open_kb()
    kb.documents.reconcile()
    found = kb.documents.suggest("what does RETRY_BUDGET_EXCEEDED mean")
    assert [s.file_path for s in found] == ["knowledge_base/gateway/en/retries.md",
                                           "knowledge_base/gateway/zh/retries.md"]
    assert kb.documents.suggest("RETRY_BUDGET_EXCEEDED 是什么意思")[0].file_path == \
        "knowledge_base/gateway/zh/retries.md"
