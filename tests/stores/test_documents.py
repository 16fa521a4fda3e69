"""The spec's upload and delete end to end on real stores (SQLite and MariaDB, Milvus Lite, the tiny BGE-M3 model):
upload, replace, delete, re-index and sync, with failures injected at every step."""

from __future__ import annotations

import json

import pytest
from support.documents import doc
from support.stores import NO_MODEL, assert_consistent

from kb_core import KnowledgeBaseError, UploadRejected
from kb_core.bootstrap import parts_of
from kb_core.documents.service import DocumentError
from kb_core.storage.db_models import DocumentStatus

PAYMENT = doc("支付网关错误码定义", ["ERR_TIMEOUT", "超时", "支付网关"], "记录了支付网关所有核心错误码的含义及排查方向",
              "# 支付网关错误码\n\n## 1. 超时类错误\n\nERR_TIMEOUT 表示渠道在 3 秒内未响应，需要查询订单最终状态。\n")
CACHE = doc("缓存设计与优化指南", ["Redis", "缓存穿透"], "缓存优化方案",
            "# 缓存\n\n## 常见问题与优化\n\n缓存雪崩时给过期时间加随机值，优化缓存命中率。\n")


@pytest.fixture
def kb(open_kb, db_url, tiny_model):
    return open_kb(db_url=db_url, model=str(tiny_model))


# -- upload: the file, its frontmatter, L0 ----------------------------------------------------------------
def test_req_2_1_upload_saves_the_original_file(kb, tmp_path):
    outcome = kb.documents.upload("test-doc.md", PAYMENT.encode(), "api")
    assert outcome.action == "indexed"
    saved = tmp_path / "knowledge_base/api/test-doc.md"
    assert saved.read_bytes() == PAYMENT.encode()
    assert outcome.document.file_path == "knowledge_base/api/test-doc.md"
    assert outcome.document.status == DocumentStatus.INDEXED
    assert_consistent(kb)


def test_req_2_2_frontmatter_is_stored_as_json_metadata(kb):
    record = kb.documents.upload("test-doc.md", PAYMENT.encode(), "api").document
    meta = json.loads(record.metadata_json)
    assert meta["title"] == "支付网关错误码定义"
    assert meta["keywords"] == ["ERR_TIMEOUT", "超时", "支付网关"]
    assert meta["summary"] == "记录了支付网关所有核心错误码的含义及排查方向"


def test_req_2_2_no_or_invalid_frontmatter_gives_null_metadata_and_still_uploads(kb):
    plain = kb.documents.upload("plain.md", "# 普通文档\n\n这是正文内容。\n".encode(), "api")
    broken = kb.documents.upload("broken.md", "---\ntitle: 缺少结束标记\nkeywords: [ERR_TIMEOUT\n# 正文\n".encode(),
                                                                              "api")
    assert plain.document.metadata_json is None and broken.document.metadata_json is None
    assert any("not closed" in w for w in broken.warnings)
    assert parts_of(kb).index.exact_match("ERR_TIMEOUT") == []
    assert_consistent(kb)


def test_req_2_3_upload_adds_to_l0_immediately(kb):
    kb.documents.upload("test-doc.md", PAYMENT.encode(), "api")
    [entry] = parts_of(kb).index.exact_match("ERR_TIMEOUT")
    assert entry.file_path == "knowledge_base/api/test-doc.md"
    assert entry.title == "支付网关错误码定义" and entry.category == "api"
    assert kb.lookup("ERR_TIMEOUT").primary.confidence == "high"


