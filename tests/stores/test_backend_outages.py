"""Backends that are down, frozen or die mid-write: a fresh database down at the first start is
migrated once it is back, without a restart; every call waits at most one KB_BACKEND_TIMEOUT for a backend that
does not answer (no second wait for an undo or a reconnect); and the rows this process left PENDING during an
outage are settled by this process once the backend is back, never while it is still writing them.

MariaDB is reached through `_Proxy`, a TCP proxy the test can take down, bring up and freeze (a frozen server:
connections stay open, nothing passes); Milvus is a `milvus-lite server` (or another process's shared Milvus Lite
directory) stopped with SIGSTOP."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url
from support.documents import doc
from support.stores import assert_consistent, make_settings

from kb_core import bootstrap
from kb_core.bootstrap import open_knowledge_base, parts_of
from kb_core.errors import KnowledgeBaseError
from kb_core.storage.metadata_store import MetadataStore, head_revision

TIMEOUT = 2.0  # KB_BACKEND_TIMEOUT in these tests
ONE_TIMEOUT = TIMEOUT + 1.2  # "at most one timeout" (two would be 4 s), with room for a loaded machine

ALPHA = doc("Alpha", ["ALPHA_KEY"], "the first", "# Alpha\n\nalpha beta gamma delta.\n")
BRAVO = doc("Bravo", ["BRAVO_KEY"], "the second", "# Bravo\n\nbravo charlie.\n")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Proxy:
    """A TCP proxy in front of MariaDB: `down()` (connections cut, nothing listens), `up()`, `freeze()` (nothing
    passes, connections stay open: a server stopped with SIGSTOP, as a client sees it) and `thaw()`."""

    def __init__(self, upstream: tuple[str, int]):
        self.upstream = upstream
        self.port = _free_port()
        self._flowing = threading.Event()
        self._flowing.set()
        self._listener: socket.socket | None = None
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()

    def url(self, database_url: str) -> str:
        return make_url(database_url).set(host="127.0.0.1", port=self.port).render_as_string(hide_password=False)

    def up(self) -> _Proxy:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()
        return self

    def down(self) -> None:
        if self._listener is not None:
            _close(self._listener)  # shut down first: a thread blocked in accept() would take one more client
            self._listener = None
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for s in sockets:
            _close(s)

    def freeze(self) -> None:
        self._flowing.clear()

    def thaw(self) -> None:
        self._flowing.set()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            with self._lock:
                self._sockets.append(client)
            threading.Thread(target=self._connect, args=(client,), daemon=True).start()

    def _connect(self, client: socket.socket) -> None:
        self._flowing.wait()
        try:
            server = socket.create_connection(self.upstream)
        except OSError:
            _close(client)
            return
        with self._lock:
            self._sockets.append(server)
        for source, target in ((client, server), (server, client)):
            threading.Thread(target=self._pump, args=(source, target), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                self._flowing.wait()
                target.sendall(data)
        except OSError:
            pass
        _close(source)
        _close(target)


def _close(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    s.close()


@pytest.fixture
def proxy(mysql_database):
    """A down proxy (call `up()`) to a fresh, empty MariaDB database."""
    from support.stores import empty_mysql_tables

    empty_mysql_tables(mysql_database)
    url = make_url(mysql_database)
    opened = _Proxy((url.host or "127.0.0.1", url.port or 3306))
    yield opened
    opened.thaw()
    opened.down()


def _timed(what, *args, **kwargs):
    started = time.monotonic()
    try:
        result = what(*args, **kwargs)
    except KnowledgeBaseError as exc:
        result = exc
    return result, time.monotonic() - started


def _wait_for(condition, what: str, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while not (result := condition()):
        assert time.monotonic() < deadline, f"{what}: not within {timeout:.0f} s"
        time.sleep(0.1)
    return result


def _settled(kb) -> bool:
    """No row is PENDING and this process has no write left to settle (a probe that never raises)."""
    try:
        return not parts_of(kb).metadata.pending_documents() and not parts_of(kb).documents.stranded()
    except KnowledgeBaseError:
        return False


@pytest.fixture
def quick_recovery(monkeypatch):
    """The follower settles interrupted writes every 0.3 s instead of every 10 s."""
    monkeypatch.setattr(bootstrap, "RECOVER_EVERY", 0.3)


# -- a fresh database that is down at the first start ------------------------------------------------------------
def _down_database(tmp_path: Path, db_url: str, proxy_of) -> tuple[str, callable]:
    """A database URL that does not answer yet, and how to bring it up. SQLite: the file's path is a folder
    (SQLite cannot open it) until it is removed; MariaDB: the proxy is down."""
    if db_url.startswith("sqlite"):
        path = Path(make_url(db_url).database)
        path.mkdir(parents=True)
        return db_url, lambda: shutil.rmtree(path)
    proxy = proxy_of()
    return proxy.url(db_url), proxy.up


@pytest.mark.timeout(180)
def test_a_fresh_database_down_at_the_first_start_is_migrated_once_it_is_back(tmp_path, db_url, request,
                                                                               quick_recovery, caplog):
    (tmp_path / "knowledge_base/api").mkdir(parents=True)
    (tmp_path / "knowledge_base/api/alpha.md").write_text(ALPHA, encoding="utf-8")
    url, bring_up = _down_database(tmp_path, db_url, lambda: request.getfixturevalue("proxy"))
    kb = open_knowledge_base(make_settings(tmp_path, db_url=url, backend_timeout=TIMEOUT, refresh_interval=0.2))
    try:
        assert kb.lookup_knowledge("ALPHA_KEY")["found"]  # L0 answers from the files meanwhile
        assert kb.status(max_age=0).database_error
        with pytest.raises(KnowledgeBaseError):
            kb.documents.upload("bravo.md", BRAVO.encode(), "api")
        with caplog.at_level(logging.INFO, logger="kb_core.storage.metadata_store"):
            bring_up()
            # the follower's next poll (or any other use) migrates: no restart, no call needed
            store = MetadataStore(db_url)
            try:
                _wait_for(lambda: store.current_revision() == head_revision(), "the database was not migrated")
            finally:
                store.dispose()
            outcome = kb.documents.upload("bravo.md", BRAVO.encode(), "api")
            assert outcome.action == "indexed"
            assert kb.documents.reconcile().added == ("knowledge_base/api/alpha.md",)
        migrations = [r for r in caplog.records if "answers again: migrated it" in r.getMessage()]
        assert len(migrations) == 1, [r.getMessage() for r in migrations]
        assert kb.status(max_age=0).database_error is None
        assert_consistent(kb)
    finally:
        kb.close()


@pytest.mark.timeout(120)
def test_the_late_migration_runs_once_however_many_threads_find_the_database_back(tmp_path, db_url, request,
                                                                                  caplog):
    url, bring_up = _down_database(tmp_path, db_url, lambda: request.getfixturevalue("proxy"))
    store = MetadataStore(url, timeout=TIMEOUT)
    try:
        with pytest.raises(KnowledgeBaseError):
            store.migrate()
        with pytest.raises(KnowledgeBaseError):
            store.count_documents()  # tried again, failed again: still wanted
        bring_up()
        start = threading.Barrier(8)
        counts: list[object] = []

        def use() -> None:
            start.wait()
            try:
                counts.append(store.count_documents())
            except KnowledgeBaseError as exc:
                counts.append(exc)

        with caplog.at_level(logging.INFO, logger="kb_core.storage.metadata_store"):
            threads = [threading.Thread(target=use) for _ in range(8)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(60)
        assert counts == [0] * 8
        assert len([r for r in caplog.records if "answers again: migrated it" in r.getMessage()]) == 1
        assert store.current_revision() == head_revision()
    finally:
        store.dispose()


# -- a frozen database -------------------------------------------------------------------------------------------
@pytest.mark.mysql
@pytest.mark.timeout(180)
def test_a_frozen_database_costs_each_call_one_timeout_and_a_write_cut_short_is_settled(tmp_path, proxy,
                                                                                        mysql_database,
                                                                                        quick_recovery):
    proxy.up()
    kb = open_knowledge_base(make_settings(tmp_path, db_url=proxy.url(mysql_database), backend_timeout=TIMEOUT,
                                           refresh_interval=0.2))
    try:
        kb.documents.upload("alpha.md", ALPHA.encode(), "api")
        assert kb.status(max_age=0).database_error is None  # the pool holds connections now
        proxy.freeze()
        status, seconds = _timed(kb.status, max_age=0)
        assert status.database_error and seconds < ONE_TIMEOUT, seconds  # was 2 x: a ping, then a reconnect
        failed, seconds = _timed(kb.documents.upload, "bravo.md", BRAVO.encode(), "api")
        assert isinstance(failed, KnowledgeBaseError) and seconds < ONE_TIMEOUT, (failed, seconds)
        proxy.thaw()
        _wait_for(lambda: kb.status(max_age=0).database_error is None, "the database did not come back")

        # frozen in the middle of an upload: the vectors are written, the commit waits for the database
        vectors = parts_of(kb).vectors
        upsert = vectors.upsert

        def upsert_then_freeze(rows):
            upsert(rows)
            proxy.freeze()

        vectors.upsert = upsert_then_freeze
        failed, seconds = _timed(kb.documents.upload, "bravo.md", BRAVO.encode(), "api")
        vectors.upsert = upsert
        assert isinstance(failed, KnowledgeBaseError) and seconds < ONE_TIMEOUT, (failed, seconds)
        assert "did not answer in time" in str(failed)
        assert not (tmp_path / "knowledge_base/api/bravo.md").exists()  # the file is restored at once
        proxy.thaw()
        _wait_for(lambda: _settled(kb), "this process did not settle its interrupted write")
        assert_consistent(kb)
        assert [d.file_name for d in kb.documents.list()] == ["alpha.md"]
    finally:
        proxy.thaw()
        kb.close()


@pytest.mark.mysql
@pytest.mark.timeout(180)
def test_a_database_that_dies_mid_upload_is_settled_by_this_process_once_back(tmp_path, proxy, mysql_database,
                                                                              quick_recovery):
    """The file is restored at once; the row the undo could not remove is settled by this process once the
    database is back, without reconcile or reopening."""
    proxy.up()
    kb = open_knowledge_base(make_settings(tmp_path, db_url=proxy.url(mysql_database), backend_timeout=TIMEOUT,
                                           refresh_interval=0.2))
    try:
        kb.documents.upload("alpha.md", ALPHA.encode(), "api")
        replaced = ALPHA.replace("alpha beta gamma delta.", "a new version.")
        vectors = parts_of(kb).vectors
        upsert = vectors.upsert

        def upsert_then_die(rows):
            upsert(rows)
            proxy.down()

        vectors.upsert = upsert_then_die
        for name, text in (("bravo.md", BRAVO), ("alpha.md", replaced)):  # a new document and a replace
            with pytest.raises(KnowledgeBaseError, match="rollback was incomplete"):
                kb.documents.upload(name, text.encode(), "api")
            proxy.up()
        vectors.upsert = upsert
        assert not (tmp_path / "knowledge_base/api/bravo.md").exists()
        assert (tmp_path / "knowledge_base/api/alpha.md").read_text(encoding="utf-8") == ALPHA
        _wait_for(lambda: _settled(kb), "this process did not settle its interrupted writes")
        assert_consistent(kb)
        assert [(d.file_name, d.content_sha256) for d in kb.documents.list()] == [("alpha.md", _sha(ALPHA))]
        assert kb.lookup_knowledge("ALPHA_KEY")["found"] and not kb.lookup_knowledge("BRAVO_KEY")["found"]
    finally:
        kb.close()


def _sha(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()


def test_a_database_failure_mid_upload_is_settled_by_this_process_on_sqlite(tmp_path, quick_recovery):
    """The same on the embedded default: the commit and the undo of the row fail (the database is unusable for a
    moment), the file is restored, and the follower settles the row once the database works again."""
    kb = open_knowledge_base(make_settings(tmp_path, backend_timeout=TIMEOUT, refresh_interval=0.2))
    try:
        metadata = parts_of(kb).metadata
        finish, delete, save = metadata.finish_write, metadata.delete_document, metadata.save_document
        broken = threading.Event()

        def down(*args, **kwargs):
            raise KnowledgeBaseError("injected: disk I/O error")

        def while_broken(real):
            return lambda *args, **kwargs: down() if broken.is_set() else real(*args, **kwargs)

        metadata.finish_write, metadata.delete_document, metadata.save_document = (
            while_broken(finish), while_broken(delete), while_broken(save))
        broken.set()
        metadata.save_document = save  # the intent record goes in; the commit and the undo fail
        with pytest.raises(KnowledgeBaseError, match="rollback was incomplete"):
            kb.documents.upload("bravo.md", BRAVO.encode(), "api")
        assert not (tmp_path / "knowledge_base/api/bravo.md").exists()
        [pending] = metadata.pending_documents()
        assert pending.pending_owner == parts_of(kb).documents.owner
        broken.clear()  # the database works again
        _wait_for(lambda: _settled(kb), "this process did not settle its interrupted write")
        assert kb.documents.list() == []
        assert_consistent(kb)
    finally:
        kb.close()


def test_recovery_never_touches_a_row_this_process_is_still_writing(tmp_path):
    """An upload is in flight (its row PENDING, its file not written yet) when recovery runs: recovery waits for
    the document's lock, looks again, and leaves the finished write alone."""
    kb = open_knowledge_base(make_settings(tmp_path, refresh_interval=0))
    try:
        folder, service = parts_of(kb).folder, parts_of(kb).documents
        write, locked = folder.write, service.locked
        in_write, go_on, recovery_waits = threading.Event(), threading.Event(), threading.Event()

        def slow_write(*args, **kwargs):
            in_write.set()
            assert go_on.wait(60)
            return write(*args, **kwargs)

        def watched_locked(file_path):
            if threading.current_thread().name == "recovery":
                recovery_waits.set()
            return locked(file_path)

        folder.write, service.locked = slow_write, watched_locked
        outcome: list[object] = []
        upload = threading.Thread(target=lambda: outcome.append(kb.documents.upload("bravo.md", BRAVO.encode(), "api")))
        upload.start()
        assert in_write.wait(60)
        [pending] = parts_of(kb).metadata.pending_documents()
        assert pending.pending_owner == service.owner  # this process's row, mid-write
        reports: list[object] = []
        recovery = threading.Thread(target=lambda: reports.append(parts_of(kb).reconciler.recover_dead_writers()),
                                    name="recovery")
        recovery.start()
        assert recovery_waits.wait(60)  # recovery found the row and now waits for the document's lock
        go_on.set()
        upload.join(60)
        recovery.join(60)
        [report] = reports
        assert outcome and outcome[0].action == "indexed"
        assert report.finished == () and report.undone == () and report.failed == ()
        assert (tmp_path / "knowledge_base/api/bravo.md").read_text(encoding="utf-8") == BRAVO
        assert_consistent(kb)
    finally:
        kb.close()


