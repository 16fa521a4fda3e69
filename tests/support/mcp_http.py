"""The MCP server over streamable HTTP as a real process (`python -m kb_core.mcp --http`): started on a free port,
posted to, stopped (tests/processes/test_mcp_http.py, test_mcp_tokens.py, test_metrics_http.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from support.servers import free_port
from support.stores import NO_MODEL

TOKEN = "t0k3n-for-the-tests-only-0123456789"
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "test", "version": "1"}}}


def mcp_env(root: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KB_MCP_")}
    return {**env, "KB_APP_ROOT": str(root), "KB_EMBEDDING_MODEL": NO_MODEL, **extra}


def start(root: Path, *args: str, **env: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    log = open(root / f"mcp-{port}.log", "wb")  # noqa: SIM115 - closed with the process below
    proc = subprocess.Popen([sys.executable, "-m", "kb_core.mcp", "--http", "--port", str(port), *args],
                            env=mcp_env(root, **env), stdout=log, stderr=subprocess.STDOUT)
    proc.log = log  # type: ignore[attr-defined]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # until the port answers (anything, even 401)
        if proc.poll() is not None:
            pytest.fail(f"the MCP server exited with {proc.returncode}: {(root / f'mcp-{port}.log').read_text()}")
        try:  # a path outside /mcp: the probe must not open a session
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5).close()
            return proc, port
        except urllib.error.HTTPError:
            return proc, port
        except OSError:
            time.sleep(0.2)
    proc.kill()
    pytest.fail("the MCP server did not listen within 60 s")


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
    proc.log.close()  # type: ignore[attr-defined]


def post(port: int, body: dict, *, token: str | None, session: str | None = None) -> tuple[int, dict, str]:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    if session is not None:
        headers["Mcp-Session-Id"] = session
        headers["Mcp-Protocol-Version"] = "2025-06-18"
    request = urllib.request.Request(f"http://127.0.0.1:{port}/mcp", data=json.dumps(body).encode(),
                                     headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read().decode()
