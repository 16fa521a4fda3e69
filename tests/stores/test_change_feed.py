"""The change feed: a write in one knowledge base reaches the L0 index of another one on
the same database and folder within seconds, without touching the lookup path."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
from support.documents import doc
from support.stores import make_settings, two_knowledge_bases

from kb_core.bootstrap import open_knowledge_base, parts_of


def _wait_for(predicate, timeout: float = 5.0) -> float:
    started = time.monotonic()
    while not predicate():
        assert time.monotonic() - started < timeout, "not visible in time"
        time.sleep(0.05)
    return time.monotonic() - started


@pytest.fixture
def two(tmp_path, db_url):
    with two_knowledge_bases(tmp_path, db_url, refresh_interval=0.2) as opened:
        yield opened


def test_writes_in_one_reach_the_other_within_seconds(two):
    a, b = two
    assert b.lookup_knowledge("NEW_KEYWORD_1")["found"] is False
    a.documents.upload("new.md", doc("New", ["NEW_KEYWORD_1", "shared"]).encode(), "api")
    seen = _wait_for(lambda: b.lookup_knowledge("NEW_KEYWORD_1")["found"])
    assert seen < 2
    assert b.lookup_knowledge("NEW_KEYWORD_1")["primary"]["confidence"] == "high"

    # a replaced keyword stops matching over there too
    a.documents.upload("new.md", doc("New v2", ["RENAMED_KEYWORD", "shared"]).encode(), "api")
    l0_of_b = parts_of(b).index
    _wait_for(lambda: not l0_of_b.exact_match("NEW_KEYWORD_1") and l0_of_b.exact_match("RENAMED_KEYWORD"))

    a.documents.delete(a.documents.list()[0].id)
    _wait_for(lambda: not parts_of(b).index.exact_match("RENAMED_KEYWORD"))


def test_a_trimmed_feed_makes_the_follower_rescan(two, tmp_path):
    from sqlalchemy import text

    a, b = two
    parts_of(b).follower.stop()  # B is "down" for a while
    a.documents.upload("one.md", doc("One", ["KEY_ONE"]).encode(), "api")
    a.documents.upload("two.md", doc("Two", ["KEY_TWO"]).encode(), "api")
    with parts_of(a).metadata._engine.begin() as connection:  # the feed is trimmed past B's position
        connection.execute(text("DELETE FROM kb_change"))
    a.documents.upload("three.md", doc("Three", ["KEY_THREE"]).encode(), "api")
    from kb_core.retrieval.change_follower import FEED_RETENTION

    parts_of(b).follower._polled_at -= FEED_RETENTION.total_seconds()  # ...for longer than trimming keeps rows
    parts_of(b).follower.poll()
    for key in ("KEY_ONE", "KEY_TWO", "KEY_THREE"):
        assert parts_of(b).index.exact_match(key), key


def test_own_writes_coming_back_through_the_feed_rebuild_nothing(two):
    a, _b = two
    parts_of(a).follower.stop()
    a.documents.upload("own.md", doc("Own", ["OWN_KEY"]).encode(), "api")
    snapshot = parts_of(a).index._snapshot
    assert parts_of(a).follower.poll() >= 1  # the change is read...
    assert parts_of(a).index._snapshot is snapshot  # ...and, unchanged, swaps in no new snapshot
    assert parts_of(a).index.exact_match("OWN_KEY")


def test_the_feed_is_trimmed_keeping_the_newest_row_and_a_late_follower_rescans(two):
    from datetime import timedelta

    from sqlalchemy import text

    from kb_core.retrieval.change_follower import FEED_RETENTION, TRIM_EVERY

    a, b = two
    parts_of(b).follower.stop()  # B is down while A writes and, a week later, trims
    parts_of(a).follower.stop()
    for i in range(3):
        a.documents.upload(f"old-{i}.md", doc(f"Old {i}", [f"OLD_KEY_{i}"]).encode(), "api")
    newest = parts_of(a).metadata.latest_change_id()
    with parts_of(a).metadata._engine.begin() as connection:  # these writes happened long ago
        connection.execute(text("UPDATE kb_change SET created_at = :t"),
                           {"t": (datetime.now(UTC) - FEED_RETENTION - timedelta(hours=1)).replace(tzinfo=None)})
    assert parts_of(a).follower.trim_if_due() == 0  # not due yet: the first trim comes an hour after opening
    removed = parts_of(a).follower.trim_if_due(now=time.monotonic() + TRIM_EVERY + 1)
    assert removed == 2  # all but the newest, so ids carry on from where they were
    assert parts_of(a).metadata.latest_change_id() == newest
    changes, complete = parts_of(a).metadata.changes_since(0)
    assert [c.id for c in changes] == [newest] and not complete
    a.documents.upload("new.md", doc("New", ["NEW_AFTER_TRIM"]).encode(), "api")
    assert parts_of(a).metadata.latest_change_id() == newest + 1
    parts_of(b).follower._polled_at -= FEED_RETENTION.total_seconds()  # B was down all that week
    parts_of(b).follower.poll()  # B's position is before the trimmed rows: it rescans and misses nothing
    for key in ("OLD_KEY_0", "OLD_KEY_1", "OLD_KEY_2", "NEW_AFTER_TRIM"):
        assert parts_of(b).index.exact_match(key), key


def test_a_change_is_not_applied_while_the_file_holds_other_bytes(tmp_path):
    """A follower reading a file in the middle of someone's write (a replacement about to be rolled back)
    must not publish that version: the feed's hash of the announced version tells them apart."""
    import hashlib

    from kb_core.keywords.index import KnowledgeIndex

    target = tmp_path / "knowledge_base" / "api" / "a.md"
    target.parent.mkdir(parents=True)
    announced = doc("A", ["ANNOUNCED_KEY"]).encode()
    target.write_bytes(announced)
    index = KnowledgeIndex("knowledge_base", app_root=tmp_path)
    index.load()
    target.write_bytes(doc("A", ["IN_FLIGHT_KEY"]).encode())  # a replacement in flight
    assert index.refresh("knowledge_base/api/a.md", hashlib.sha256(announced).hexdigest()) is False
    assert index.exact_match("ANNOUNCED_KEY") and not index.exact_match("IN_FLIGHT_KEY")
    target.write_bytes(announced)  # rolled back: the file is the announced version again
    assert index.refresh("knowledge_base/api/a.md", hashlib.sha256(announced).hexdigest()) is False  # unchanged
    settled = doc("A", ["SETTLED_KEY"]).encode()
    target.write_bytes(settled)  # a later write settles it; its own change announces these bytes
    assert index.refresh("knowledge_base/api/a.md", hashlib.sha256(settled).hexdigest()) is True
    assert index.exact_match("SETTLED_KEY") and not index.exact_match("ANNOUNCED_KEY")


