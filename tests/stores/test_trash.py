"""The trash on real stores (SQLite and MariaDB, Milvus Lite): a delete moves the file into
`kb_trash/` outside the scanned folder and removes its row, vectors and L0 entry; a restore brings it back byte
for byte through the upload; the purge removes items by age; roles, two knowledge bases on one database (and a
real second process), hostile trash items and a trash that cannot be written."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support.documents import doc
from support.stores import assert_consistent, make_settings, two_knowledge_bases

from kb_core import DocumentError, KnowledgeBaseError
from kb_core.access import Actor, Role
from kb_core.bootstrap import open_knowledge_base, parts_of
from kb_core.console import AccessDeniedError, DocumentConflictError, RestoreConflictError, TrashItem
from kb_core.documents.trash import DANGLING_AFTER, RECORD_NAME
from kb_core.errors import InvalidInputError

NESTED = "apisix/docs/en/latest/plugins"
PATH = f"knowledge_base/{NESTED}/limit-req.md"
# a BOM, CRLF line ends, trailing spaces and no final newline: a restore must give back exactly these bytes
ORIGINAL = ("\ufeff---\r\ntitle: limit-req\r\nkeywords: [LIMIT_REQ_TRASH, 漏桶]\r\nsummary: leaky bucket  \r\n---\r\n"
            "\r\n# limit-req\r\n\r\nRequests beyond `rate` wait in a leaky bucket.  ").encode("utf-8")
CURATOR = Actor("carl@example.com", Role.CURATOR)
VIEWER = Actor("vera@example.com", Role.VIEWER)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _wait_for(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "not reached in time"
        time.sleep(0.05)


@pytest.fixture
def kb(open_kb, db_url):
    return open_kb(db_url=db_url)


def _upload(kb, data: bytes = ORIGINAL, name: str = "limit-req.md", category: str = NESTED):
    return kb.documents.upload(name, data, category).document


def _file_of(kb, item: TrashItem) -> Path:
    return parts_of(kb).trash.directory / item.item_id / item.relative_path


# -- delete -> trash -> restore -----------------------------------------------------------------------------
def test_delete_moves_the_file_to_the_trash_and_restore_brings_it_back_byte_for_byte(kb, tmp_path):
    record = _upload(kb)
    _upload(kb, doc("Bystander", ["BYSTANDER_KEY"]).encode(), "other.md", "ops")
    outcome = kb.as_user(CURATOR).documents.delete(record.id)

    assert outcome.deleted and outcome.message == f"deleted {PATH}: its file is in the trash"
    item = outcome.trashed
    assert item is not None and kb.trash.items() == [item]
    assert (item.file_path, item.relative_path, item.category, item.file_name) == (
        PATH, f"{NESTED}/limit-req.md", NESTED, "limit-req.md")
    assert item.deleted_by == "carl@example.com" and item.problem is None
    assert (item.sha256, item.size_bytes) == (_sha(ORIGINAL), len(ORIGINAL))
    assert abs((datetime.now(UTC) - item.deleted_at).total_seconds()) < 60
    # outside the scanned folder; gone from every store
    assert _file_of(kb, item).read_bytes() == ORIGINAL
    assert tmp_path / "kb_trash" == parts_of(kb).trash.directory
    assert not (tmp_path / PATH).exists()
    assert kb.documents.get(record.id) is None and parts_of(kb).vectors.chunks_of(record.id) == []
    assert parts_of(kb).index.exact_match("LIMIT_REQ_TRASH") == []
    assert_consistent(kb)
    report = kb.documents.reconcile()  # the trash is not under the base: nothing comes back by itself
    assert report.added == () and not (tmp_path / PATH).exists()

    restored = kb.as_user(CURATOR).trash.restore(item)
    assert restored.action == "indexed" and restored.document.file_path == PATH
    assert (tmp_path / PATH).read_bytes() == ORIGINAL
    assert restored.document.content_sha256 == _sha(ORIGINAL) and restored.document.changed_by == "carl@example.com"
    assert kb.lookup_knowledge("LIMIT_REQ_TRASH")["primary"]["source"] == PATH
    assert kb.trash.items() == [] and not (parts_of(kb).trash.directory / item.item_id).exists()
    assert_consistent(kb)


def test_restoring_onto_a_path_that_exists_again_asks_for_replace(kb, tmp_path):
    item = kb.documents.delete(_upload(kb).id).trashed
    newer = doc("limit-req v2", ["LIMIT_REQ_V2"]).encode()
    _upload(kb, newer)

    with pytest.raises(RestoreConflictError, match="exists again") as refused:
        kb.trash.restore(PATH)
    assert isinstance(refused.value, DocumentConflictError) and refused.value.current == _sha(newer)
    assert "replace" in str(refused.value) and refused.value.path == PATH
    assert (tmp_path / PATH).read_bytes() == newer and kb.trash.items() == [item]  # nothing written, the item stays

    outcome = kb.trash.restore(item.item_id, replace=True)
    assert outcome.action == "replaced"
    assert (tmp_path / PATH).read_bytes() == ORIGINAL
    # the version it replaced is not thrown away: it is in the trash now, the restored item is not
    [kept] = kb.trash.items()
    assert kept.item_id != item.item_id and kept.file_path == PATH and kept.sha256 == _sha(newer)
    assert _file_of(kb, kept).read_bytes() == newer
    assert parts_of(kb).index.exact_match("LIMIT_REQ_TRASH") and not parts_of(kb).index.exact_match("LIMIT_REQ_V2")
    assert_consistent(kb)


def test_a_restore_cut_short_before_the_item_left_the_trash_counts_as_done(kb, tmp_path):
    """A kill between the restore's upload and the removal of the item leaves both; restoring again finds the very
    same bytes in place: no conflict, the item goes."""
    item = kb.documents.delete(_upload(kb).id).trashed
    _upload(kb)  # the same bytes, as the interrupted restore left them
    assert kb.trash.restore(item).action == "unchanged"
    assert kb.trash.items() == []
    assert_consistent(kb)


def test_the_same_path_deleted_twice_keeps_both(kb, tmp_path):
    first = kb.documents.delete(_upload(kb).id).trashed
    second_bytes = ORIGINAL.replace(b"leaky bucket  ", b"second version")
    second = kb.documents.delete(_upload(kb, second_bytes).id).trashed
    items = kb.trash.items()
    assert [i.item_id for i in items] == [second.item_id, first.item_id]  # newest first
    assert first.item_id != second.item_id and {i.file_path for i in items} == {PATH}
    assert kb.trash.restore(f"{NESTED}/limit-req.md").document.content_sha256 == _sha(second_bytes)  # a path: newest
    with pytest.raises(RestoreConflictError):
        kb.trash.restore(first)
    kb.trash.restore(first, replace=True)
    assert (tmp_path / PATH).read_bytes() == ORIGINAL
    assert [i.sha256 for i in kb.trash.items()] == [_sha(second_bytes)]  # the replaced version went to the trash
    assert_consistent(kb)


def test_restore_goes_through_the_upload_checks(kb, tmp_path, monkeypatch):
    item = kb.documents.delete(_upload(kb).id).trashed
    with pytest.raises(InvalidInputError, match="not in the trash"):
        kb.trash.restore("knowledge_base/api/never-deleted.md")
    with pytest.raises(InvalidInputError, match="not in the trash"):
        kb.trash.restore("20000101T000000000000Z-00000000")
    with pytest.raises(InvalidInputError):
        kb.trash.restore(None)
    # the file was changed in the trash: not the deleted document any more
    _file_of(kb, item).write_bytes(ORIGINAL + b"\ntampered")
    with pytest.raises(DocumentError, match="is not the file that was deleted"):
        kb.trash.restore(item)
    assert not (tmp_path / PATH).exists()
    # larger than KB_MAX_UPLOAD_BYTES now: refused by the read, nothing written
    _file_of(kb, item).write_bytes(ORIGINAL)
    monkeypatch.setattr(parts_of(kb).folder, "_max_bytes", 10)  # as if KB_MAX_UPLOAD_BYTES had been lowered
    with pytest.raises(DocumentError, match="larger than"):
        kb.trash.restore(item)
    monkeypatch.undo()
    assert kb.trash.restore(item).action == "indexed"


def test_a_deleted_document_whose_file_was_gone_leaves_nothing_in_the_trash(kb, tmp_path):
    record = _upload(kb)
    (tmp_path / PATH).unlink()
    outcome = kb.documents.delete(record.id)
    assert outcome.deleted and outcome.trashed is None and "no file to keep" in outcome.message
    assert kb.trash.items() == []
    assert_consistent(kb)


def test_a_link_in_place_of_the_file_is_removed_and_not_trashed(kb, tmp_path):
    record = _upload(kb)
    outside = tmp_path / "outside.md"
    outside.write_bytes(b"not the knowledge base's")
    (tmp_path / PATH).unlink()
    (tmp_path / PATH).symlink_to(outside)
    assert kb.documents.delete(record.id).trashed is None
    assert not os.path.lexists(tmp_path / PATH) and outside.read_bytes() == b"not the knowledge base's"
    assert kb.trash.items() == []


# -- purge ----------------------------------------------------------------------------------------------------
def _age(kb, item: TrashItem, days: float) -> None:
    """Make an item look deleted `days` ago (its record says when)."""
    record_path = parts_of(kb).trash.directory / item.item_id / RECORD_NAME
    record = json.loads(record_path.read_text(encoding="utf-8"))
    record["deleted_at"] = (datetime.now(UTC) - timedelta(days=days)).isoformat()
    record_path.write_text(json.dumps(record), encoding="utf-8")


def test_purge_removes_items_older_than_the_setting_or_the_age_given(kb):
    old = kb.documents.delete(_upload(kb, name="old.md").id).trashed
    middle = kb.documents.delete(_upload(kb, name="middle.md").id).trashed
    new = kb.documents.delete(_upload(kb, name="new.md").id).trashed
    _age(kb, old, 31)
    _age(kb, middle, 10)
    assert kb.settings.trash_days == 30
    assert [i.item_id for i in kb.trash.purge()] == [old.item_id]  # KB_TRASH_DAYS
    assert {i.item_id for i in kb.trash.items()} == {middle.item_id, new.item_id}
    assert [i.item_id for i in kb.trash.purge(older_than_days=7)] == [middle.item_id]
    assert [i.item_id for i in kb.trash.purge(items=[new.item_id])] == [new.item_id]  # any age, by id
    assert kb.trash.items() == [] and list(parts_of(kb).trash.directory.iterdir()) == []
    with pytest.raises(InvalidInputError):
        kb.trash.purge(older_than_days=-1)
    with pytest.raises(InvalidInputError, match="not in the trash"):
        kb.trash.purge(items=[new])


def test_opening_purges_old_items_in_the_background(tmp_path, monkeypatch):
    monkeypatch.setenv("KB_TRASH_DAYS", "3")
    kb = open_knowledge_base(make_settings(tmp_path))
    try:
        assert kb.settings.trash_days == 3
        kept = kb.documents.delete(_upload(kb, name="kept.md").id).trashed
        gone = kb.documents.delete(_upload(kb, name="gone.md").id).trashed
        _age(kb, gone, 4)
        _age(kb, kept, 2)
        trash_dir = parts_of(kb).trash.directory
        stale = trash_dir / "20000101T000000000000Z-0badc0de" / "api"  # an interrupted delete's folder, no file
        stale.mkdir(parents=True)
        old = time.time() - DANGLING_AFTER.total_seconds() - 60
        os.utime(stale.parent, (old, old))
        fresh = trash_dir / f"{datetime.now(UTC):%Y%m%dT%H%M%S%f}Z-0000cafe" / "api"  # may be a delete in flight
        fresh.mkdir(parents=True)
        rest = trash_dir / ".purging-20000101T000000000000Z-00000000-1234abcd"  # a killed purge's
        rest.mkdir()
    finally:
        kb.close()
    again = open_knowledge_base(make_settings(tmp_path))
    try:
        _wait_for(lambda: [i.item_id for i in again.trash.items()] == [kept.item_id] and not stale.parent.exists()
                  and not rest.exists())
        assert fresh.exists()
    finally:
        again.close()


# -- roles -----------------------------------------------------------------------------------------------------
def test_a_viewer_may_not_delete_restore_or_purge(kb, tmp_path):
    record = _upload(kb)
    viewer = kb.as_user(VIEWER)
    with pytest.raises(AccessDeniedError, match="may not delete documents"):
        viewer.documents.delete(record.id)
    assert (tmp_path / PATH).read_bytes() == ORIGINAL and kb.trash.items() == []
    item = kb.as_user(CURATOR).documents.delete(record.id).trashed
    with pytest.raises(AccessDeniedError, match="may not restore documents"):
        viewer.trash.restore(item)
    with pytest.raises(AccessDeniedError, match="may not purge the trash"):
        viewer.trash.purge(older_than_days=0)
    with pytest.raises(AccessDeniedError):
        viewer.trash.purge(items=[item])
    assert kb.trash.items() == [item] and not (tmp_path / PATH).exists()
    assert viewer.trash.items() == [item]  # listing is reading
    assert kb.as_user(CURATOR).trash.purge(items=[item]) == [item]


# -- hostile trash items --------------------------------------------------------------------------------------
@pytest.mark.parametrize("record", ["missing", "corrupt", "not-an-object", "wrong-path"])
def test_an_item_with_a_missing_or_broken_record_is_listed_and_can_be_restored_or_purged(kb, tmp_path, record):
    item = kb.documents.delete(_upload(kb).id).trashed
    record_path = parts_of(kb).trash.directory / item.item_id / RECORD_NAME
    if record == "missing":
        record_path.unlink()
    elif record == "corrupt":
        record_path.write_bytes(b'{"deleted_by": "carl@exa\x00\xff')
    elif record == "not-an-object":
        record_path.write_text("[1, 2]", encoding="utf-8")
    else:
        record_path.write_text(json.dumps({"relative_path": "../../etc/passwd", "deleted_by": "carl"}))
    [listed] = kb.trash.items()
    assert (listed.item_id, listed.file_path, listed.size_bytes) == (item.item_id, PATH, len(ORIGINAL))
    assert listed.sha256 is None and listed.problem
    assert listed.deleted_at == item.deleted_at  # the item folder's name says when
    assert listed.deleted_by == ("carl" if record == "wrong-path" else None)
    kb.trash.restore(listed)
    assert (tmp_path / PATH).read_bytes() == ORIGINAL and kb.trash.items() == []
    assert_consistent(kb)
    again = kb.documents.delete(kb.documents.list()[0].id).trashed
    (parts_of(kb).trash.directory / again.item_id / RECORD_NAME).unlink()
    assert kb.trash.purge(items=[again.item_id])[0].item_id == again.item_id and kb.trash.items() == []


def test_links_and_strays_in_the_trash_are_not_items(kb, tmp_path):
    item = kb.documents.delete(_upload(kb).id).trashed
    secret = tmp_path / "secret.md"
    secret.write_text("not a trashed document")
    trashed = _file_of(kb, item)
    trashed.unlink()
    trashed.symlink_to(secret)  # a link where the file was: never read through
    trash_dir = parts_of(kb).trash.directory
    (trash_dir / "stray.md").write_text("a file at the top of the trash")
    (trash_dir / "linked-item").symlink_to(tmp_path / "knowledge_base", target_is_directory=True)
    assert kb.trash.items() == []
    with pytest.raises(InvalidInputError):
        kb.trash.restore(item)
    with pytest.raises(InvalidInputError):
        kb.trash.restore("linked-item")


# -- failures -----------------------------------------------------------------------------------------------------
def test_a_trash_that_cannot_be_written_deletes_nothing(kb, tmp_path, monkeypatch):
    record = _upload(kb)

    def refuse(*_args, **_kwargs):
        raise PermissionError("injected: the trash is read-only")

    monkeypatch.setattr(parts_of(kb).trash, "prepare", refuse)
    with pytest.raises(DocumentError, match="nothing was deleted") as failed:
        kb.documents.delete(record.id)
    assert failed.value.step == "move to the trash"
    monkeypatch.undo()
    row = kb.documents.get(record.id)
    assert row.status == "INDEXED" and row.pending_operation is None
    assert (tmp_path / PATH).read_bytes() == ORIGINAL and kb.lookup_knowledge("LIMIT_REQ_TRASH")["found"]
    assert_consistent(kb)


def test_a_file_system_boundary_is_crossed_by_copying(kb, tmp_path, monkeypatch):
    import errno

    record = _upload(kb)
    real_rename = os.rename

    def cross_device(src, dst, *args, **kwargs):
        if Path(src) == tmp_path / PATH:
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        return real_rename(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "rename", cross_device)
    item = kb.documents.delete(record.id).trashed
    monkeypatch.undo()
    assert _file_of(kb, item).read_bytes() == ORIGINAL and item.sha256 == _sha(ORIGINAL)
    assert not (tmp_path / PATH).exists()
    assert_consistent(kb)


# -- where the trash is -------------------------------------------------------------------------------------------
def test_a_knowledge_base_at_the_app_root_keeps_its_trash_hidden_from_the_scan(open_kb, tmp_path):
    kb = open_kb(base_path=str(tmp_path))  # the app root itself
    assert parts_of(kb).trash.directory == tmp_path / ".kb_trash"
    record = kb.documents.upload("limit-req.md", ORIGINAL, "plugins").document
    item = kb.documents.delete(record.id).trashed
    assert _file_of(kb, item).read_bytes() == ORIGINAL
    report = kb.documents.reconcile()
    assert report.added == () and report.refused == () and kb.documents.list() == []
    assert_consistent(kb)


def test_a_knowledge_base_configured_as_dot_deletes_and_restores_its_files(open_kb, tmp_path):
    """KB_BASE_PATH=. : display paths have no base prefix (`plugins/limit-req.md`)."""
    kb = open_kb(base_path=".")
    record = kb.documents.upload("limit-req.md", ORIGINAL, "plugins").document
    assert record.file_path == "plugins/limit-req.md"
    item = kb.documents.delete(record.id).trashed
    assert not (tmp_path / "plugins/limit-req.md").exists() and _file_of(kb, item).read_bytes() == ORIGINAL
    assert kb.documents.reconcile().added == () and kb.documents.list() == []  # gone, not found again
    kb.trash.restore(item)
    assert (tmp_path / "plugins/limit-req.md").read_bytes() == ORIGINAL
    assert [d.file_path for d in kb.documents.list()] == ["plugins/limit-req.md"]
    assert_consistent(kb)


# -- two knowledge bases on one database ------------------------------------------------------------------------------
def test_another_knowledge_base_drops_and_regains_the_document(tmp_path, db_url):
    with two_knowledge_bases(tmp_path, db_url, refresh_interval=0.2) as (a, b):
        record = _upload(a)
        _wait_for(lambda: parts_of(b).index.exact_match("LIMIT_REQ_TRASH"))
        item = a.documents.delete(record.id).trashed
        _wait_for(lambda: not parts_of(b).index.exact_match("LIMIT_REQ_TRASH"))
        assert b.trash.items() == [item]  # one trash folder at the app root
        b.trash.restore(item)
        _wait_for(lambda: parts_of(a).index.exact_match("LIMIT_REQ_TRASH"))
        assert a.lookup_knowledge("LIMIT_REQ_TRASH")["primary"]["source"] == PATH
        assert a.trash.items() == []


@pytest.mark.processes
def test_a_second_process_sees_the_delete_and_the_restore(tmp_path, db_url):
    """A real second process deletes and restores; this one's L0 follows through the change feed."""
    settings = make_settings(tmp_path, db_url=db_url, refresh_interval=0.2)
    here = open_knowledge_base(settings.model_copy(update={"milvus_uri": str(tmp_path / "here_milvus.db")}))
    other = None
    try:
        _upload(here)
        assert parts_of(here).index.exact_match("LIMIT_REQ_TRASH")
        script = textwrap.dedent(f"""
            import sys
            from kb_core import load_settings, open_knowledge_base
            kb = open_knowledge_base(load_settings(app_root={str(tmp_path)!r}, database_url={db_url!r},
                                     milvus_uri={str(tmp_path / "other_milvus.db")!r},
                                     embedding_model="no-such-org/no-such-model", refresh_interval=0))
            print("open", flush=True)
            for command in sys.stdin:
                if command.strip() == "delete":
                    [row] = [d for d in kb.documents.list() if d.file_path == {PATH!r}]
                    print("deleted", kb.documents.delete(row.id).trashed.item_id, flush=True)
                elif command.strip() == "restore":
                    print("restored", kb.trash.restore({PATH!r}).action, flush=True)
            kb.close()
        """)
        other = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)

        def ask(command: str) -> list[str]:
            other.stdin.write(command + "\n")
            other.stdin.flush()
            answer = other.stdout.readline().split()
            assert answer, other.stderr.read()[-3000:] if other.poll() is not None else "no answer"
            return answer

        assert other.stdout.readline().strip() == "open", other.stderr.read()[-3000:]
        _, item_id = ask("delete")
        _wait_for(lambda: not parts_of(here).index.exact_match("LIMIT_REQ_TRASH"))
        assert [i.item_id for i in here.trash.items()] == [item_id]
        assert ask("restore") == ["restored", "indexed"]
        _wait_for(lambda: parts_of(here).index.exact_match("LIMIT_REQ_TRASH"))
        assert (tmp_path / PATH).read_bytes() == ORIGINAL and here.trash.items() == []
        assert here.lookup_knowledge("LIMIT_REQ_TRASH")["primary"]["source"] == PATH
    finally:
        if other is not None:
            other.stdin.close()
            try:
                other.wait(60)
            except subprocess.TimeoutExpired:
                other.kill()
                other.wait()
        here.close()


def test_errors_keep_the_one_root():
    assert issubclass(RestoreConflictError, DocumentConflictError)
    assert issubclass(RestoreConflictError, KnowledgeBaseError)
