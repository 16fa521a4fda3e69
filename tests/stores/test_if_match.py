"""`upload(..., if_match=hash)`: a replace based on a stale version is refused, writing nothing."""

from __future__ import annotations

import hashlib
import threading

import pytest
from support.documents import doc
from support.stores import assert_consistent

from kb_core.errors import DocumentConflictError, KnowledgeBaseError

GATEWAY_V1 = doc("Rate limiting in the API gateway", ["limit-req", "API Gateway", "限流"],
                 "How the gateway limits requests per consumer.",
                 "<!-- Licensed under the Apache License, Version 2.0 -->\n# limit-req\n\nburst and rate.\n")
GATEWAY_V2 = GATEWAY_V1.replace("burst and rate.", "burst, rate and the nodelay option.")


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture
def kb(open_kb, db_url):
    return open_kb(db_url=db_url)


def test_matching_hash_replaces(kb, tmp_path):
    base = kb.documents.upload("limit-req.md", GATEWAY_V1.encode(), "gateway").document.content_sha256
    assert base == _sha(GATEWAY_V1)
    outcome = kb.documents.upload("limit-req.md", GATEWAY_V2.encode(), "gateway", if_match=base)
    assert outcome.action == "replaced"
    assert (tmp_path / "knowledge_base/gateway/limit-req.md").read_text(encoding="utf-8") == GATEWAY_V2
    assert_consistent(kb)


def test_stale_hash_is_refused_and_nothing_is_written(kb, tmp_path):
    base = kb.documents.upload("limit-req.md", GATEWAY_V1.encode(), "gateway").document.content_sha256
    kb.documents.upload("limit-req.md", GATEWAY_V2.encode(), "gateway")  # a colleague's newer version
    stale = GATEWAY_V1.replace("burst and rate.", "my edit of the old version.")
    with pytest.raises(DocumentConflictError) as caught:
        kb.documents.upload("limit-req.md", stale.encode(), "gateway", if_match=base)
    error = caught.value
    assert isinstance(error, KnowledgeBaseError)
    assert error.path == "knowledge_base/gateway/limit-req.md"
    assert (error.expected, error.current) == (base, _sha(GATEWAY_V2))
    assert "knowledge_base/gateway/limit-req.md" in str(error) and base[:12] in str(error)
    assert _sha(GATEWAY_V2)[:12] in str(error)
    assert (tmp_path / "knowledge_base/gateway/limit-req.md").read_text(encoding="utf-8") == GATEWAY_V2
    [row] = kb.documents.list()
    assert row.content_sha256 == _sha(GATEWAY_V2)
    assert_consistent(kb)


def test_if_match_for_a_missing_or_deleted_document_is_a_conflict(kb, tmp_path):
    with pytest.raises(DocumentConflictError, match="does not exist") as caught:
        kb.documents.upload("new.md", GATEWAY_V1.encode(), "gateway", if_match=_sha("anything"))
    assert caught.value.current is None
    assert not (tmp_path / "knowledge_base/gateway/new.md").exists()
    record = kb.documents.upload("limit-req.md", GATEWAY_V1.encode(), "gateway").document
    kb.documents.delete(record.id)
    with pytest.raises(DocumentConflictError):
        kb.documents.upload("limit-req.md", GATEWAY_V2.encode(), "gateway", if_match=record.content_sha256)
    assert kb.documents.list() == []
    assert_consistent(kb)


def test_two_knowledge_bases_replacing_from_one_base_version_exactly_one_wins(open_kb, db_url, tmp_path):
    """Two KnowledgeBase objects on one database and folder (as two processes would be): each has its own
    in-process lock, so only the database lock and the version check keep the second from overwriting."""
    first = open_kb(db_url=db_url)
    base = first.documents.upload("limit-req.md", GATEWAY_V1.encode(), "gateway").document.content_sha256
    second = open_kb(db_url=db_url)
    edits = {"first": GATEWAY_V1.replace("burst and rate.", "edit by the first curator."),
             "second": GATEWAY_V1.replace("burst and rate.", "edit by the second curator.")}
    outcomes: dict[str, object] = {}
    start = threading.Barrier(2)

    def replace(name, kb):
        start.wait()
        try:
            outcomes[name] = kb.documents.upload("limit-req.md", edits[name].encode(), "gateway", if_match=base).action
        except KnowledgeBaseError as exc:
            outcomes[name] = exc

    threads = [threading.Thread(target=replace, args=item) for item in (("first", first), ("second", second))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    winners = [name for name, result in outcomes.items() if result == "replaced"]
    losers = [result for result in outcomes.values() if isinstance(result, DocumentConflictError)]
    assert len(winners) == 1 and len(losers) == 1, outcomes
    on_disk = (tmp_path / "knowledge_base/gateway/limit-req.md").read_text(encoding="utf-8")
    assert on_disk == edits[winners[0]]
    assert losers[0].current == _sha(edits[winners[0]])
    assert_consistent(first)


def test_a_malformed_if_match_is_refused_as_bad_input_not_as_a_conflict(tmp_path):
    from support.stores import make_settings

    from kb_core.bootstrap import open_knowledge_base
    from kb_core.errors import DocumentConflictError, UploadRejected

    kb = open_knowledge_base(make_settings(tmp_path))
    try:
        kb.documents.upload("a.md", b"---\ntitle: A\nkeywords: [A_KEY]\n---\n# A\n", "api")
        with pytest.raises(UploadRejected, match="64 hex digits") as raised:
            kb.documents.upload("a.md", b"---\ntitle: A2\nkeywords: [A_KEY]\n---\n# A\n", "api", if_match="nothex")
        assert not isinstance(raised.value, DocumentConflictError)
        assert "A2" not in (tmp_path / "knowledge_base/api/a.md").read_text(encoding="utf-8")
    finally:
        kb.close()
