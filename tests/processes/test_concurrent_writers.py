"""Two processes writing the same path at the same moment: they take turns through a lock
held in the database, the last writer wins, and no file is ever lost."""

from __future__ import annotations

import hashlib
import json
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from support.stores import assert_consistent, make_settings

from kb_core.bootstrap import open_knowledge_base

pytestmark = pytest.mark.processes

WRITER = textwrap.dedent("""
    import json, sys, time
    from kb_core import load_settings, open_knowledge_base
    config = json.loads(sys.argv[1])
    kb = open_knowledge_base(load_settings(**config["settings"]))
    while time.time() < config["start_at"]:
        time.sleep(0.001)
    outcomes = []
    for i in range(config["rounds"]):
        head = "---\\ntitle: Shared\\nkeywords: [SHARED_KEY]\\n---\\n# Shared\\n\\n"
        body = head + f"writer {config['name']} round {i}\\n"
        outcome = kb.documents.upload("shared.md", body.encode(), "api")
        outcomes.append(outcome.action)
    kb.close()
    print(json.dumps(outcomes))
""")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.timeout(300)
def test_concurrent_same_path_uploads_from_two_processes_lose_nothing(tmp_path, db_url):
    port = _free_port()
    server = subprocess.Popen([str(Path(sys.executable).parent / "milvus-lite"), "server", "--data-dir",
                               str(tmp_path / "milvus.db"), "--host", "127.0.0.1", "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
            assert time.monotonic() < deadline, "milvus-lite server did not start"
            time.sleep(0.2)
        settings = {"app_root": str(tmp_path), "database_url": db_url, "milvus_uri": f"http://127.0.0.1:{port}",
                    "embedding_model": "no-such-org/no-such-model", "refresh_interval": 0.2}
        start_at = time.time() + 8  # both processes are open and waiting by then
        writers = [subprocess.Popen([sys.executable, "-c", WRITER, json.dumps(
            {"settings": settings, "start_at": start_at, "rounds": 20, "name": name})],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for name in ("a", "b")]
        results = [w.communicate(timeout=240) for w in writers]
        for writer, (out, err) in zip(writers, results, strict=True):
            assert writer.returncode == 0, err[-3000:]
            assert json.loads(out.strip().splitlines()[-1]).count("unchanged") == 0
        kb = open_knowledge_base(make_settings(tmp_path, db_url=db_url).model_copy(
            update={"milvus_uri": f"http://127.0.0.1:{port}"}))
        try:
            target = tmp_path / "knowledge_base/api/shared.md"
            assert target.is_file(), "the file was lost"
            [row] = kb.documents.list()
            assert row.content_sha256 == hashlib.sha256(target.read_bytes()).hexdigest()
            assert_consistent(kb)
            assert kb.lookup_knowledge("SHARED_KEY")["primary"]["confidence"] == "high"
        finally:
            kb.close()
    finally:
        server.kill()
        server.wait()
