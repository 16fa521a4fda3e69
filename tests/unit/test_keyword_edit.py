"""A keyword edit on real stores: saved through the upload path (disk, database, Milvus and L0 agree), refused
when the file changed after the preview, and documents whose file has gone removed on their own."""

from __future__ import annotations

import pytest
from support.documents import doc, write_doc
from support.stores import assert_consistent

from kb_core.bootstrap import parts_of
from kb_core.errors import KnowledgeBaseError, UploadRejected

EN = "knowledge_base/gateway/limit-req.md"
ZH = "knowledge_base/gateway-zh/limit-req.md"


@pytest.fixture
def kb(open_kb):
    return open_kb(files={
        EN: doc("limit-req", ["limit-req", "leaky bucket"], body="# limit-req\n\nnodelay\n"),
        ZH: "---\n# 中文版\ntitle: limit-req 限流\nkeywords:\n  - limit-req  # 与英文版相同\n"
            "  - 限流\nsummary: 漏桶算法\n---\n\n# limit-req\n\n正文\n",
    }, reconcile=True)


def test_a_keyword_edit_goes_through_upload_and_every_store_follows(kb):
    assert kb.keywords.of(ZH) == ("limit-req", "限流")
    edit = kb.documents.prepare_edit(ZH, keywords=["限流", "漏桶限流", "  ", "限流"])
    assert edit.keywords == ("限流", "漏桶限流") and edit.removed == ("limit-req",) and edit.added == ("漏桶限流",)
    assert edit.preview.can_upload and edit.preview.file_path == ZH and edit.preview.replaces_existing
    on_disk = parts_of(kb).folder.resolve(ZH).read_text(encoding="utf-8")
    assert on_disk.count("limit-req  # 与英文版相同") == 1  # not written yet
    outcome = kb.documents.save_edit(edit)
    assert outcome.action == "replaced"
    text = parts_of(kb).folder.resolve(ZH).read_text(encoding="utf-8")
    assert text.startswith("---\n# 中文版\ntitle: limit-req 限流\nkeywords:\n  - 限流\n  - 漏桶限流\nsummary:")
    assert [m.entry.file_path for m in parts_of(kb).index.match("limit-req")] == [EN]
    assert kb.lookup("漏桶限流").primary.confidence == "high"
    assert_consistent(kb)


def test_a_preview_of_an_older_version_is_not_saved(kb):
    edit = kb.documents.prepare_edit(EN, keywords=["limit-req", "rate limiting"])
    path = parts_of(kb).folder.resolve(EN)
    newer = path.read_text(encoding="utf-8").replace("nodelay", "nodelay and burst")
    path.write_text(newer, encoding="utf-8")
    with pytest.raises(UploadRejected, match="changed on disk since the preview"):
        kb.documents.save_edit(edit)
    assert path.read_text(encoding="utf-8") == newer


def test_documents_outside_a_category_folder_or_with_broken_frontmatter_are_refused(kb, tmp_path):
    write_doc(tmp_path, "knowledge_base/gateway/nested/deep.md", doc("Deep", ["deep"]))  # a nested category
    deep = kb.documents.prepare_edit("knowledge_base/gateway/nested/deep.md", keywords=["deeper"])
    assert deep.category == "gateway/nested"
    write_doc(tmp_path, "knowledge_base/loose.md", doc("Loose", ["loose"]))  # no category folder
    with pytest.raises(UploadRejected, match="not in a category folder"):
        kb.documents.prepare_edit("knowledge_base/loose.md", keywords=["looser"])
    write_doc(tmp_path, "knowledge_base/ops/broken.md", "---\ntitle: [unclosed\n---\n\n# Broken\n")
    kb.documents.reconcile()
    with pytest.raises(KnowledgeBaseError, match="invalid YAML.*fix the file by hand"):
        kb.documents.prepare_edit("knowledge_base/ops/broken.md", keywords=["broken"])


def test_a_document_without_frontmatter_gets_a_block_holding_its_keywords(kb, tmp_path):
    """L1 only until now: the edit adds a frontmatter block (the body stays byte for byte) and L0 knows it."""
    path = write_doc(tmp_path, "knowledge_base/ops/runbook.md", "# Runbook\n\nno frontmatter\n")
    kb.documents.reconcile()
    with pytest.raises(KnowledgeBaseError, match="no frontmatter"):
        kb.keywords.of("knowledge_base/ops/runbook.md")  # the keyword map's read: L0 does not know it
    edit = kb.documents.prepare_edit("knowledge_base/ops/runbook.md", keywords=["runbook"])
    assert edit.data == b"---\nkeywords: [runbook]\n---\n# Runbook\n\nno frontmatter\n"
    assert any("missing required field(s): title, summary" in f.message for f in edit.preview.findings)
    kb.documents.save_edit(edit)
    assert path.read_bytes() == edit.data
    assert kb.lookup("runbook").primary.source == "knowledge_base/ops/runbook.md"
    assert_consistent(kb)


def test_documents_whose_file_is_gone_are_removed_and_a_file_that_is_back_stays(kb):
    parts_of(kb).folder.resolve(EN).unlink()
    assert [d.file_path for d in kb.documents.missing_files()] == [EN]
    report = kb.documents.reconcile(delete_missing=True)
    assert report.removed == (EN,) and report.failed == ()
    assert kb.documents.missing_files() == [] and EN not in {d.file_path for d in kb.documents.list()}
    assert_consistent(kb)
