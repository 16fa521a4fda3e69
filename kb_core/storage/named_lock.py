"""Named locks with a deadline, shared by every process of one knowledge base: the per-document write locks,
the migration lock and the folder watcher's lease are all one of these.

Two backends, chosen by the database: MySQL/MariaDB `GET_LOCK` on a connection of the lock's own (the server
drops it with the connection), and for SQLite — whose processes share a machine — an `flock` on a file in
`<database>.locks/` (the kernel drops it with the process). Either way a process that dies releases its
locks, and a stuck holder makes the others give up at their deadline instead of hanging.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from sqlalchemy import Connection, Engine, text
from sqlalchemy.engine import URL
from sqlalchemy.exc import SQLAlchemyError

log = logging.getLogger(__name__)

BACKENDS = ("sqlite", "mysql", "mariadb")
# Seconds a MySQL release waits for the server. A healthy one answers in a millisecond; past this the connection
# is dropped instead, which releases the lock just as well (the server ends the session), so a frozen server
# never makes a finished write wait a second timeout for its lock.
RELEASE_WAIT = 0.5


def lock_name(purpose: str, url: URL, scope: str) -> str:
    """A lock name unique per database and scope: MySQL lock names are server-wide, so two databases on one
    server (or two test runs) must not share a lock. 48 characters, under MySQL's 64."""
    key = f"{url.get_backend_name()}|{url.host}|{url.port}|{url.database}|{scope}"
    return f"{purpose}_" + hashlib.sha1(key.encode("utf-8")).hexdigest()[:40]


@contextlib.contextmanager
def flock_waiting(handle: IO, deadline: float, on_timeout: Callable[[], Exception]) -> Iterator[None]:
    """Hold an exclusive flock on `handle`, polling until `deadline` (time.monotonic()); past it, raise
    `on_timeout()`. Also used for locks that are files by nature (the Milvus Lite opening lock)."""
    while not _try_flock(handle):
        if time.monotonic() >= deadline:
            raise on_timeout() from None
        time.sleep(0.02)
    try:
        yield
    finally:
        fcntl.flock(handle, fcntl.LOCK_UN)


def _try_flock(handle: IO) -> bool:
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except (BlockingIOError, PermissionError):  # EAGAIN / EACCES: someone else holds it
        return False


class NamedLock:
    """One named lock. `acquire(timeout)` waits up to `timeout` seconds (0: answers at once); `still_held()`
    tells whether the lock is still this holder's (a server may kill the connection, and with it the lock,
    without telling anyone); `release()` lets go. `hold(timeout, ...)` is the context-manager form."""

    def __init__(self, engine: Engine, url: URL, name: str):
        self._engine = engine
        self._url = url
        self.name = name
        self._backend = url.get_backend_name()
        database = url.database or ""
        # an in-memory SQLite database belongs to one process: there is nobody to exclude
        self._private = self._backend == "sqlite" and database in ("", ":memory:")
        self._file_path = None if self._private or self._backend != "sqlite" else \
            Path(f"{database}.locks") / f"{name}.lock"
        self._file: IO[str] | None = None
        self._connection: Connection | None = None
        self._held_privately = False
        self.connection_id: int | None = None  # MySQL: the session holding the lock (for operators and tests)

    @property
    def held(self) -> bool:
        return self._connection is not None or self._file is not None or self._held_privately

    def acquire(self, timeout: float) -> bool:
        """Take the lock, waiting up to `timeout` seconds; False when someone else still holds it then.
        Database errors raise `SQLAlchemyError`/`OSError` (the caller decides what they mean)."""
        if self.held:
            return True
        if self._private:
            self._held_privately = True
            return True
        if self._file_path is not None:
            return self._acquire_file(timeout)
        connection = self._engine.connect()
        try:
            got = connection.execute(text("SELECT GET_LOCK(:n, :t)"),
                                     {"n": self.name, "t": max(0, round(timeout))}).scalar() == 1
            if got:
                self.connection_id = connection.execute(text("SELECT CONNECTION_ID()")).scalar()
            connection.commit()  # end the implicit transaction: the lock is the session's, not the transaction's
        except BaseException:
            connection.invalidate()
            connection.close()
            raise
        if not got:
            connection.close()
            return False
        self._connection = connection
        return True

    def _acquire_file(self, timeout: float) -> bool:
        assert self._file_path is not None
        self._file_path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(self._file_path, "a+")  # noqa: SIM115 - held for as long as the lock is
        deadline = time.monotonic() + timeout
        while not _try_flock(handle):
            if time.monotonic() >= deadline:
                handle.close()
                return False
            time.sleep(0.02)
        self._file = handle
        return True

    def still_held(self) -> bool:
        """Whether the lock is still ours; a lost lock is released here."""
        if not self.held:
            return False
        if self._held_privately:
            return True
        if self._file is not None:
            ours = self._file_is_ours()
        else:
            assert self._connection is not None
            try:
                ours = self._connection.execute(text("SELECT IS_USED_LOCK(:n) = CONNECTION_ID()"),
                                                {"n": self.name}).scalar() == 1
                self._connection.commit()
            except SQLAlchemyError as exc:
                log.warning("the connection holding lock %s is gone: %s", self.name, exc)
                ours = False
        if not ours:
            self.release()
        return ours

    def _file_is_ours(self) -> bool:
        """A lock file removed (or replaced) by hand would let a second process lock a new one."""
        assert self._file is not None and self._file_path is not None
        try:
            return os.fstat(self._file.fileno()).st_ino == os.stat(self._file_path).st_ino
        except OSError:
            return False

    def release(self) -> None:
        self._held_privately = False
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
            with socket_timeouts(connection, RELEASE_WAIT):
                connection.execute(text("SELECT RELEASE_LOCK(:n)"), {"n": self.name})
                connection.commit()
            connection.close()
        except SQLAlchemyError as exc:  # the connection is gone (or dropped now), and the lock with it
            log.debug("releasing lock %s: %s", self.name, exc)
            connection.invalidate()
            connection.close()

    @contextlib.contextmanager
    def hold(self, timeout: float, on_timeout: Callable[[], Exception]) -> Iterator[None]:
        if not self.acquire(timeout):
            raise on_timeout()
        try:
            yield
        finally:
            self.release()

    # the folder watcher's lease protocol: never waits
    def try_acquire(self) -> bool:
        """Take the lock if nobody holds it; never waits. Database errors count as "not now"."""
        try:
            return self.acquire(0)
        except (SQLAlchemyError, OSError) as exc:
            log.debug("cannot take lock %s: %s", self.name, exc)
            return False

    def check(self) -> bool:
        return self.still_held()


@contextlib.contextmanager
def socket_timeouts(connection: Connection, seconds: float) -> Iterator[None]:
    """Other socket timeouts on a pymysql connection for a moment (it reads them before each socket use); a no-op
    on other drivers."""
    raw = connection.connection.dbapi_connection
    saved = (getattr(raw, "_read_timeout", None), getattr(raw, "_write_timeout", None))
    if hasattr(raw, "_read_timeout"):
        raw._read_timeout = raw._write_timeout = seconds
    try:
        yield
    finally:
        if hasattr(raw, "_read_timeout"):
            raw._read_timeout, raw._write_timeout = saved
