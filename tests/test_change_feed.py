"""The change feed (issue 12, part 1): a write in one knowledge base reaches the L0 index of another one on
the same database and folder within seconds, without touching the lookup path."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
from conftest import doc, make_settings

from kb_core.bootstrap import open_knowledge_base


def _wait_for(predicate, timeout: float = 5.0) -> float:
    started = time.monotonic()
    while not predicate():
        assert time.monotonic() - started < timeout, "not visible in time"
        time.sleep(0.05)
    return time.monotonic() - started


@pytest.fixture
def two(tmp_path, db_url):
    """A and B: one database and one knowledge-base folder, each with its own Milvus Lite directory (the
    L0 index is per process; the feed lives in the database)."""
    opened = []
    for name in ("a", "b"):
        settings = make_settings(tmp_path, db_url=db_url, refresh_interval=0.2).model_copy(
            update={"milvus_uri": str(tmp_path / f"{name}_milvus.db")})
        opened.append(open_knowledge_base(settings))
    yield opened
    for kb in opened:
        kb.close()


def test_writes_in_one_reach_the_other_within_seconds(two):
    a, b = two
    assert b.lookup_knowledge("NEW_KEYWORD_1")["found"] is False
    a.upload("new.md", doc("New", ["NEW_KEYWORD_1", "shared"]).encode(), "api")
    seen = _wait_for(lambda: b.lookup_knowledge("NEW_KEYWORD_1")["found"])
    assert seen < 2
    assert b.lookup_knowledge("NEW_KEYWORD_1")["primary"]["confidence"] == "high"

    # a replaced keyword stops matching over there too
    a.upload("new.md", doc("New v2", ["RENAMED_KEYWORD", "shared"]).encode(), "api")
    _wait_for(lambda: not b.index.exact_match("NEW_KEYWORD_1") and b.index.exact_match("RENAMED_KEYWORD"))

    a.delete(a.documents()[0].id)
    _wait_for(lambda: not b.index.exact_match("RENAMED_KEYWORD"))


def test_a_trimmed_feed_makes_the_follower_rescan(two, tmp_path):
    from sqlalchemy import text

    a, b = two
    b._follower.stop()  # B is "down" for a while
    a.upload("one.md", doc("One", ["KEY_ONE"]).encode(), "api")
    a.upload("two.md", doc("Two", ["KEY_TWO"]).encode(), "api")
    with a.metadata._engine.begin() as connection:  # the feed is trimmed past B's position
        connection.execute(text("DELETE FROM kb_change"))
    a.upload("three.md", doc("Three", ["KEY_THREE"]).encode(), "api")
    b._follower.poll()
    for key in ("KEY_ONE", "KEY_TWO", "KEY_THREE"):
        assert b.index.exact_match(key), key


def test_own_writes_coming_back_through_the_feed_rebuild_nothing(two):
    a, _b = two
    a._follower.stop()
    a.upload("own.md", doc("Own", ["OWN_KEY"]).encode(), "api")
    snapshot = a.index._snapshot
    assert a._follower.poll() >= 1  # the change is read...
    assert a.index._snapshot is snapshot  # ...and, unchanged, swaps in no new snapshot
    assert a.index.exact_match("OWN_KEY")


def test_the_feed_is_trimmed_keeping_the_newest_row_and_a_late_follower_rescans(two):
    from datetime import timedelta

    from sqlalchemy import text

    from kb_core.retrieval.change_follower import FEED_RETENTION, TRIM_EVERY

    a, b = two
    b._follower.stop()  # B is down while A writes and, a week later, trims
    a._follower.stop()
    for i in range(3):
        a.upload(f"old-{i}.md", doc(f"Old {i}", [f"OLD_KEY_{i}"]).encode(), "api")
    newest = a.metadata.latest_change_id()
    with a.metadata._engine.begin() as connection:  # these writes happened long ago
        connection.execute(text("UPDATE kb_change SET created_at = :t"),
                           {"t": (datetime.now(UTC) - FEED_RETENTION - timedelta(hours=1)).replace(tzinfo=None)})
    assert a._follower.trim_if_due() == 0  # not due yet: the first trim comes an hour after opening
    removed = a._follower.trim_if_due(now=time.monotonic() + TRIM_EVERY + 1)
    assert removed == 2  # all but the newest, so ids carry on from where they were
    assert a.metadata.latest_change_id() == newest
    changes, complete = a.metadata.changes_since(0)
    assert [c.id for c in changes] == [newest] and not complete
    a.upload("new.md", doc("New", ["NEW_AFTER_TRIM"]).encode(), "api")
    assert a.metadata.latest_change_id() == newest + 1
    b._follower.poll()  # B's position is before the trimmed rows: it rescans and misses nothing
    for key in ("OLD_KEY_0", "OLD_KEY_1", "OLD_KEY_2", "NEW_AFTER_TRIM"):
        assert b.index.exact_match(key), key
