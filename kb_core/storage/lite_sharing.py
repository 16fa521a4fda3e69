"""One Milvus Lite directory, many processes on one machine, no configuration.

Milvus Lite lets one process open a directory (an flock on `<dir>/LOCK`), but that process runs the
directory as an in-process gRPC server on a loopback port. So the first process to open a directory becomes
its *owner*: it starts that server and publishes `{pid, address, started}` in `<dir>.server.json`; every
other process of the same user on the machine reads the file and connects to the address as a *follower*.
The server listens on 127.0.0.1 only and the file is readable by its owner only (0600); the port itself
asks for no password (docs/security.md). Openers serialise
on an flock of `<dir>.opening` while they probe, start and publish, so processes opening at once never race:
one becomes the owner, the rest read its address.

A published server is stale when its pid is dead or its port refuses connections (the owner closed it or
crashed): the next opener takes over. A follower checks the owner's pid before each use (one `kill(pid, 0)`,
about a microsecond) and, once the owner is gone, opens again through the same path - and may become the
owner itself. An owner that is alive but stuck (SIGSTOP, a debugger) keeps its lock; followers' calls then
fail within the backend timeout with an error naming its pid and address.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from kb_core.errors import VectorStoreError
from kb_core.storage.named_lock import flock_waiting

__all__ = ["LiteServer", "LiteSession", "open_lite", "quiet_pymilvus_connection_logs", "release_lite"]

log = logging.getLogger(__name__)


def quiet_pymilvus_connection_logs() -> None:
    """pymilvus logs a full traceback (and retry chatter) for every failed call, and a takeover fails a few
    on purpose: a follower reaches the old owner's port once more after it exited. Each of those is handled
    here and reported through VectorStoreError, so the tracebacks would only alarm operators. Called after
    pymilvus is imported: its import runs `logging.config.dictConfig`, which resets its child loggers."""
    for name in ("pymilvus.decorators", "pymilvus.client.connection_manager"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


# pymilvus' default channel pings the server every 10 s even without calls; the Lite gRPC server (grpcio with
# default settings) answers an idle client's pings with GOAWAY "too_many_pings" after a while, which breaks
# a long-lived follower. Without calls in flight there is nothing to keep alive.
GRPC_OPTIONS = {"grpc.keepalive_permit_without_calls": 0}


@dataclass(frozen=True)
class LiteServer:
    """What an owner publishes next to the directory."""

    pid: int
    address: str  # http://127.0.0.1:<port>
    started: float

    def describe(self) -> str:
        return f"process {self.pid} at {self.address}"


@dataclass(frozen=True)
class LiteSession:
    """How this process reaches a directory: as its owner (`owner` is None) or following `owner`."""

    directory: str
    address: str
    owner: LiteServer | None
    published: tuple[int, int] | None = None  # (inode, mtime ns) of the owner's file when we read it

    @property
    def is_owner(self) -> bool:
        return self.owner is None

    def owner_gone(self) -> bool:
        """A follower's check before each use: the owner exited, or closed the directory (its file is gone
        or replaced by a new owner's). A pid check and a stat, a few microseconds."""
        if self.owner is None:
            return False
        return not pid_alive(self.owner.pid) or _file_identity(f"{self.directory}.server.json") != self.published


def info_path(directory: str | Path) -> Path:
    return Path(f"{directory}.server.json")


def opening_lock_path(directory: str | Path) -> Path:
    return Path(f"{directory}.opening")


_EXITING_OWNER_GRACE = 5.0  # seconds; an exiting owner's server stops with a 2 s grace, then its lock goes

# Directories this process owns -> how many stores use them: the server is released with the last one.
_owned: dict[str, int] = {}
_owned_lock = threading.Lock()


def open_lite(directory: str | Path, *, timeout: float) -> LiteSession:
    """Become the owner of `directory` or find its owner, within `timeout` seconds."""
    directory = str(Path(directory).resolve())
    Path(directory).parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    deadline = started + timeout
    last_problem = ""
    while True:
        with _opening_lock(directory, deadline):
            with _owned_lock:
                if directory in _owned:  # another store in this process owns it already
                    _owned[directory] += 1
                    return LiteSession(directory, _started_address(directory), None)
            published = _file_identity(info_path(directory))
            server = read_server(directory)
            if server is not None and server.pid != os.getpid() and pid_alive(server.pid) \
                    and _port_answers(server.address):
                log.info("the Milvus Lite directory %s is served by %s; using it from there", directory,
                         server.describe())
                return LiteSession(directory, server.address, server, published)
            if not _locked_by_another_process(Path(directory)):
                return _become_owner(directory)
            last_problem = (f"published by {server.describe()}, which does not answer" if server is not None
                            else "no process published an address for it")
        # Locked but nothing to follow: an owner that is still exiting (its lock goes with the process, a
        # second or two after its port closes), or a process outside the knowledge base holding the
        # directory - which never publishes, so there is nothing to wait for.
        if server is None or time.monotonic() >= min(deadline, started + _EXITING_OWNER_GRACE):
            raise VectorStoreError(
                f"the Milvus Lite directory {directory} is open in another process that does not share it "
                f"({last_problem}). Close that process, or serve the directory with `milvus-lite server "
                f"--data-dir {directory} --host 127.0.0.1 --port 19530` and set KB_MILVUS_URI="
                "http://127.0.0.1:19530 in every process.")
        time.sleep(0.1)