def test_an_own_write_coming_back_through_the_feed_is_not_read_again(tmp_path, monkeypatch):
    """A process's own writes come back through the change feed: L0 has that version already (`add(...,
    sha256=)`), so refresh reads nothing; another version of the same file (someone else's write) is read."""
    import hashlib

    from kb_core.keywords import index as keyword_index
    from kb_core.keywords.entry import entry_of_bytes
    from kb_core.keywords.index import KnowledgeIndex

    target = tmp_path / "knowledge_base" / "api" / "a.md"
    target.parent.mkdir(parents=True)
    target.write_bytes(b"")
    index = KnowledgeIndex("knowledge_base", app_root=tmp_path)
    index.load()
    mine = doc("A", ["MINE_KEY"]).encode()
    target.write_bytes(mine)
    index.add(entry_of_bytes(index.folder, "api/a.md", mine), sha256=hashlib.sha256(mine).hexdigest())
    reads: list[str] = []
    real = keyword_index.read_regular
    monkeypatch.setattr(keyword_index, "read_regular", lambda path, **kw: reads.append(str(path)) or real(path, **kw))
    assert index.refresh("knowledge_base/api/a.md", hashlib.sha256(mine).hexdigest()) is False
    assert reads == [] and index.exact_match("MINE_KEY")
    theirs = doc("A", ["THEIR_KEY"]).encode()
    target.write_bytes(theirs)  # another process's write of the same file: its own change announces these bytes
    assert index.refresh("knowledge_base/api/a.md", hashlib.sha256(theirs).hexdigest()) is True
    assert len(reads) == 1 and index.exact_match("THEIR_KEY") and not index.exact_match("MINE_KEY")
    # remembered once: the same announcement again is read (and changes nothing)
    assert index.refresh("knowledge_base/api/a.md", hashlib.sha256(theirs).hexdigest()) is False and len(reads) == 2


