"""Waiting for an exclusive `flock` until a deadline: the kernel drops the lock with its process, so a writer
or opener that crashed never leaves it held, and a stuck one makes the others give up instead of hanging."""

from __future__ import annotations

import contextlib
import fcntl
import time
from collections.abc import Callable, Iterator
from typing import IO


@contextlib.contextmanager
def flock_waiting(handle: IO, deadline: float, on_timeout: Callable[[], Exception]) -> Iterator[None]:
    """Hold an exclusive flock on `handle`, polling until `deadline` (time.monotonic()); past it, raise
    `on_timeout()`."""
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except (BlockingIOError, PermissionError):  # EAGAIN / EACCES: someone else holds it
            if time.monotonic() >= deadline:
                raise on_timeout() from None
            time.sleep(0.02)
    try:
        yield
    finally:
        fcntl.flock(handle, fcntl.LOCK_UN)