def release_lite(session: LiteSession) -> None:
    """A store is done with the directory: the owner's last store stops the server and frees the lock, so
    the next process to open becomes the owner."""
    if not session.is_owner:
        return
    from milvus_lite.server_manager import server_manager_instance

    with _opening_lock(session.directory, time.monotonic() + 30):
        with _owned_lock:
            left = _owned.get(session.directory, 0) - 1
            if left > 0:
                _owned[session.directory] = left
                return
            _owned.pop(session.directory, None)
        server = read_server(session.directory)
        if server is not None and server.pid == os.getpid():
            info_path(session.directory).unlink(missing_ok=True)
        server_manager_instance.release_server(session.directory)
        log.info("released the Milvus Lite directory %s", session.directory)


def read_server(directory: str | Path) -> LiteServer | None:
    try:
        data = json.loads(info_path(directory).read_text(encoding="utf-8"))
        return LiteServer(int(data["pid"]), str(data["address"]), float(data["started"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None  # missing or half-written by a crashed writer: nobody to follow


def _become_owner(directory: str) -> LiteSession:
    from milvus_lite.server_manager import server_manager_instance

    address = server_manager_instance.start_and_get_uri(directory)
    if address is None:  # server_manager logged why
        raise VectorStoreError(f"cannot start Milvus Lite on {directory}")
    if not _is_loopback_url(address):  # milvus_lite binds 127.0.0.1; never publish anything wider
        server_manager_instance.release_server(directory)
        raise VectorStoreError(f"Milvus Lite served {directory} at {address}, not on loopback: not sharing it")
    server = LiteServer(os.getpid(), address, time.time())
    target = info_path(directory)
    temporary = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    # Readable by this user only (0600, whatever the umask): the port answers anyone on the machine who finds
    # it, and Milvus Lite asks for no password (docs/security.md).
    handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        os.fchmod(out.fileno(), 0o600)  # a leftover temporary file keeps its old mode through O_TRUNC
        out.write(json.dumps({"pid": server.pid, "address": server.address, "started": server.started}))
    os.replace(temporary, target)  # readers see the old file or the new one, never half of it
    with _owned_lock:
        _owned[directory] = _owned.get(directory, 0) + 1
    log.info("serving the Milvus Lite directory %s to other processes at %s", directory, address)
    return LiteSession(directory, address, None)


def _started_address(directory: str) -> str:
    from milvus_lite.server_manager import server_manager_instance

    address = server_manager_instance.start_and_get_uri(directory)  # the running one: no new server
    if address is None:
        raise VectorStoreError(f"cannot start Milvus Lite on {directory}")
    return address


@contextlib.contextmanager
def _opening_lock(directory: str, deadline: float) -> Iterator[None]:
    """Cross-process mutex for probing/starting/publishing. flock goes with the process, so a crashed
    opener never leaves it held; a stuck one makes others give up at `deadline` instead of hanging."""
    with open(opening_lock_path(directory), "a") as handle, flock_waiting(handle, deadline, lambda: VectorStoreError(
            f"another process has been opening the Milvus Lite directory {directory} for too long "
            f"(it holds {opening_lock_path(directory)})")):
        yield


@contextlib.contextmanager
def writing(directory: str | Path, timeout: float) -> Iterator[None]:
    """Cross-process mutex for writes to one Lite directory. Its server runs requests on several threads and
    a flush freezes the memtable before it takes Lite's own lock, so two processes writing at once can commit
    their flushes out of order ("current_seq is monotonic; tried to set 4 < 6", seen in CI with three
    processes uploading at once). One writer at a time costs nothing next to the flush itself."""
    path = Path(f"{Path(directory).resolve()}.writes")
    with open(path, "a") as handle, flock_waiting(handle, time.monotonic() + timeout, lambda: VectorStoreError(
            f"another process has been writing to the Milvus Lite directory {directory} for more than "
            f"{timeout:g} s (it holds {path})")):
        yield


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, another user's
    return True


def _file_identity(path: str | Path) -> tuple[int, int] | None:
    try:
        stat = os.stat(path)  # not Path.stat: this runs before every follower call
    except OSError:
        return None
    return stat.st_ino, stat.st_mtime_ns


def _is_loopback_url(address: str) -> bool:
    host = urlparse(address).hostname or ""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _port_answers(address: str) -> bool:
    """A TCP connect only: a stopped (SIGSTOP) owner still answers here - its kernel accepts - so followers
    do not take over a directory whose lock it still holds."""
    parsed = urlparse(address)
    try:
        with socket.create_connection((parsed.hostname or "127.0.0.1", parsed.port or 0), timeout=1.0):
            return True
    except OSError:
        return False


def _locked_by_another_process(directory: Path) -> bool:
    lock = directory / "LOCK"
    if not lock.exists():
        return False
    try:
        with open(lock, "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(handle, fcntl.LOCK_UN)
        return False
    except OSError:
        return True
