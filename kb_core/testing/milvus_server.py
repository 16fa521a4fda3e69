"""A `milvus-lite server` subprocess on a free loopback port: several processes share one Milvus through it
(the tests and the feed benchmark use it; operators run the same command)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def milvus_lite_server(data_dir: Path, *, start_timeout: float = 60.0) -> Iterator[str]:
    """Start `milvus-lite server --data-dir data_dir` and yield its URI; killed on exit."""
    port = free_port()
    server = subprocess.Popen([str(Path(sys.executable).parent / "milvus-lite"), "server", "--data-dir",
                               str(data_dir), "--host", "127.0.0.1", "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + start_timeout
        while True:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"milvus-lite server did not start on port {port}")
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.kill()
        server.wait()