def test_a_write_that_commits_after_a_later_one_is_still_applied(tmp_path, mysql_database):
    """InnoDB hands out ids at insert, not at commit: B applies id N+1 while N is still open. N must not be
    skipped for good when it commits (it was, until the follower remembered skipped ids)."""
    import hashlib

    from sqlalchemy import create_engine, text
    from support.stores import empty_mysql_tables

    empty_mysql_tables(mysql_database)
    with two_knowledge_bases(tmp_path, mysql_database, refresh_interval=0) as (a, b), \
            create_engine(mysql_database).connect() as slow:
        late = tmp_path / "knowledge_base" / "api" / "late.md"
        late.parent.mkdir(parents=True, exist_ok=True)
        data = doc("Late", ["LATE_COMMIT_KEY"]).encode()
        late.write_bytes(data)  # a writer's file is on disk before its feed row is inserted
        transaction = slow.begin()
        slow.execute(text("INSERT INTO kb_change (file_path, operation, content_sha256, created_at) "
                          "VALUES ('knowledge_base/api/late.md', 'upsert', :h, NOW())"),
                     {"h": hashlib.sha256(data).hexdigest()})
        # a later id, committed first
        a.documents.upload("early.md", doc("Early", ["EARLY_COMMIT_KEY"]).encode(), "api")
        parts_of(b).follower.poll()
        assert parts_of(b).index.exact_match("EARLY_COMMIT_KEY")
        assert not parts_of(b).index.exact_match("LATE_COMMIT_KEY")
        transaction.commit()
        assert parts_of(b).follower.poll() >= 1
        assert parts_of(b).index.exact_match("LATE_COMMIT_KEY"), "a change that committed late was skipped for good"
        assert parts_of(b).follower.poll() == 0  # the gap is filled: nothing is applied twice


def test_gaps_that_never_fill_are_forgotten_after_the_grace(monkeypatch, tmp_path):
    """A rolled-back write leaves an id that never commits: it is looked up again only until GAP_GRACE."""
    from kb_core.keywords.index import KnowledgeIndex
    from kb_core.retrieval import change_follower as module
    from kb_core.storage.metadata_store import ChangeRecord

    class Feed:
        def __init__(self):
            self.rows = [ChangeRecord(3, "knowledge_base/api/x.md", "delete", None)]
            self.asked: list[list[int]] = []

        def latest_change_id(self):
            return max(r.id for r in self.rows)

        def changes_since(self, after_id, limit=1000):
            return [r for r in self.rows if r.id > after_id], True

        def changes_with_ids(self, ids):
            self.asked.append(list(ids))
            return [r for r in self.rows if r.id in ids]

        def trim_changes(self, older_than):
            return 0

    feed = Feed()
    index = KnowledgeIndex("knowledge_base", app_root=tmp_path)
    follower = module.ChangeFollower(feed, index, interval=0)
    follower.start_from_now()
    follower._position = 0
    follower.poll()  # applies id 3; ids 1 and 2 are gaps
    assert follower.position == 3
    follower.poll()
    assert feed.asked[-1] == [1, 2]
    clock = time.monotonic() + module.GAP_GRACE + 1
    monkeypatch.setattr(module.time, "monotonic", lambda: clock)
    asked = len(feed.asked)
    follower.poll()
    assert len(feed.asked) == asked, "expired gaps are still being looked up"