# -- a frozen Milvus ---------------------------------------------------------------------------------------------
def _start_milvus(data_dir: Path, port: int) -> subprocess.Popen:
    server = subprocess.Popen([str(Path(sys.executable).parent / "milvus-lite"), "server", "--data-dir",
                               str(data_dir), "--host", "127.0.0.1", "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while True:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return server
        assert time.monotonic() < deadline, "milvus-lite server did not start"
        time.sleep(0.2)


def _frozen_milvus_costs_one_timeout(kb, tmp_path: Path, freeze, thaw) -> None:
    kb.documents.upload("alpha.md", ALPHA.encode(), "api")
    assert kb.status(max_age=0).milvus_error is None
    freeze()
    try:
        status, seconds = _timed(kb.status, max_age=0)
        assert status.milvus_error and seconds < ONE_TIMEOUT, seconds
        # was 2 x: the write, then its undo
        new, seconds = _timed(kb.documents.upload, "bravo.md", BRAVO.encode(), "api")
        assert isinstance(new, KnowledgeBaseError) and seconds < ONE_TIMEOUT, (new, seconds)
        assert "did not answer in time" in str(new)
        replace, seconds = _timed(kb.documents.upload, "alpha.md", ALPHA.replace("alpha", "omega").encode(), "api")
        assert isinstance(replace, KnowledgeBaseError) and seconds < ONE_TIMEOUT, (replace, seconds)
        answer, seconds = _timed(kb.lookup, "gamma delta")
        assert seconds < ONE_TIMEOUT, seconds
        assert not (tmp_path / "knowledge_base/api/bravo.md").exists()
        assert (tmp_path / "knowledge_base/api/alpha.md").read_text(encoding="utf-8") == ALPHA
    finally:
        thaw()
    _wait_for(lambda: _settled(kb), "this process did not settle the write Milvus cut short")
    assert_consistent(kb)
    assert [d.file_name for d in kb.documents.list()] == ["alpha.md"]
    assert kb.documents.upload("bravo.md", BRAVO.encode(), "api").action == "indexed"


@pytest.mark.processes
@pytest.mark.timeout(240)
def test_a_frozen_milvus_server_costs_each_call_one_timeout(tmp_path, db_url, quick_recovery):
    port = _free_port()
    server = _start_milvus(tmp_path / "milvus.db", port)
    kb = open_knowledge_base(make_settings(tmp_path, db_url=db_url, backend_timeout=TIMEOUT, refresh_interval=0.2,
                                           fulltext="milvus").model_copy(
        update={"milvus_uri": f"http://127.0.0.1:{port}"}))
    try:
        _frozen_milvus_costs_one_timeout(kb, tmp_path, lambda: os.kill(server.pid, signal.SIGSTOP),
                                         lambda: os.kill(server.pid, signal.SIGCONT))
    finally:
        os.kill(server.pid, signal.SIGCONT)
        kb.close()
        server.kill()
        server.wait()


OWNER = textwrap.dedent("""
    import sys
    from kb_core import load_settings, open_knowledge_base
    kb = open_knowledge_base(load_settings(app_root=sys.argv[1], embedding_model="no-such-org/no-such-model",
                                           backend_timeout=sys.argv[2]))
    kb.status(0)
    print("ready", flush=True)
    sys.stdin.read()
    kb.close()
""")


@pytest.mark.processes
@pytest.mark.timeout(240)
def test_the_embedded_default_with_a_frozen_milvus_lite_owner_costs_each_call_one_timeout(tmp_path,
                                                                                          quick_recovery):
    """SQLite + a Milvus Lite directory another process serves (and is stopped): the embedded default."""
    (tmp_path / "knowledge_base").mkdir()
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(tmp_path), str(TIMEOUT)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert owner.stdout.readline().strip() == "ready"
        kb = open_knowledge_base(make_settings(tmp_path, backend_timeout=TIMEOUT, refresh_interval=0.2))
        try:
            assert parts_of(kb).vectors._session.owner.pid == owner.pid  # a follower of the stopped owner
            _frozen_milvus_costs_one_timeout(kb, tmp_path, lambda: os.kill(owner.pid, signal.SIGSTOP),
                                             lambda: os.kill(owner.pid, signal.SIGCONT))
        finally:
            os.kill(owner.pid, signal.SIGCONT)
            kb.close()
    finally:
        owner.kill()
        owner.wait()


def test_a_locked_sqlite_database_costs_a_write_one_timeout(tmp_path):
    """SQLite's busy timeout is the backend timeout: a write another process holds the database for waits that
    long, not 30 s."""
    kb = open_knowledge_base(make_settings(tmp_path, backend_timeout=TIMEOUT, refresh_interval=0))
    try:
        holder = sqlite3.connect(tmp_path / "kb.sqlite3", isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            failed, seconds = _timed(kb.documents.upload, "bravo.md", BRAVO.encode(), "api")
            assert isinstance(failed, KnowledgeBaseError) and seconds < ONE_TIMEOUT, (failed, seconds)
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert kb.documents.upload("bravo.md", BRAVO.encode(), "api").action == "indexed"
        assert_consistent(kb)
    finally:
        kb.close()