# -- the spec's acceptance run: upload -> L0 -> L1 -> delete ----------------------------------------------------
def test_req_8_1_upload_lookup_delete_end_to_end(kb, tmp_path):
    record = kb.documents.upload("payment-errors.md", PAYMENT.encode(), "api").document
    kb.documents.upload("cache.md", CACHE.encode(), "domain")
    assert kb.lookup("ERR_TIMEOUT").to_dict()["primary"]["source"] == "knowledge_base/api/payment-errors.md"
    l1 = kb.lookup("渠道未响应需要查询订单最终状态")
    assert l1.primary is None
    assert l1.supplement.source == "knowledge_base/api/payment-errors.md"
    assert "bm25" in l1.trace.l1_hits[0].retrievers

    outcome = kb.documents.delete(record.id)
    assert outcome.deleted
    assert not (tmp_path / "knowledge_base/api/payment-errors.md").exists()
    assert parts_of(kb).index.exact_match("ERR_TIMEOUT") == []
    after = kb.lookup("渠道未响应需要查询订单最终状态")
    assert all(h.source != "knowledge_base/api/payment-errors.md" for h in after.trace.l1_hits)
    assert kb.documents.get(record.id) is None
    assert parts_of(kb).vectors.chunks_of(record.id) == []
    assert_consistent(kb)


def test_delete_is_idempotent(kb):
    record = kb.documents.upload("a.md", PAYMENT.encode(), "api").document
    assert kb.documents.delete(record.id).deleted
    second = kb.documents.delete(record.id)
    assert not second.deleted and "does not exist" in second.message


# -- replacement ---------------------------------------------------------------------------------------------
def test_reupload_replaces_in_place(kb):
    first = kb.documents.upload("a.md", PAYMENT.encode(), "api").document
    kb.documents.upload("b.md", CACHE.encode(), "domain")
    changed = PAYMENT.replace("ERR_TIMEOUT, 超时", "ERR_GATEWAY_DOWN, 超时")
    outcome = kb.documents.upload("a.md", changed.encode(), "api")
    assert outcome.action == "replaced" and outcome.document.id == first.id
    assert parts_of(kb).index.exact_match("ERR_TIMEOUT") == []
    assert [e.file_path for e in parts_of(kb).index.entries()][0] == "knowledge_base/api/a.md"  # replaced in place
    assert parts_of(kb).index.exact_match("ERR_GATEWAY_DOWN")[0].file_path == "knowledge_base/api/a.md"
    assert_consistent(kb)


def test_byte_identical_reupload_does_nothing(kb):
    first = kb.documents.upload("a.md", PAYMENT.encode(), "api").document
    again = kb.documents.upload("a.md", PAYMENT.encode(), "api")
    assert again.action == "unchanged"
    assert again.document.updated_at == first.updated_at


# -- validation: hostile names and bad bytes --------------------------------------------------------------------
@pytest.mark.parametrize(
    "name",
    ["../x.md", "/etc/x.md", "a\0.md", ".md", "x" * 300 + ".md", "a/b.md", "a\\b.md", "..md", "notes.txt",
     "run.md\n", ".hidden.md", " spaced.md", "a\u202e.md"],
    ids=["dotdot", "absolute", "nul", "only-suffix", "300-chars", "slash", "backslash", "double-dot", "txt",
         "newline", "hidden", "leading-space", "bidi-control"],
)
def test_hostile_file_names_are_refused_and_leave_nothing(kb, tmp_path, name):
    with pytest.raises(UploadRejected):
        kb.documents.upload(name, PAYMENT.encode(), "api")
    assert list((tmp_path / "knowledge_base").rglob("*")) == []
    assert not (tmp_path / "x.md").exists()
    assert_consistent(kb)


@pytest.mark.parametrize("category", ["../api", "", "a//b", "/api", "api/", "-x", "x" * 65, "中文", "con",
                                      "docs/.hidden", "a\\b", "/".join(["d"] * 17)])
def test_invalid_categories_are_refused(kb, category):
    with pytest.raises(UploadRejected, match="category"):
        kb.documents.upload("a.md", PAYMENT.encode(), category)
    assert_consistent(kb)


def test_a_category_is_a_folder_path_at_any_depth(kb, tmp_path):
    """Documentation trees: the category is the folder path (upper case, dots and nesting allowed)."""
    outcome = kb.documents.upload("limit-req.md", PAYMENT.encode(), "apisix/docs/en/latest/plugins")
    assert outcome.document.category == "apisix/docs/en/latest/plugins"
    assert outcome.document.file_path == "knowledge_base/apisix/docs/en/latest/plugins/limit-req.md"
    assert (tmp_path / "knowledge_base/apisix/docs/en/latest/plugins/limit-req.md").is_file()
    kb.documents.upload("cache.md", CACHE.encode(), "Guides/v2.1")
    assert parts_of(kb).index.get(outcome.document.file_path).category == "apisix/docs/en/latest/plugins"
    assert kb.lookup_knowledge("ERR_TIMEOUT")["primary"]["source"] == outcome.document.file_path
    assert_consistent(kb)


