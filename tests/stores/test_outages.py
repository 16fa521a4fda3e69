"""Degraded, never dead: backends that are down, frozen or restarted never take L0 down, never hang
a call past its timeout, and L1 comes back without reopening."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from support.documents import doc
from support.stores import make_settings

from kb_core import KnowledgeBaseError
from kb_core.bootstrap import open_knowledge_base

PAYMENT = doc("支付网关错误码定义", ["ERR_TIMEOUT", "超时"], "记录支付网关错误码",
              "# 错误码\n\nERR_TIMEOUT 表示渠道在 3 秒内未响应，需要查询订单最终状态。\n")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _FrozenServer:
    """Accepts TCP connections and never answers: a database server stopped with SIGSTOP, seen from a client."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


def _with_files(root: Path) -> None:
    (root / "knowledge_base/api").mkdir(parents=True)
    (root / "knowledge_base/api/payment-errors.md").write_text(PAYMENT)


def test_database_down_at_open_leaves_l0_answering(tmp_path):
    _with_files(tmp_path)
    url = f"mysql+pymysql://root@127.0.0.1:{_free_port()}/kb?charset=utf8mb4"  # nothing listens there
    kb = open_knowledge_base(make_settings(tmp_path, db_url=url, backend_timeout=2))
    try:
        answer = kb.lookup_knowledge("ERR_TIMEOUT")
        assert answer["found"] and answer["primary"]["confidence"] == "high"
        status = kb.status()
        assert status.database_error and status.counts.database is None and status.counts.l0 == 1
        with pytest.raises(KnowledgeBaseError):
            kb.documents.upload("x.md", PAYMENT.encode(), "api")
    finally:
        kb.close()


@pytest.mark.slow
def test_a_frozen_database_gives_an_error_within_its_timeout(tmp_path):
    _with_files(tmp_path)
    frozen = _FrozenServer()
    try:
        url = f"mysql+pymysql://root@127.0.0.1:{frozen.port}/kb?charset=utf8mb4"
        started = time.monotonic()
        kb = open_knowledge_base(make_settings(tmp_path, db_url=url, backend_timeout=1))
        try:
            assert kb.lookup_knowledge("ERR_TIMEOUT")["found"]
            status = kb.status(max_age=0)
            assert status.database_error
            with pytest.raises(KnowledgeBaseError):
                kb.documents.upload("x.md", PAYMENT.encode(), "api")
            assert time.monotonic() - started < 30  # open + status + upload, each bounded by the 1 s timeout
        finally:
            kb.close()
    finally:
        frozen.close()


def test_the_module_level_tool_never_raises(tmp_path, monkeypatch):
    import kb_core.bootstrap as bootstrap

    monkeypatch.setattr(bootstrap, "_default", None)
    monkeypatch.setenv("KB_APP_ROOT", str(tmp_path))
    monkeypatch.setenv("KB_MAX_UPLOAD_BYTES", "-5")  # an invalid setting: opening fails
    answer = bootstrap.lookup_knowledge("ERR_TIMEOUT")
    assert answer["found"] is False and "could not be opened" in answer["error"]


def _start_milvus(data_dir: Path, port: int) -> subprocess.Popen:
    server = subprocess.Popen([str(Path(sys.executable).parent / "milvus-lite"), "server", "--data-dir",
                               str(data_dir), "--host", "127.0.0.1", "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return server
        time.sleep(0.2)
    server.kill()
    raise AssertionError("milvus-lite server did not start")


@pytest.mark.processes
@pytest.mark.timeout(300)
def test_l1_recovers_after_a_milvus_server_restart_without_reopening(tmp_path):
    port = _free_port()
    data = tmp_path / "milvus.db"
    server = _start_milvus(data, port)
    kb = open_knowledge_base(make_settings(tmp_path, fulltext="milvus", backend_timeout=5)
                             .model_copy(update={"milvus_uri": f"http://127.0.0.1:{port}"}))
    try:
        kb.documents.upload("payment-errors.md", PAYMENT.encode(), "api")
        assert kb.lookup("渠道在 3 秒内未响应").found
        server.kill()
        server.wait()
        down = kb.lookup("渠道在 3 秒内未响应")
        assert down.trace.l1_error and kb.lookup_knowledge("ERR_TIMEOUT")["found"]  # L0 still answers
        server = _start_milvus(data, port)
        restarted = time.monotonic()
        while not kb.lookup("渠道在 3 秒内未响应").found:
            assert time.monotonic() - restarted < 30, "L1 did not recover after the restart"
            time.sleep(0.5)
        recovered_in = time.monotonic() - restarted
        print(f"L1 answered again {recovered_in:.2f} s after the server accepted connections")
        assert recovered_in < 15  # measured 1.5 s; the margin is for a loaded CI machine
    finally:
        kb.close()
        server.kill()
        server.wait()
