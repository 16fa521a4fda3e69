"""Servers a test starts and talks to: a free port, a health check, one `streamlit run app.py` from the checkout,
and who can reach a listening socket."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.paths import REPO
from support.stores import NO_MODEL


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_healthy(url: str, server: subprocess.Popen, log: Path, deadline_s: float = 60) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"streamlit exited with {server.returncode}:\n{log.read_text(errors='replace')}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200 and response.read().strip() == b"ok":
                    return
        except OSError:
            pass
        time.sleep(0.5)
    pytest.fail(f"streamlit did not become healthy within {deadline_s:.0f} s:\n{log.read_text(errors='replace')}")


# -- one `streamlit run app.py` for the process tests (browser, sign-in, exposure) ------------------------------
STALE_ENV = ("KB_DATABASE_URL", "KB_MILVUS_URI", "KB_BASE_PATH", "KB_CONFIG")  # would point at another KB


def server_env(root: Path, *, drop_prefixes: tuple[str, ...] = (), **extra: str) -> dict[str, str]:
    """The environment of a console (or of the process that syncs its root first) over `root`: this one's, without
    STALE_ENV and the variables starting with one of `drop_prefixes`, BM25 only and offline, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if k not in STALE_ENV and not k.startswith(drop_prefixes)}
    env.update(KB_APP_ROOT=str(root), KB_EMBEDDING_MODEL=NO_MODEL, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env.update(extra)
    return env


def sync_root(env: dict[str, str]) -> None:
    """Reconcile the knowledge base `env` names in a process of its own, before a server opens it (Milvus Lite
    admits one process at a time, and the server must be the one holding it)."""
    code = "from kb_core import open_knowledge_base as o; o().documents.reconcile()"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


@dataclass(frozen=True)
class Served:
    port: int
    url: str  # http://127.0.0.1:<port>
    log: Path  # the server's stdout and stderr


@contextlib.contextmanager
def streamlit_server(tmp_path: Path, env: dict[str, str], *, port: int | None = None,
                     address: str | None = "127.0.0.1", args: Sequence[str] = ()) -> Iterator[Served]:
    """`streamlit run app.py` from the checkout (its .streamlit/config.toml applies) in `env` (see server_env) on
    `port` (a free one by default) and `address` (None: no option, the config file's), headless, no file watcher,
    plus `args`; yielded once its health check answers. Its output goes to `tmp_path/streamlit-<port>.log`, shown
    when it does not come up and added to the error of a test that fails while it runs. On the way out, even on
    failure, it is stopped (SIGTERM, then SIGKILL for its whole process group) and waited for: the port is free."""
    port = port or free_port()
    log = tmp_path / f"streamlit-{port}.log"
    command = [sys.executable, "-m", "streamlit", "run", str(REPO / "app.py"), "--server.headless", "true",
               "--server.port", str(port), "--browser.gatherUsageStats", "false",
               "--server.fileWatcherType", "none",  # no reruns or banners while someone edits the checkout
               *(["--server.address", address] if address else []), *args]
    with log.open("wb") as out:
        proc = subprocess.Popen(command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)  # a group of its own: nothing it starts outlives it
    failed: BaseException | None = None
    try:
        wait_healthy(f"http://127.0.0.1:{port}/_stcore/health", proc, log)
        try:
            yield Served(port=port, url=f"http://127.0.0.1:{port}", log=log)
        except BaseException as exc:
            failed = exc
            raise
    finally:
        _stop(proc)
        if failed is not None and not isinstance(failed, GeneratorExit):
            failed.add_note(f"streamlit's log ({log}), its end:\n{log.read_text(errors='replace')[-4000:]}")


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()  # a clean shutdown first: a test may read the log for tracebacks afterwards
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # the server if it hung, and anything of its group left behind
    proc.wait(timeout=15)


# -- who can reach a listening socket (loopback by default) --------------------------------------------------------
def machine_addresses() -> list[str]:
    """This machine's non-loopback IP addresses (`hostname -I`): what other machines would connect to."""
    import ipaddress

    found = subprocess.run(["hostname", "-I"], capture_output=True, text=True, check=False).stdout.split()
    return [a for a in found if not ipaddress.ip_address(a.split("%")[0]).is_loopback]


def listening_addresses(port: int) -> set:
    """The local addresses of the TCP sockets listening on `port` (from /proc/net/tcp and tcp6), IPv4-mapped IPv6
    addresses as IPv4."""
    import ipaddress

    found = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            local, state = fields[1], fields[3]
            ip_hex, port_hex = local.split(":")
            if state != "0A" or int(port_hex, 16) != port:  # 0A: LISTEN
                continue
            raw = bytes.fromhex(ip_hex)  # host byte order per 32-bit word
            words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
            ip = ipaddress.ip_address(words)
            found.add(getattr(ip, "ipv4_mapped", None) or ip)  # gRPC binds 127.0.0.1 as ::ffff:127.0.0.1
    return found

