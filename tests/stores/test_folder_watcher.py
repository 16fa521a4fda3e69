"""Watching the folder: with KB_WATCH=1 files written, edited, renamed and deleted by hand
(or by git) are synced within seconds by the one process that holds the watcher lease."""

from __future__ import annotations

import os
import time

import pytest
from support.documents import doc, write_doc
from support.stores import assert_consistent, make_settings

from kb_core.bootstrap import open_knowledge_base, parts_of

LICENCE = "<!-- SPDX-License-Identifier: Apache-2.0. Copyright the platform team. -->\n"


def _wait_for(predicate, what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"{what}: not seen within {timeout:.0f} s"
        time.sleep(0.05)


def _guide(title: str, keywords: list[str], body: str = "") -> str:
    return doc(title, keywords, summary=f"How to use {title}", body=LICENCE + f"# {title}\n\n{body or 'Steps.'}\n")


def _open(root, db_url, name: str = "a", **extra):
    settings = make_settings(root, db_url=db_url, watch=True, refresh_interval=0.2, **extra).model_copy(
        update={"milvus_uri": str(root / f"{name}_milvus.db")})
    return open_knowledge_base(settings)


def _watched(root, db_url):
    kb = _open(root, db_url)
    _wait_for(lambda: parts_of(kb).watcher.is_watching, "the only process becomes the watcher")
    return kb


@pytest.fixture
def watched(tmp_path, db_url):
    kb = _watched(tmp_path, db_url)
    yield kb
    kb.close()


@pytest.fixture
def watched_on_sqlite(tmp_path):
    """For what does not depend on the database: batching and error reports."""
    kb = _watched(tmp_path, f"sqlite:///{tmp_path / 'kb.sqlite3'}")
    yield kb
    kb.close()


def _found(kb, keyword: str) -> bool:
    return kb.lookup_knowledge(keyword)["found"] and bool(parts_of(kb).index.exact_match(keyword))


def _row(kb, relative: str):
    return parts_of(kb).metadata.get_by_path(parts_of(kb).folder.display_path(relative))


def test_plain_file_writes_are_synced(watched, tmp_path):
    kb = watched
    base = parts_of(kb).folder.base_dir
    write_doc(base, "cli/install.md", _guide("Installing the CLI", ["CLI", "install", "安装"]))
    _wait_for(lambda: _found(kb, "安装") and _row(kb, "cli/install.md") is not None, "a new file")
    assert kb.status(max_age=0).watching is True

    # an edit that changes the keywords
    write_doc(base, "cli/install.md", _guide("Installing the CLI", ["CLI", "setup", "设置"]))
    _wait_for(lambda: _found(kb, "设置") and not parts_of(kb).index.exact_match("安装"), "an edited keyword")

    # an editor's save: a temp file next to it, renamed over the document
    temp = base / "cli" / ".install.md.swp"
    temp.write_text(_guide("Installing the CLI", ["CLI", "upgrade"]), encoding="utf-8")
    os.replace(temp, base / "cli" / "install.md")
    _wait_for(lambda: _found(kb, "upgrade") and not parts_of(kb).index.exact_match("设置"), "a renamed temp file")

    # deleted: gone from L0, the database and the vectors
    (base / "cli" / "install.md").unlink()
    l0 = parts_of(kb).index
    _wait_for(lambda: _row(kb, "cli/install.md") is None and not l0.exact_match("upgrade"), "a deletion")
    assert_consistent(kb)


def test_a_burst_is_synced_in_few_batches(watched_on_sqlite):
    kb = watched_on_sqlite
    before = parts_of(kb).watcher.syncs
    for i in range(30):  # spread out a little, as a checkout writes them (each gap shorter than the debounce)
        write_doc(parts_of(kb).folder.base_dir, f"api/endpoint-{i:02}.md",
                  _guide(f"Endpoint {i}", [f"ENDPOINT_{i:02}", "API", "REST"], body="Request and response. " * 40))
        time.sleep(0.05)
    _wait_for(lambda: len(kb.documents.list()) == 30 and all(_found(kb, f"ENDPOINT_{i:02}") for i in (0, 29)),
              "30 files written at once")
    assert parts_of(kb).watcher.syncs - before <= 3
    assert_consistent(kb)


def test_a_malformed_file_is_reported_and_the_watcher_goes_on(watched_on_sqlite):
    kb = watched_on_sqlite
    base = parts_of(kb).folder.base_dir
    (base / "ops").mkdir()
    (base / "ops" / "broken.md").write_bytes(b"---\ntitle: Broken\n---\n\xff\xfe not UTF-8 \xc3\x28\n")
    watcher = parts_of(kb).watcher
    _wait_for(lambda: watcher.last_report is not None and watcher.last_report.failed, "the failure report")
    (path, problem), = parts_of(kb).watcher.last_report.failed
    assert path.endswith("ops/broken.md") and "UTF-8" in problem
    assert kb.status(max_age=0).watch_failed == ((path, problem),)  # what the sidebar shows
    write_doc(base, "ops/runbook.md", _guide("Runbook", ["RUNBOOK_KEY", "ops"]))
    _wait_for(lambda: _found(kb, "RUNBOOK_KEY"), "a good file after the broken one")
    assert parts_of(kb).watcher.is_watching and _row(kb, "ops/broken.md") is None


def test_one_watcher_per_knowledge_base_and_a_takeover(tmp_path, db_url):
    a = _open(tmp_path, db_url, "a")
    b = _open(tmp_path, db_url, "b")
    try:
        _wait_for(lambda: parts_of(a).watcher.is_watching or parts_of(b).watcher.is_watching, "an elected watcher")
        watcher, other = (a, b) if parts_of(a).watcher.is_watching else (b, a)
        time.sleep(0.5)  # the other keeps trying meanwhile: it must still not be the watcher
        assert not parts_of(other).watcher.is_watching
        write_doc(tmp_path / "knowledge_base", "faq/first.md", _guide("First", ["FIRST_KEY"]))
        _wait_for(lambda: _found(other, "FIRST_KEY"), "the watcher's sync, through the feed")
        watcher.close()
        _wait_for(lambda: parts_of(other).watcher.is_watching, "the takeover")
        write_doc(tmp_path / "knowledge_base", "faq/second.md", _guide("Second", ["SECOND_KEY"]))
        _wait_for(lambda: _found(other, "SECOND_KEY"), "a sync by the new watcher")
        # (each has its own Milvus Lite folder here, so only the rows are compared)
        assert sorted(r.file_name for r in other.documents.list()) == ["first.md", "second.md"]
    finally:
        a.close()
        b.close()


def test_a_killed_lock_connection_makes_the_watcher_re_elect(tmp_path, mysql_database):
    """MariaDB only: a server that kills the lease's connection silently drops its GET_LOCK."""
    from sqlalchemy import create_engine, text
    from support.stores import empty_mysql_tables

    empty_mysql_tables(mysql_database)
    db_url = mysql_database
    kb = _watched(tmp_path, db_url)
    try:
        victim = parts_of(kb).watcher.lease.connection_id
        assert victim is not None and parts_of(kb).watcher.terms == 1
        engine = create_engine(db_url)
        with engine.connect() as connection:
            connection.execute(text(f"KILL {int(victim)}"))
        engine.dispose()
        watcher = parts_of(kb).watcher
        _wait_for(lambda: watcher.terms == 2 and watcher.is_watching, "a new term after the kill")
        assert parts_of(kb).watcher.lease.connection_id not in (None, victim)
        write_doc(parts_of(kb).folder.base_dir, "api/after.md", _guide("After", ["AFTER_KILL"]))
        _wait_for(lambda: _found(kb, "AFTER_KILL"), "a sync after re-election")
    finally:
        kb.close()


def test_a_new_watcher_catches_up_with_changes_made_while_nobody_watched(tmp_path):
    url = f"sqlite:///{tmp_path / 'kb.sqlite3'}"
    base = tmp_path / "knowledge_base"
    kb = _watched(tmp_path, url)
    write_doc(base, "sdk/python.md", _guide("Python SDK", ["SDK", "PYTHON_V1"]))
    write_doc(base, "sdk/go.md", _guide("Go SDK", ["SDK", "GO_KEY"]))
    _wait_for(lambda: len(kb.documents.list()) == 2, "the first files")
    kb.close()
    time.sleep(0.05)  # file times have a granularity: the edits below must be newer than the rows
    write_doc(base, "sdk/python.md", _guide("Python SDK", ["SDK", "PYTHON_V2"]))
    (base / "sdk" / "go.md").unlink()
    write_doc(base, "sdk/java.md", _guide("Java SDK", ["SDK", "JAVA_KEY"]))
    kb = _watched(tmp_path, url)
    try:
        _wait_for(lambda: sorted(r.file_name for r in kb.documents.list()) == ["java.md", "python.md"]
                  and _found(kb, "PYTHON_V2") and not parts_of(kb).index.exact_match("PYTHON_V1"), "the catch-up sync")
        assert_consistent(kb)
    finally:
        kb.close()


def test_kb_watch_is_off_unless_asked_for(tmp_path, monkeypatch):
    from kb_core import load_settings

    monkeypatch.delenv("KB_WATCH", raising=False)
    monkeypatch.delenv("KB_CONFIG", raising=False)
    assert load_settings(app_root=tmp_path).watch is False  # agent processes, plain open_knowledge_base()
    (tmp_path / "kb.yaml").write_text("knowledge:\n  watch: true\n", encoding="utf-8")
    assert load_settings(app_root=tmp_path).watch is True
    monkeypatch.setenv("KB_WATCH", "0")
    assert load_settings(app_root=tmp_path).watch is False
