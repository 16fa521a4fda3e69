"""A lease held in the database for as long as a process does one job for the whole knowledge base (the
folder watcher): MySQL/MariaDB `GET_LOCK` and PostgreSQL advisory locks on a dedicated connection, SQLite an
`flock` on a file in the folder the per-document locks use. Unlike `MetadataStore.document_lock` it never
waits: `try_acquire` answers at once, and the holder calls `check` now and then, because a server can kill
the connection and with it the lock without telling anyone.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
from pathlib import Path
from typing import IO

from sqlalchemy import Connection, Engine, text
from sqlalchemy.engine import URL
from sqlalchemy.exc import SQLAlchemyError

log = logging.getLogger(__name__)


def lease_name(purpose: str, url: URL, scope: str) -> str:
    """A lock name unique per database and scope: MySQL lock names are server-wide, so two databases on one
    server (or two test runs) must not share a watcher. 48 characters, under MySQL's 64."""
    key = f"{url.get_backend_name()}|{url.host}|{url.port}|{url.database}|{scope}"
    return f"{purpose}_" + hashlib.sha1(key.encode("utf-8")).hexdigest()[:40]


class DatabaseLease:
    def __init__(self, engine: Engine, url: URL, name: str):
        self._engine = engine
        self._url = url
        self.name = name
        self._backend = url.get_backend_name()
        self._connection: Connection | None = None
        self._file: IO[str] | None = None
        self._file_path: Path | None = None
        self._private = False  # an in-memory SQLite database: one process, nothing to elect
        self.connection_id: int | None = None  # MySQL: the session holding the lock (for operators and tests)

    @property
    def held(self) -> bool:
        return self._connection is not None or self._file is not None or self._private

    def try_acquire(self) -> bool:
        """Take the lease if nobody holds it; never waits. Database errors count as "not now"."""
        if self.held:
            return True
        if self._backend == "sqlite":
            return self._acquire_file()
        try:
            connection = self._engine.connect()
        except SQLAlchemyError as exc:
            log.debug("cannot reach the database for lease %s: %s", self.name, exc)
            return False
        try:
            if self._backend in ("mysql", "mariadb"):
                got = connection.execute(text("SELECT GET_LOCK(:n, 0)"), {"n": self.name}).scalar() == 1
                if got:
                    self.connection_id = connection.execute(text("SELECT CONNECTION_ID()")).scalar()
            elif self._backend == "postgresql":
                got = bool(connection.execute(text("SELECT pg_try_advisory_lock(hashtext(:n))"),
                                              {"n": self.name}).scalar())
            else:
                got = True  # no lock primitive: every process watches (the syncs are idempotent)
            connection.commit()  # end the implicit transaction: the lock is the session's, not the transaction's
        except SQLAlchemyError as exc:
            log.debug("cannot take lease %s: %s", self.name, exc)
            connection.invalidate()
            connection.close()
            return False
        if not got:
            connection.close()
            return False
        self._connection = connection
        return True

    def check(self) -> bool:
        """Whether the lease is still ours. A lost lease is released here (the caller goes back to electing)."""
        if not self.held:
            return False
        if self._private:
            ours = True
        elif self._file is not None:
            ours = self._lock_file_is_ours()
        else:
            assert self._connection is not None
            try:
                if self._backend in ("mysql", "mariadb"):
                    ours = self._connection.execute(text("SELECT IS_USED_LOCK(:n) = CONNECTION_ID()"),
                                                    {"n": self.name}).scalar() == 1
                else:  # a PostgreSQL session lock lives as long as the session answers
                    ours = self._connection.execute(text("SELECT 1")).scalar() == 1
                self._connection.commit()
            except SQLAlchemyError as exc:
                log.warning("the connection holding lease %s is gone: %s", self.name, exc)
                ours = False
        if not ours:
            self.release()
        return ours

    def release(self) -> None:
        self._private = False
        if self._file is not None:
            try:
                fcntl.flock(self._file, fcntl.LOCK_UN)
            finally:
                self._file.close()
                self._file = None
        connection, self._connection = self._connection, None
        self.connection_id = None
        if connection is None:
            return
        try:
            if self._backend in ("mysql", "mariadb"):
                connection.execute(text("SELECT RELEASE_LOCK(:n)"), {"n": self.name})
            elif self._backend == "postgresql":
                connection.execute(text("SELECT pg_advisory_unlock(hashtext(:n))"), {"n": self.name})
            connection.commit()
            connection.close()
        except SQLAlchemyError as exc:  # the connection is gone, and the lock with it
            log.debug("releasing lease %s: %s", self.name, exc)
            connection.invalidate()
            connection.close()

    # -- SQLite: processes share a machine, so a file lock next to the database decides ---------------------
    def _acquire_file(self) -> bool:
        database = self._url.database or ""
        if not database or database == ":memory:":
            self._private = True
            return True
        folder = Path(f"{database}.locks")  # beside the per-document locks
        try:
            folder.mkdir(parents=True, exist_ok=True)
            handle = open(folder / f"{self.name}.lock", "a+")  # noqa: SIM115 - held for the lease's lifetime
        except OSError as exc:
            log.warning("cannot open the lock file for lease %s: %s", self.name, exc)
            return False
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            return False
        self._file, self._file_path = handle, folder / f"{self.name}.lock"
        return True

    def _lock_file_is_ours(self) -> bool:
        """A lock file removed (or replaced) by hand would let a second process lock a new one."""
        assert self._file is not None and self._file_path is not None
        try:
            return os.fstat(self._file.fileno()).st_ino == os.stat(self._file_path).st_ino
        except OSError:
            return False
