"""Document metadata, the tool-call log and the query history in SQL (SQLite by default, MySQL/MariaDB in production).

Values cross the boundary as frozen dataclasses; ORM objects never leave this module. Migrations are
Alembic's, inside the package, and run under a lock so two processes starting at once do not race. A migration
that failed (the database was down when the process started) is tried again by the next use, once the database
answers: no restart needed.

Each call waits for the database at most once for `timeout` (KB_BACKEND_TIMEOUT): a pooled connection whose
ping timed out is not replaced by a second wait for a new one (`_budget`).
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, delete, event, func, insert, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from kb_core.access import acting_name
from kb_core.errors import MetadataStoreError, SettingsError
from kb_core.storage.db_models import ApiDocument, Change, DocumentStatus, ToolCall, ToolCallDropped, utcnow
from kb_core.storage.evaluation_store import EvaluationQueries
from kb_core.storage.named_lock import BACKENDS, NamedLock, lock_name, socket_timeouts
from kb_core.storage.query_history import QueryHistoryQueries
from kb_core.storage.sqlite_wal import switch_to_wal
from kb_core.storage.tool_call_log import ToolCallQueries, ToolCallRecord, tool_call_record

log = logging.getLogger(__name__)

# What one tool_call row may hold (the columns' sizes; MySQL TEXT is 64 KB, 4 bytes a character at worst): a
# record is cut to fit rather than refused, so no record can make a whole batch fail.
_TOOL_CALL_LIMITS = {"tool_name": 64, "match_types": 64, "request_id": 16, "caller": 64, "confidence": 8}
_MAX_TEXT_CHARS = 16000
# MySQL/MariaDB run DDL outside transactions: a statement the client gives up on (its socket's read timeout, the
# backend timeout of 10 s) may still finish on the server, half-applying a migration that the next try then
# cannot redo ("Table ... already exists"). A migration's statements get this long instead: a slow server (a
# busy machine, an ALTER of a large table) finishes them; a frozen one still ends in an error.
MIGRATION_TIMEOUT = 600.0


def _aware(value: datetime | None) -> datetime | None:
    return None if value is None else value.replace(tzinfo=UTC)


@dataclass(frozen=True)
class DocumentValues:
    """What the document service writes for one document."""

    file_name: str
    category: str
    file_path: str
    status: DocumentStatus
    metadata_json: str | None
    content_sha256: str
    size_bytes: int
    chunk_count: int
    embedding_model: str | None
    last_error: str | None = None
    content_version: int | None = None  # `chunking.CONTENT_VERSION` of its chunks


@dataclass(frozen=True, kw_only=True)
class DocumentRecord(DocumentValues):
    """A stored document: what was written, plus its id and times (UTC)."""

    id: int
    created_at: datetime
    updated_at: datetime
    pending_operation: str | None = None  # while PENDING: "upload" | "delete" (the intent record)
    pending_owner: str | None = None  # the process writing it: "host:pid:token"
    changed_by: str | None = None  # who made the last change (a user's e-mail or a service identity)

    @property
    def frontmatter(self) -> dict[str, Any] | None:
        if not self.metadata_json:
            return None
        try:
            return json.loads(self.metadata_json)
        except ValueError:
            return None

    @classmethod
    def of(cls, row: ApiDocument) -> DocumentRecord:
        values = {f.name: getattr(row, f.name) for f in fields(cls)}
        values["status"] = DocumentStatus(row.status)
        values["created_at"] = _aware(row.created_at)
        values["updated_at"] = _aware(row.updated_at)
        return cls(**values)


@dataclass(frozen=True)
class ChangeRecord:
    id: int
    file_path: str
    operation: str  # "upsert" | "delete"
    content_sha256: str | None


def _alembic_config() -> Any:
    from alembic.config import Config as AlembicConfig  # alembic loads only when a schema must change

    cfg = AlembicConfig()
    cfg.set_main_option("script_location", "kb_core.storage:migrations")
    return cfg


_VERSIONS = Path(__file__).parent / "migrations" / "versions"
_REVISION_LINE = re.compile(r'^(revision|down_revision)\s*=\s*(?:"([^"]+)"|None)', re.M)


@functools.cache
def head_revision() -> str:
    """The newest schema revision this code knows (what `migrate()` brings a database to), read from the
    revision files' own `revision = ...` lines: alembic's script loader costs most of a second at start-up,
    and a database already at the head needs none of alembic (tests compare this with alembic's answer)."""
    revisions: set[str] = set()
    downs: set[str] = set()
    for file_name in os.listdir(_VERSIONS):  # (one listing: pathlib's glob cost half a second on a cold disk)
        if not (file_name[:1].isdigit() and file_name.endswith(".py")):
            continue
        for name, value in _REVISION_LINE.findall((_VERSIONS / file_name).read_text(encoding="utf-8")):
            (revisions if name == "revision" else downs).add(value)
    heads = revisions - downs
    if len(heads) != 1:
        raise MetadataStoreError(f"the migrations in {_VERSIONS} have {len(heads)} heads: {sorted(heads)}")
    return heads.pop()


def _cut(value: str | None, limit: int) -> str | None:
    return value if value is None or len(value) <= limit else value[:limit]


def _json_text(value: Any) -> str:
    """JSON that fits a TEXT column: anything longer is kept as a cut string under "_raw" (still valid JSON)."""
    dumped = json.dumps(value, ensure_ascii=False)
    if len(dumped) <= _MAX_TEXT_CHARS:
        return dumped
    return json.dumps({"_raw": dumped[:_MAX_TEXT_CHARS - 100]}, ensure_ascii=False)


def redact_url(url: str) -> str:
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "<invalid database URL>"


class MetadataStore(ToolCallQueries, QueryHistoryQueries, EvaluationQueries):
    def __init__(self, url: str, *, echo: bool = False, timeout: float = 10.0):
        try:
            parsed = make_url(url)
        except ArgumentError as exc:
            raise SettingsError(f"KB_DATABASE_URL: not a database URL: {exc}") from exc
        self._url = parsed
        if parsed.get_backend_name() not in BACKENDS:
            raise SettingsError(f"KB_DATABASE_URL: {parsed.get_backend_name()} is not supported; use SQLite "
                                "(sqlite:///file) or MySQL/MariaDB (mysql+pymysql://user@host/db)")
        kwargs: dict[str, Any] = {"pool_pre_ping": True, "echo": echo}
        if parsed.get_backend_name() == "sqlite":
            database = parsed.database or ""
            if database and database != ":memory:":
                Path(database).parent.mkdir(parents=True, exist_ok=True)
            kwargs["connect_args"] = {"timeout": timeout, "check_same_thread": False}
        else:
            kwargs["pool_recycle"] = 3600
            kwargs["pool_timeout"] = timeout
            if parsed.get_backend_name() in ("mysql", "mariadb"):
                # a frozen server must give an error, not a hang: every socket operation has a deadline
                seconds = max(1, round(timeout))
                kwargs["connect_args"] = {"connect_timeout": seconds, "read_timeout": seconds,
                                          "write_timeout": seconds}
        try:
            self._engine: Engine = create_engine(parsed, **kwargs)
        except (ArgumentError, ImportError) as exc:
            raise SettingsError(f"KB_DATABASE_URL: cannot use {redact_url(url)}: {exc}") from exc
        self._timeout = timeout
        if parsed.get_backend_name() == "sqlite":
            # a busy database (another process's write transaction) waits the backend timeout, not longer
            busy_ms = max(1000, round(timeout * 1000))
            event.listen(self._engine, "connect", lambda dbapi, _record: _sqlite_pragmas(dbapi, busy_ms))
        else:
            event.listen(self._engine, "do_connect", self._connect_within_budget)
        self._sessions = sessionmaker(self._engine, expire_on_commit=False)
        self._call = threading.local()  # .deadline: when the current call's wait for the database ends
        self._wanted_revision: str | None = None  # a migration that failed: the next use tries it again
        self._migration_error: str | None = None
        self._migrating = threading.Lock()

    @property
    def url(self) -> str:
        """The URL without its password, for status displays and logs."""
        return self._url.render_as_string(hide_password=True)

    @property
    def backend(self) -> str:
        return self._url.get_backend_name()

    def dispose(self) -> None:
        self._engine.dispose()

    # -- migrations ----------------------------------------------------------------------------------
    def migrate(self, revision: str = "head") -> None:
        """Bring the schema to `revision`. Safe when several processes start at once. When it fails (the database
        is down), the next use of this store tries again, so a process started during an outage migrates the
        database once it answers, without a restart."""
        def stuck() -> MetadataStoreError:
            return MetadataStoreError("another process holds the migration lock for over 120 s")
        if revision == "head":
            try:
                at_head = self.current_revision() == head_revision()  # one SELECT: most openings end here
            except SQLAlchemyError:
                at_head = False  # the upgrade below reports what is wrong
            if at_head:
                self._wanted_revision = self._migration_error = None
                log.info("database %s is at schema revision %s", self.url, head_revision())
                return
        from alembic import command

        try:
            with self._locked(self.lock("kbmigrate", "schema"), 120, stuck), self._engine.connect() as connection, \
                    socket_timeouts(connection, MIGRATION_TIMEOUT):
                cfg = _alembic_config()
                cfg.attributes["connection"] = connection
                command.upgrade(cfg, revision)
                connection.commit()
        except (SQLAlchemyError, MetadataStoreError) as exc:
            self._wanted_revision, self._migration_error = revision, str(exc)  # the next use tries again
            if isinstance(exc, MetadataStoreError):
                raise
            raise MetadataStoreError(f"cannot migrate the database at {self.url}: {exc}") from exc
        self._wanted_revision = self._migration_error = None
        log.info("database %s is at schema revision %s", self.url, self.current_revision())

    def downgrade(self, revision: str) -> None:
        """Bring the schema down to `revision`, an older version's newest (`kb migrate REVISION --downgrade`), so
        that version runs on this database: it refuses a schema newer than its own. What the newer revisions
        added goes with them (their columns and tables, with what they hold). Already at `revision`: nothing to
        do; a revision above the current one is refused."""
        from alembic import command
        from alembic.util import CommandError

        def stuck() -> MetadataStoreError:
            return MetadataStoreError("another process holds the migration lock for over 120 s")
        try:
            with self._locked(self.lock("kbmigrate", "schema"), 120, stuck), self._engine.connect() as connection, \
                    socket_timeouts(connection, MIGRATION_TIMEOUT):
                cfg = _alembic_config()
                cfg.attributes["connection"] = connection
                command.downgrade(cfg, revision)
                connection.commit()
        except (SQLAlchemyError, CommandError) as exc:
            raise MetadataStoreError(f"cannot bring the database at {self.url} down to revision {revision}: "
                                     f"{exc}") from exc
        log.info("database %s is at schema revision %s", self.url, self.current_revision())

    def _ensure_schema(self) -> None:
        """Run a migration that failed earlier, once, before the first use that finds the database answering.
        One thread migrates; the others wait for its outcome instead of trying (and waiting) again."""
        if self._wanted_revision is None:
            return
        if self._migrating.acquire(blocking=False):
            try:
                if self._wanted_revision is not None:
                    self.migrate(self._wanted_revision)
                    log.warning("the database %s answers again: migrated it (it was not available when this "
                                "process started)", self.url)
            finally:
                self._migrating.release()
            return
        with self._migrating:  # another thread is migrating: its outcome is ours
            pass
        if self._wanted_revision is not None:
            raise MetadataStoreError(f"the database at {self.url} could not be migrated yet: "
                                     f"{self._migration_error}")

    @contextlib.contextmanager
    def _budget(self) -> Iterator[None]:
        """One call's wait for the database: `timeout` in all, however many connections it has to make. A
        nested call shares its caller's budget."""
        if getattr(self._call, "deadline", None) is not None:
            yield
            return
        self._call.deadline = time.monotonic() + self._timeout
        try:
            yield
        finally:
            self._call.deadline = None

    def _connect_within_budget(self, dialect: Any, _record: Any, cargs: Any, cparams: dict[str, Any]) -> Any:
        """MySQL/MariaDB: a new connection waits only for what is left of the call's budget. A pooled
        connection's ping that timed out (a frozen server) has spent it: the replacement fails at once instead
        of waiting the whole timeout again; a ping that failed at once (the server restarted) leaves the
        replacement nearly all of it."""
        deadline = getattr(self._call, "deadline", None)
        if deadline is None:
            return None  # not within a call: connect as configured
        left = deadline - time.monotonic()
        dbapi = dialect.loaded_dbapi
        if left < 0.05:
            raise dbapi.OperationalError(2003, f"the database did not answer within {self._timeout:g} s "
                                               "(KB_BACKEND_TIMEOUT)")
        connection = dbapi.connect(*cargs, **{**cparams, "connect_timeout": left, "read_timeout": left,
                                              "write_timeout": left, "defer_connect": True})
        connection.connect()
        # from now on the connection's own timeouts (pymysql reads these attributes before each socket use)
        connection._read_timeout = cparams.get("read_timeout")
        connection._write_timeout = cparams.get("write_timeout")
        return connection

    def server_version(self) -> str:
        """The database server's own name for itself (`10.11.19-MariaDB`, `SQLite 3.40.1`)."""
        if self._url.get_backend_name() == "sqlite":
            import sqlite3

            return f"SQLite {sqlite3.sqlite_version}"
        with self._budget(), self._engine.connect() as connection:
            return str(connection.execute(text("SELECT VERSION()")).scalar())

    def current_revision(self) -> str | None:
        with self._budget(), self._engine.connect() as connection:
            try:
                return connection.execute(text("SELECT version_num FROM alembic_version")).scalar()
            except SQLAlchemyError:
                return None

    def document_lock(self, file_path: str, timeout: float = 60.0) -> contextlib.AbstractContextManager[None]:
        """Serialise writes to one document across processes (see `named_lock`)."""
        def failed() -> MetadataStoreError:
            return MetadataStoreError(f"another process has been writing {file_path} for over {timeout:.0f} s")
        return self._locked(self.lock("kbdoc", file_path), timeout, failed)

    def lock(self, purpose: str, scope: str) -> NamedLock:
        """A named lock of this database (see `named_lock`): the watcher's lease, a document's write lock."""
        return NamedLock(self._engine, self._url, lock_name(purpose, self._url, scope))

    def lease(self, purpose: str, scope: str) -> NamedLock:
        """A lock one process holds for a long-running job (the folder watcher); never waits to take it."""
        return self.lock(purpose, scope)

    def session(self, what: str | None = None) -> contextlib.AbstractContextManager[Session]:
        """A session of this database for a store of its own tables (the job store, `kb_core.jobs`): a read when
        `what` is None, else one transaction that commits at the end ("cannot {what}" on failure). Same budget,
        same lazy migration and the same `MetadataStoreError` as this store's own calls."""
        return self._read() if what is None else self._write(what)

    @contextlib.contextmanager
    def _locked(self, lock: NamedLock, timeout: float, on_timeout: Callable[[], Exception]) -> Iterator[None]:
        try:
            with self._budget():  # connecting; the wait for the lock itself is `timeout`
                got = lock.acquire(timeout)
        except (SQLAlchemyError, OSError) as exc:
            raise MetadataStoreError(f"cannot take lock {lock.name} in the database at {self.url}: {exc}") from exc
        if not got:
            raise on_timeout()
        try:
            yield
        finally:
            lock.release()

    # -- documents -----------------------------------------------------------------------------------
    def save_document(self, values: DocumentValues, doc_id: int | None = None, *,
                      pending: tuple[str, str] | None = None) -> int:
        """Insert (or update `doc_id`) and commit; returns the id. `pending=(operation, owner)` writes the
        intent record: the row says what is in flight and who does it until `finish_write`."""
        with self._write("save the document row") as session:
            row = session.get(ApiDocument, doc_id) if doc_id is not None else None
            if row is None:
                row = ApiDocument()
                session.add(row)
            for f in fields(DocumentValues):
                setattr(row, f.name, getattr(values, f.name))
            row.pending_operation, row.pending_owner = pending or (None, None)
            row.updated_at = utcnow()
            row.changed_by = acting_name() or row.changed_by
            session.flush()
            return row.id

    def save_new_documents(self, values: Sequence[DocumentValues], *, pending: tuple[str, str]) -> list[int]:
        """Insert many new rows, each with its intent record (`pending`), in one transaction; their ids, in
        order (a batch of new documents: `save_document` one by one costs a commit each)."""
        with self._write("save the document rows") as session:
            rows = []
            for value in values:
                row = ApiDocument()
                for f in fields(DocumentValues):
                    setattr(row, f.name, getattr(value, f.name))
                row.pending_operation, row.pending_owner = pending
                row.updated_at = utcnow()
                row.changed_by = acting_name()
                session.add(row)
                rows.append(row)
            session.flush()
            return [row.id for row in rows]

    def finish_writes(self, done: Sequence[tuple[int, str | None]]) -> None:
        """`finish_write` for many rows — (id, last_error) each, status INDEXED — in one transaction."""
        with self._write("mark the documents indexed") as session:
            ids = [doc_id for doc_id, _ in done]
            found = {row.id: row for start in range(0, len(ids), 500)  # one query per 500, not a get per row
                     for row in session.scalars(select(ApiDocument).where(ApiDocument.id.in_(ids[start:start + 500])))}
            for doc_id, last_error in done:
                row = found.get(doc_id)
                if row is None:
                    continue
                row.status, row.last_error = DocumentStatus.INDEXED, last_error
                row.pending_operation = row.pending_owner = None
                row.updated_at = utcnow()
                row.changed_by = acting_name() or row.changed_by
                session.add(Change(file_path=row.file_path, operation="upsert", content_sha256=row.content_sha256,
                                   created_at=utcnow(), actor=acting_name()))

    def delete_documents(self, doc_ids: Sequence[int]) -> None:
        """Delete many rows (a failed batch's undo), each with its change-feed row, in one transaction."""
        with self._write("delete the document rows") as session:
            for doc_id in doc_ids:
                row = session.get(ApiDocument, doc_id)
                if row is not None:
                    session.add(Change(file_path=row.file_path, operation="delete", content_sha256=None,
                                       created_at=utcnow(), actor=acting_name()))
                    session.delete(row)

    def set_pending(self, doc_id: int, operation: str, owner: str) -> None:
        """Record that `operation` on the row is in flight (status PENDING) before anything else is touched, and
        who asked for it (recovery finishing a killed delete records them with the trashed file)."""
        with self._write("record the pending operation") as session:
            row = session.get(ApiDocument, doc_id)
            if row is not None:
                row.status, row.pending_operation, row.pending_owner = DocumentStatus.PENDING, operation, owner
                row.updated_at = utcnow()
                row.changed_by = acting_name() or row.changed_by

    def finish_write(self, doc_id: int, status: DocumentStatus = DocumentStatus.INDEXED,
                     last_error: str | None = None) -> None:
        """The last step of a write: the row is settled and no longer pending, and the change feed says so in
        the same transaction."""
        with self._write("mark the document indexed") as session:
            row = session.get(ApiDocument, doc_id)
            if row is not None:
                row.status, row.last_error = status, last_error
                row.pending_operation = row.pending_owner = None
                row.updated_at = utcnow()
                row.changed_by = acting_name() or row.changed_by
                session.add(Change(file_path=row.file_path, operation="upsert", content_sha256=row.content_sha256,
                                   created_at=utcnow(), actor=acting_name()))

    # -- change feed ---------------------------------------------------------------------------------
    def latest_change_id(self) -> int:
        with self._read() as session:
            return int(session.scalar(select(func.max(Change.id))) or 0)

    def changes_since(self, after_id: int, limit: int = 1000) -> tuple[list[ChangeRecord], bool]:
        """The changes after `after_id`, oldest first, and whether the feed still reaches back that far (False
        when rows after `after_id` were trimmed: the follower must rescan)."""
        with self._read() as session:
            rows = session.scalars(select(Change).where(Change.id > after_id).order_by(Change.id).limit(limit))
            changes = [ChangeRecord(r.id, r.file_path, r.operation, r.content_sha256) for r in rows]
            oldest = session.scalar(select(func.min(Change.id)))
        complete = oldest is None or oldest <= after_id + 1 or not changes
        return changes, complete

    def changes_with_ids(self, ids: list[int]) -> list[ChangeRecord]:
        """The feed rows with these ids that exist (committed) now, oldest first."""
        if not ids:
            return []
        with self._read() as session:
            rows = session.scalars(select(Change).where(Change.id.in_(ids)).order_by(Change.id))
            return [ChangeRecord(r.id, r.file_path, r.operation, r.content_sha256) for r in rows]

    def trim_changes(self, older_than: datetime) -> int:
        """Delete feed rows written before `older_than` (UTC), always keeping the newest row, so ids never
        restart and every follower's position keeps its meaning. A follower that was down for longer than that
        finds the feed no longer reaches back to it and rescans (`changes_since`)."""
        with self._write("trim the change feed") as session:
            newest = session.scalar(select(func.max(Change.id)))
            if newest is None:
                return 0
            result = session.execute(delete(Change).where(Change.created_at < older_than, Change.id < newest))
            return int(result.rowcount or 0)

    def pending_documents(self) -> list[DocumentRecord]:
        """Rows with a write in flight (or cut short by a crash): cheap, there are only a few."""
        with self._read() as session:
            rows = session.scalars(select(ApiDocument).where(ApiDocument.pending_operation.is_not(None)))
            return [DocumentRecord.of(r) for r in rows]

    def get(self, doc_id: int) -> DocumentRecord | None:
        with self._read() as session:
            row = session.get(ApiDocument, doc_id)
            return None if row is None else DocumentRecord.of(row)

    def get_by_path(self, file_path: str) -> DocumentRecord | None:
        with self._read() as session:
            row = session.scalars(select(ApiDocument).where(ApiDocument.file_path == file_path)).first()
            return None if row is None else DocumentRecord.of(row)

    def list_documents(self) -> list[DocumentRecord]:
        with self._read() as session:
            rows = session.scalars(select(ApiDocument).order_by(ApiDocument.category, ApiDocument.file_name))
            return [DocumentRecord.of(r) for r in rows]

    def document_paths(self) -> set[str]:
        """The file paths of every row (whatever its status): what L0 may hold."""
        return {path for _id, path in self.document_ids_and_paths()}

    def document_ids_and_paths(self) -> list[tuple[int, str]]:
        """(id, file path) of every row: two columns, no objects (a scope's documents at 10,000 rows)."""
        with self._read() as session:
            return [(int(i), p) for i, p in session.execute(select(ApiDocument.id, ApiDocument.file_path))]

    def paths_with_content(self, digests: list[str]) -> dict[str, list[str]]:
        """sha256 -> the paths of the documents with that content (the upload preview's "duplicate of")."""
        found: dict[str, list[str]] = {}
        wanted = sorted(set(digests))
        with self._read() as session:
            for start in range(0, len(wanted), 500):  # bounded IN lists
                rows = session.execute(select(ApiDocument.content_sha256, ApiDocument.file_path)
                                       .where(ApiDocument.content_sha256.in_(wanted[start:start + 500]))
                                       .order_by(ApiDocument.file_path))
                for digest, path in rows:
                    found.setdefault(digest, []).append(path)
        return found

    def count_documents(self) -> int:
        with self._read() as session:
            return int(session.scalar(select(func.count()).select_from(ApiDocument)) or 0)

    def count_indexed_otherwise(self, model: str, content_version: int | None = None) -> int:
        """Documents whose vectors another model made, or none yet (dense vectors left for later); with
        `content_version`, also those whose chunks an older cleaning made (NULL: before the number)."""
        stale = (ApiDocument.embedding_model != model) | ApiDocument.embedding_model.is_(None)
        if content_version is not None:
            stale = stale | (ApiDocument.content_version != content_version) | ApiDocument.content_version.is_(None)
        with self._read() as session:
            return int(session.scalar(select(func.count()).select_from(ApiDocument).where(stale)) or 0)

    def count_chunks(self) -> int:
        with self._read() as session:
            return int(session.scalar(select(func.coalesce(func.sum(ApiDocument.chunk_count), 0))) or 0)

    def set_status(self, doc_id: int, status: DocumentStatus, last_error: str | None) -> None:
        with self._write("update document status") as session:
            row = session.get(ApiDocument, doc_id)
            if row is not None:
                row.status = status
                row.last_error = last_error
                row.updated_at = utcnow()

    def delete_document(self, doc_id: int) -> bool:
        with self._write("delete the document row") as session:
            row = session.get(ApiDocument, doc_id)
            if row is None:
                return False
            session.add(Change(file_path=row.file_path, operation="delete", content_sha256=None, created_at=utcnow(),
                               actor=acting_name()))
            session.delete(row)
            return True

    # -- tool calls ----------------------------------------------------------------------------------
    def record_tool_call(
        self,
        *,
        tool_name: str,
        arguments: dict[str, Any],
        found: bool,
        match_types: tuple[str, ...],
        sources: tuple[str, ...],
        latency_ms: float,
        request_id: str | None,
        caller: str,
        error: str | None = None,
        confidence: str | None = None,
        created_at: datetime | None = None,
    ) -> int:
        values = _tool_call_values(dict(tool_name=tool_name, arguments=arguments, found=found, match_types=match_types,
                                        sources=sources, latency_ms=latency_ms, request_id=request_id, caller=caller,
                                        error=error, confidence=confidence, created_at=created_at))
        with self._write("record a tool call") as session:
            row = ToolCall(**values)
            session.add(row)
            session.flush()
            return row.id

    def record_tool_calls(self, records: Sequence[Mapping[str, Any]], *, dropped: int = 0,
                          reason: str = "") -> int:
        """Insert many tool calls (each as `record_tool_call` takes them) in one transaction, plus, when
        `dropped` > 0, a `tool_call_dropped` row saying how many calls were not logged and why. Returns the
        number of calls inserted."""
        rows = [_tool_call_values(r) for r in records]
        with self._write("record tool calls") as session:
            if rows:  # Core, not the ORM: one executemany (a multi-row INSERT on MySQL), no objects
                session.connection().execute(insert(ToolCall.__table__), rows)
            if dropped > 0:
                session.add(ToolCallDropped(created_at=utcnow(), dropped=dropped, reason=reason[:255]))
        return len(rows)

    def tool_calls_dropped(self, since: datetime) -> int:
        """How many tool calls since `since` (UTC) the call log could not store (see `record_tool_calls`)."""
        moment = since.astimezone(UTC).replace(tzinfo=None) if since.tzinfo else since
        with self._read() as session:
            return int(session.scalar(select(func.coalesce(func.sum(ToolCallDropped.dropped), 0))
                                      .where(ToolCallDropped.created_at >= moment)) or 0)

    def known_request_ids(self, request_ids: Sequence[str]) -> set[str]:
        """Which of `request_ids` the call log holds (a spool left half-moved is checked against it)."""
        found: set[str] = set()
        with self._read() as session:
            for start in range(0, len(request_ids), 500):
                part = list(request_ids[start:start + 500])
                found.update(session.scalars(select(ToolCall.request_id).where(ToolCall.request_id.in_(part))))
        return found

    def recent_tool_calls(self, limit: int = 200) -> list[ToolCallRecord]:
        with self._read() as session:
            rows = session.scalars(select(ToolCall).order_by(ToolCall.id.desc()).limit(limit))
            return [tool_call_record(r) for r in rows]

    # -- helpers -------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _read(self) -> Iterator[Session]:
        self._ensure_schema()
        try:
            with self._budget(), self._sessions() as session:
                yield session
        except SQLAlchemyError as exc:
            raise MetadataStoreError(f"cannot read from the database at {self.url}: {exc}") from exc

    @contextlib.contextmanager
    def _write(self, what: str) -> Iterator[Session]:
        self._ensure_schema()
        try:
            with self._budget(), self._sessions() as session, session.begin():
                yield session
        except SQLAlchemyError as exc:
            raise MetadataStoreError(f"cannot {what} in the database at {self.url}: {exc}") from exc


def _tool_call_values(record: Mapping[str, Any]) -> dict[str, Any]:
    """A `tool_call` row's columns from a call record, cut to fit the columns."""
    values: dict[str, Any] = {
        "tool_name": record["tool_name"],
        "arguments": _json_text(record.get("arguments") or {}),
        "found": bool(record.get("found")),
        "match_types": ",".join(record.get("match_types") or ()),
        "sources": _json_text(list(record.get("sources") or ())),
        "latency_ms": float(record.get("latency_ms") or 0.0),
        "request_id": record.get("request_id"),
        "caller": record.get("caller") or "python",
        "error": _cut(record.get("error"), _MAX_TEXT_CHARS),
        "created_at": record.get("created_at") or utcnow(),
        "confidence": record.get("confidence"),
    }
    for column, limit in _TOOL_CALL_LIMITS.items():
        values[column] = _cut(values[column], limit)
    return values


def _sqlite_pragmas(dbapi_connection: Any, busy_ms: int) -> None:
    cursor = dbapi_connection.cursor()
    # WAL lets the console read while an upload writes; a busy timeout waits for the writer instead of failing.
    cursor.execute(f"PRAGMA busy_timeout={int(busy_ms)}")
    cursor.close()
    switch_to_wal(dbapi_connection, within_s=busy_ms / 1000)
