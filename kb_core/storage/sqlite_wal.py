"""One rule for putting a SQLite file in WAL mode, shared by the metadata and full-text stores."""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


def switch_to_wal(con: sqlite3.Connection, *, within_s: float,
                  pause: Callable[[float], None] = time.sleep) -> None:
    """`PRAGMA journal_mode=WAL`, tried again while another connection holds the file.

    Switching needs an exclusive lock. When several processes open a fresh file at once, SQLite answers
    "database is locked" at once, without calling the busy handler, to the one it would otherwise leave
    deadlocked; the busy timeout does not help there (seen in CI: three processes opening one fresh folder).
    """
    deadline = time.monotonic() + within_s
    wait = 0.005
    while True:
        try:
            con.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            log.debug("the switch to WAL waits for another connection: %s", exc)
        pause(wait)
        wait = min(wait * 2, 0.1)