@pytest.mark.parametrize(
    ("data", "reason"),
    [("caf\xe9".encode("latin-1"), "not UTF-8"), (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary"),
     (b"   \n", "empty"), (b"x" * (64 * 1024 + 1), "limit")],
    ids=["latin-1", "png", "blank", "too-big"],
)
def test_bad_bytes_are_refused_with_a_clear_error(open_kb, tmp_path, data, reason):
    kb = open_kb(max_upload_bytes=64 * 1024)
    with pytest.raises(UploadRejected, match=reason):
        kb.documents.upload("a.md", data, "api")
    assert_consistent(kb)


def test_nfc_normalises_file_names(kb, tmp_path):
    decomposed = "cafe\u0301.md"
    record = kb.documents.upload(decomposed, PAYMENT.encode(), "api").document
    assert record.file_name == "caf\u00e9.md"
    assert (tmp_path / "knowledge_base/api/caf\u00e9.md").exists()


def test_bom_and_crlf_upload_are_fine(kb):
    data = b"\xef\xbb\xbf" + PAYMENT.replace("\n", "\r\n").encode()
    kb.documents.upload("crlf.md", data, "api")
    assert parts_of(kb).index.exact_match("ERR_TIMEOUT")


# -- failure injection ------------------------------------------------------------------------------------------
def _boom(*_args, **_kwargs):
    raise RuntimeError("injected failure")


def inject(kb, monkeypatch, where: str) -> None:
    if where == "embedding":
        monkeypatch.setattr(parts_of(kb).embedder, "encode_documents", _boom)
    elif where == "milvus write":
        monkeypatch.setattr(parts_of(kb).vectors, "upsert", _boom)
    elif where == "milvus delete":
        monkeypatch.setattr(parts_of(kb).vectors, "delete_document", _boom)
        monkeypatch.setattr(parts_of(kb).vectors, "delete_chunks_from", _boom)
    elif where == "database commit":  # the last step: the row would go from PENDING to INDEXED
        monkeypatch.setattr(parts_of(kb).metadata, "finish_write", _boom)
    elif where == "intent record":  # the first step: the row as PENDING
        monkeypatch.setattr(parts_of(kb).metadata, "save_document", _boom)
    elif where == "file write":
        import kb_core.documents.service as documents

        monkeypatch.setattr(documents.os, "replace", _boom)
    else:  # pragma: no cover
        raise AssertionError(where)


UPLOAD_FAILURES = ["embedding", "intent record", "file write", "milvus write", "database commit"]


@pytest.mark.parametrize("where", UPLOAD_FAILURES)
def test_failed_upload_leaves_nothing_behind(kb, monkeypatch, tmp_path, where):
    kb.documents.upload("other.md", CACHE.encode(), "domain")
    inject(kb, monkeypatch, where)
    with pytest.raises(DocumentError) as info:
        kb.documents.upload("new.md", PAYMENT.encode(), "api")
    assert "injected" in str(info.value)
    assert info.value.step
    monkeypatch.undo()
    assert not (tmp_path / "knowledge_base/api/new.md").exists()
    assert parts_of(kb).index.exact_match("ERR_TIMEOUT") == []
    assert [r.file_name for r in kb.documents.list()] == ["other.md"]
    assert_consistent(kb)


@pytest.mark.parametrize("where", UPLOAD_FAILURES + ["milvus delete"])
def test_failed_replacement_restores_the_previous_version(kb, monkeypatch, tmp_path, where):
    original = kb.documents.upload("a.md", PAYMENT.encode(), "api").document
    before_chunks = kb.documents.chunks(original.id)
    inject(kb, monkeypatch, where)
    # shorter than the original, so the replacement also has stale chunks to delete
    changed = PAYMENT.replace("ERR_TIMEOUT, 超时", "ERR_NEW, 超时").split("## 1.")[0]
    with pytest.raises(DocumentError):
        kb.documents.upload("a.md", changed.encode(), "api")
    monkeypatch.undo()
    assert (tmp_path / "knowledge_base/api/a.md").read_bytes() == PAYMENT.encode()
    assert kb.documents.get(original.id).content_sha256 == original.content_sha256
    assert [c.text for c in kb.documents.chunks(original.id)] == [c.text for c in before_chunks]
    assert parts_of(kb).index.exact_match("ERR_TIMEOUT") and not parts_of(kb).index.exact_match("ERR_NEW")
    assert_consistent(kb)


def test_error_names_the_failed_step(kb, monkeypatch):
    inject(kb, monkeypatch, "milvus write")
    with pytest.raises(DocumentError, match="write vectors failed: RuntimeError: injected failure"):
        kb.documents.upload("a.md", PAYMENT.encode(), "api")


@pytest.mark.parametrize("where", ["milvus delete", "database commit"])
def test_failed_delete_leaves_a_state_that_a_retry_completes(kb, monkeypatch, tmp_path, where):
    # the retry is this test's to make: the follower's recovery would otherwise finish the delete on its own
    # if its 10-second chore fell between the failure and the retry
    parts_of(kb).follower.stop()
    record = kb.documents.upload("a.md", PAYMENT.encode(), "api").document
    if where == "database commit":
        from kb_core.storage.metadata_store import MetadataStoreError

        def fail(_doc_id):
            raise MetadataStoreError("injected: cannot delete the document row")

        monkeypatch.setattr(parts_of(kb).metadata, "delete_document", fail)
    else:
        inject(kb, monkeypatch, where)
    with pytest.raises(DocumentError, match="again"):
        kb.documents.delete(record.id)
    monkeypatch.undo()
    assert kb.documents.get(record.id) is not None  # the row survives, so a retry can find it
    assert kb.documents.delete(record.id).deleted
    assert not (tmp_path / "knowledge_base/api/a.md").exists()
    assert_consistent(kb)


def test_failed_file_removal_is_recorded_and_retry_completes(kb, monkeypatch, tmp_path):
    """The file cannot be moved into the trash: the row says so, the file stays, the prepared trash item is
    taken back, and deleting again finishes."""
    import os
    from pathlib import Path

    parts_of(kb).follower.stop()  # the retry is this test's to make (see above)
    record = kb.documents.upload("a.md", PAYMENT.encode(), "api").document
    real_rename = os.rename

    def refuse(src, dst, *args, **kwargs):
        if Path(src) == tmp_path / "knowledge_base/api/a.md":
            raise PermissionError("injected: read-only file system")
        return real_rename(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "rename", refuse)
    with pytest.raises(DocumentError, match="move to the trash failed"):
        kb.documents.delete(record.id)
    monkeypatch.undo()
    row = kb.documents.get(record.id)
    assert row.status == DocumentStatus.FAILED and "deletion incomplete" in row.last_error
    assert (tmp_path / "knowledge_base/api/a.md").read_bytes() == PAYMENT.encode() and kb.trash.items() == []
    assert kb.documents.delete(record.id).deleted
    assert [item.file_path for item in kb.trash.items()] == ["knowledge_base/api/a.md"]
    assert_consistent(kb)


def test_database_outage_before_writing_refuses_cleanly(kb, monkeypatch, tmp_path):
    from kb_core.storage.metadata_store import MetadataStoreError

    def down(_path):
        raise MetadataStoreError("injected: cannot read from the database")

    monkeypatch.setattr(parts_of(kb).metadata, "get_by_path", down)
    with pytest.raises(DocumentError, match="database"):
        kb.documents.upload("a.md", PAYMENT.encode(), "api")
    monkeypatch.undo()
    assert not (tmp_path / "knowledge_base/api/a.md").exists()
    assert_consistent(kb)


# -- re-index and sync ---------------------------------------------------------------------------------------
def test_sync_brings_in_files_placed_by_hand_and_reports_missing(kb, tmp_path):
    kept = kb.documents.upload("kept.md", CACHE.encode(), "domain").document
    gone = kb.documents.upload("gone.md", PAYMENT.encode(), "api").document
    (tmp_path / "knowledge_base/api/gone.md").unlink()
    (tmp_path / "knowledge_base/troubleshooting").mkdir(parents=True)
    (tmp_path / "knowledge_base/troubleshooting/by-hand.md").write_text(
        doc("By hand", ["HANDMADE_KEYWORD"], body="# Placed with git\n\nSome text.\n"), encoding="utf-8")
    report = kb.documents.reconcile()
    assert report.added == ("knowledge_base/troubleshooting/by-hand.md",)
    assert report.unchanged == (kept.file_path,)
    assert report.missing_files == (gone.file_path,)
    assert parts_of(kb).index.exact_match("HANDMADE_KEYWORD")
    kb.documents.delete(gone.id)
    assert_consistent(kb)


def test_sync_picks_up_edits_made_on_disk(kb, tmp_path):
    record = kb.documents.upload("a.md", PAYMENT.encode(), "api").document
    (tmp_path / "knowledge_base/api/a.md").write_text(PAYMENT.replace("ERR_TIMEOUT", "ERR_EDITED"), encoding="utf-8")
    report = kb.documents.reconcile()
    assert report.updated == (record.file_path,)
    assert parts_of(kb).index.exact_match("ERR_EDITED")
    assert_consistent(kb)


def test_reindex_after_a_model_change(open_kb, tmp_path, tiny_model, db_url):
    first = open_kb(db_url=db_url, model=NO_MODEL)
    record = first.documents.upload("a.md", PAYMENT.encode(), "api").document
    assert record.embedding_model == "fulltext"
    first.close()
    second = open_kb(db_url=db_url, model=str(tiny_model))
    assert parts_of(second).vectors.collection != parts_of(first).vectors.collection
    report = second.documents.reindex_all()
    assert report.reindexed == (record.file_path,) and report.failed == ()
    assert second.documents.get(record.id).embedding_model == str(tiny_model)
    assert_consistent(second)


def test_status_reports_each_store(kb):
    kb.documents.upload("a.md", PAYMENT.encode(), "api")
    kb.documents.upload("plain.md", b"# no frontmatter\n\nbody\n", "api")
    status = kb.status()
    assert (status.counts.l0, status.counts.database, status.counts.milvus) == (1, 2, 2)
    assert status.counts.consistent
    assert status.model.state == "ready" and status.dense_search
    assert "password" not in status.database_url


@pytest.mark.processes
def test_a_lite_directory_locked_by_another_process_degrades_with_a_clear_message(tmp_path):
    """Degraded, not dead: L0 answers from the files; L1, writes and status name the cause and the fix."""
    from support.stores import bare_lite_holder, make_settings

    from kb_core.bootstrap import open_knowledge_base

    with bare_lite_holder(tmp_path / "kb_milvus.db"):
        (tmp_path / "knowledge_base/api").mkdir(parents=True)
        (tmp_path / "knowledge_base/api/payment-errors.md").write_text(PAYMENT)
        kb = open_knowledge_base(make_settings(tmp_path))
        try:
            assert kb.lookup_knowledge("ERR_TIMEOUT")["primary"]["confidence"] == "high"  # L0 from the files
            assert "milvus-lite server" in kb.status().milvus_error and "KB_MILVUS_URI" in kb.status().milvus_error
            with pytest.raises(KnowledgeBaseError, match="another process"):
                kb.documents.upload("cache.md", CACHE.encode(), "domain")
            assert not (tmp_path / "knowledge_base/domain/cache.md").exists()
        finally:
            kb.close()


def test_status_flags_vectors_missing_behind_our_back(kb):
    first = kb.documents.upload("a.md", PAYMENT.encode(), "api").document
    kb.documents.upload("b.md", CACHE.encode(), "domain")
    parts_of(kb).vectors.delete_document(first.id)  # e.g. someone dropped rows in Milvus directly
    counts = kb.status().counts
    assert (counts.database, counts.milvus) == (2, 1)
    assert not counts.consistent and any("run Reconcile" in p for p in counts.problems)
    report = kb.documents.reconcile()
    assert report.reindexed == (first.file_path,)
    assert kb.status().counts.consistent
    assert_consistent(kb)
    kb.documents.reindex(first.id)
    assert kb.status().counts.consistent


def test_the_model_never_blocks_writes_and_repair_fills_in_dense_vectors(open_kb, tiny_model):
    """Uploads while the model is still loading go in for full text at once; repair adds the vectors."""
    from kb_core.documents.service import DENSE_MISSING

    kb = open_kb(model=str(tiny_model))  # open_kb waits for the model: make it look "loading" again
    real_state = parts_of(kb).embedder.state
    parts_of(kb).embedder._state = type(real_state)("loading", real_state.model_id, "not started")
    outcome = kb.documents.upload("a.md", PAYMENT.encode(), "api")
    assert outcome.document.last_error == DENSE_MISSING and outcome.document.embedding_model == "fulltext"
    assert any("full-text search only" in w for w in outcome.warnings)
    assert kb.lookup("渠道在 3 秒内未响应").found  # BM25 finds it now
    parts_of(kb).embedder._state = real_state
    report = kb.documents.reconcile()
    assert report.reindexed == (outcome.document.file_path,)
    row = kb.documents.get(outcome.document.id)
    assert row.last_error is None and row.embedding_model == str(tiny_model)
    chunks = parts_of(kb).vectors.chunks_of(row.id, with_vectors=True)
    assert all(c.dense is not None and c.dense[0] != 1.0 for c in chunks)
    assert_consistent(kb)


def test_a_closed_knowledge_base_refuses_writes(tmp_path):
    from support.stores import make_settings

    from kb_core import KnowledgeBaseError
    from kb_core.bootstrap import open_knowledge_base

    kb = open_knowledge_base(make_settings(tmp_path))
    kb.documents.upload("a.md", PAYMENT.encode(), "api")
    kb.close()
    with pytest.raises(KnowledgeBaseError, match="closed"):
        kb.documents.upload("b.md", PAYMENT.encode(), "api")
    assert not (tmp_path / "knowledge_base/api/b.md").exists()


def test_a_page_that_is_only_its_heading_is_indexed_by_its_title_and_an_empty_one_is_refused(kb, tmp_path):
    """Translated sites keep stub pages that are only a heading (a real tree had one): refused, the file stayed
    "not indexed" for ever and the status said the stores disagree; it is indexed by its title instead. A page
    with no text at all is still refused, with a reason."""
    stub = tmp_path / "knowledge_base" / "ops" / "dr-standalone.md"
    stub.parent.mkdir(parents=True, exist_ok=True)
    stub.write_text("# Standalone 的 DR 方案\n", encoding="utf-8")
    (tmp_path / "knowledge_base" / "ops" / "blank.md").write_text("\n\n", encoding="utf-8")
    report = kb.documents.reconcile()
    assert [path for path, _ in report.failed] == ["knowledge_base/ops/blank.md"]
    assert "is empty" in dict(report.failed)["knowledge_base/ops/blank.md"]
    row = next(d for d in kb.documents.list() if d.file_path == "knowledge_base/ops/dr-standalone.md")
    assert row.status == DocumentStatus.INDEXED and row.chunk_count == 1
    assert "knowledge_base/ops/dr-standalone.md" not in kb.documents.unindexed_files()
    found = kb.lookup("Standalone 的 DR 方案 怎么做")  # a question: L1 finds the stub by its title
    assert found.supplement is not None or found.primary is not None
    assert "dr-standalone.md" in json.dumps(found.to_dict(), ensure_ascii=False)
    with pytest.raises(UploadRejected, match="no text to index"):  # (whitespace is "empty", comments are not)
        kb.documents.upload("empty.md", b"<!-- nothing here yet -->\n", "ops")
