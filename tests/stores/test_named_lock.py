"""The one lock helper (`storage/named_lock.py`), run against both backends: SQLite (flock beside the database
file) and a real MariaDB (GET_LOCK). Document locks, the migration lock and the watcher lease are all one."""

from __future__ import annotations

import time

import pytest

from kb_core.errors import MetadataStoreError


def test_a_held_lock_makes_the_next_holder_wait_until_its_deadline_then_give_up(store):
    first, second = store.lock("kbtest", "a"), store.lock("kbtest", "a")
    assert first.acquire(0) and first.still_held()
    started = time.monotonic()
    assert not second.acquire(1)
    assert time.monotonic() - started >= 0.9  # it waited for its deadline, not less
    assert store.lock("kbtest", "b").try_acquire()  # another name is another lock
    first.release()
    assert not first.held and second.acquire(0)
    second.release()


def test_a_lock_lost_behind_the_holders_back_is_noticed(store):
    lease = store.lease("kbtest", "lost")
    assert lease.try_acquire() and lease.check()
    if store.backend == "sqlite":
        lease._file_path.unlink()  # a lock file removed by hand would let a second process lock a new one
    else:
        with store._engine.connect() as connection:
            connection.exec_driver_sql(f"KILL {lease.connection_id}")  # the server drops the connection
    assert not lease.check() and not lease.held
    assert store.lease("kbtest", "lost").try_acquire()


def test_document_lock_refuses_with_a_clear_error_past_its_deadline(store):
    holder = store.lock("kbdoc", "knowledge_base/api/x.md")
    assert holder.acquire(0)
    try:
        with pytest.raises(MetadataStoreError, match="another process has been writing knowledge_base/api/x.md"):
            with store.document_lock("knowledge_base/api/x.md", timeout=1):
                pass
    finally:
        holder.release()
    with store.document_lock("knowledge_base/api/x.md", timeout=1):
        pass  # free again


def test_unsupported_databases_are_refused_at_once():
    from kb_core.errors import SettingsError
    from kb_core.storage.metadata_store import MetadataStore

    with pytest.raises(SettingsError, match="postgresql is not supported"):
        MetadataStore("postgresql://root@127.0.0.1/test")