@pytest.mark.processes
def test_a_running_process_recovers_the_write_of_a_writer_killed_mid_upload(tmp_path, db_url, monkeypatch):
    """kill -9 between the file and the final commit leaves the row PENDING and sends no change; a process
    that keeps running finishes it within seconds instead of missing the document until the next open."""
    import subprocess
    import sys
    import textwrap

    from kb_core import bootstrap

    monkeypatch.setattr(bootstrap, "RECOVER_EVERY", 0.3)
    settings = make_settings(tmp_path, db_url=db_url, refresh_interval=0.2)
    survivor = open_knowledge_base(settings.model_copy(update={"milvus_uri": str(tmp_path / "b_milvus.db")}))
    try:
        child = textwrap.dedent(f"""
            import os, signal
            from kb_core import load_settings, open_knowledge_base
            from kb_core.bootstrap import parts_of
            kb = open_knowledge_base(load_settings(app_root={str(tmp_path)!r}, database_url={db_url!r},
                                     milvus_uri={str(tmp_path / "a_milvus.db")!r},
                                     embedding_model="no-such-org/no-such-model", refresh_interval=0))
            # die after the file and the vectors, before the row is settled and the change is announced
            parts_of(kb).metadata.finish_write = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)
            kb.documents.upload("killed.md", {doc("Killed", ["KILLED_MID_UPLOAD"])!r}.encode(), "api")
        """)
        done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120)
        assert done.returncode == -9, done.stderr[-2000:]
        assert (tmp_path / "knowledge_base/api/killed.md").is_file()
        [row] = parts_of(survivor).metadata.pending_documents()
        assert row.file_path == "knowledge_base/api/killed.md"
        # settled: the row's final commit, then L0 (in that order: wait for both, not for the first alone)
        _wait_for(lambda: not parts_of(survivor).metadata.pending_documents()
                  and parts_of(survivor).index.exact_match("KILLED_MID_UPLOAD"), timeout=15)
        [settled] = survivor.documents.list()
        from kb_core.storage.db_models import DocumentStatus

        assert settled.status == DocumentStatus.INDEXED and settled.pending_operation is None
    finally:
        survivor.close()


def test_a_delete_read_before_the_path_was_written_anew_leaves_the_new_version(tmp_path):
    """The follower reads a delete, then this process writes the same path again (a delete, then an upload or
    a reconcile of it) before the follower applies what it read: the page must stay in L0 (a file on disk is
    never the deleted one: every delete moves the file away before its change is written). A file that is
    really gone still leaves L0."""
    from types import SimpleNamespace

    from kb_core.keywords.entry import entry_of_bytes
    from kb_core.keywords.index import KnowledgeIndex
    from kb_core.retrieval.change_follower import ChangeFollower

    base = tmp_path / "knowledge_base" / "api"
    base.mkdir(parents=True)
    again, gone = base / "again.md", base / "gone.md"
    gone.write_text(doc("Gone", ["GONE_KEY"]), encoding="utf-8")
    index = KnowledgeIndex("knowledge_base", app_root=tmp_path)
    index.load()
    new = doc("Again", ["AGAIN_KEY"]).encode()
    again.write_bytes(new)  # written anew after its delete: this process put it in L0 itself
    index.add(entry_of_bytes(index.folder, "api/again.md", new))
    gone.unlink()
    deletes = [SimpleNamespace(id=1, file_path="knowledge_base/api/again.md", operation="delete",
                               content_sha256=None),
               SimpleNamespace(id=2, file_path="knowledge_base/api/gone.md", operation="delete",
                               content_sha256=None)]
    feed = SimpleNamespace(latest_change_id=lambda: 2, changes_with_ids=lambda ids: [],
                           changes_since=lambda after, limit=1000: ([c for c in deletes if c.id > after], True))
    follower = ChangeFollower(feed, index)
    assert follower.poll() == 2
    assert [e.file_path for e in index.exact_match("AGAIN_KEY")] == ["knowledge_base/api/again.md"]
    assert index.exact_match("GONE_KEY") == []
