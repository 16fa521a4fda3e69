"""A second process on the embedded default: the process that owns the Milvus Lite directory
serves it to the others on the machine; when it exits or closes, the next one takes over; a stuck owner
gives followers a clear, timely error. Real processes, real Milvus Lite, no model (BM25 only)."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from urllib.parse import urlparse

import pytest
from support.servers import listening_addresses, machine_addresses
from support.stores import NO_MODEL, bare_lite_holder, make_settings

from kb_core.bootstrap import open_knowledge_base, parts_of
from kb_core.errors import KnowledgeBaseError
from kb_core.storage.lite_sharing import info_path, read_server

pytestmark = pytest.mark.processes

# An agent process on the default settings: only KB_APP_ROOT (and a missing model, so nothing loads) in its
# environment. It answers one JSON command per stdin line with one JSON line.
AGENT = textwrap.dedent("""
    import json, os, sys, time
    from kb_core import open_knowledge_base
    from kb_core.bootstrap import parts_of
    from kb_core.errors import KnowledgeBaseError

    kb = None

    def role():
        session = parts_of(kb).vectors._session  # the store itself
        if session is None:
            return {"role": None}
        return {"role": "owner" if session.is_owner else "follower",
                "owner_pid": session.owner.pid if session.owner else os.getpid()}

    def run(cmd):
        global kb
        op = cmd["op"]
        if op == "open":
            kb = open_knowledge_base()
            return {"error": kb.status(0).milvus_error}
        if op == "upload":
            outcome = kb.documents.upload(cmd["name"], cmd["text"].encode(), cmd["category"])
            return {"action": outcome.action, "doc_id": outcome.document.id}
        if op == "lookup":
            return {"answer": json.dumps(kb.lookup(cmd["query"]).to_dict(), ensure_ascii=False)}
        if op == "milvus":  # straight from Milvus, not the shared full-text file
            vectors = parts_of(kb).vectors
            return {"chunks": {str(d): len(vectors.chunks_of(d, with_vectors=True)) for d in cmd["doc_ids"]},
                    "total": vectors.count_chunks()}
        if op == "close":
            kb.close()
            return {}
        raise ValueError(op)

    print(json.dumps({"ready": os.getpid()}), flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        started = time.monotonic()
        try:
            reply = run(cmd)
        except KnowledgeBaseError as exc:
            reply = {"error": str(exc)}
        if kb is not None and cmd["op"] != "close":
            reply.update(role())
        reply["seconds"] = round(time.monotonic() - started, 2)
        print(json.dumps(reply, ensure_ascii=False), flush=True)
""")


class Agent:
    def __init__(self, root: Path, name: str, **env: str):
        self.log = open(root / f"{name}.log", "w")  # noqa: SIM115 - closed in stop()
        environment = {k: v for k, v in os.environ.items() if not k.startswith("KB_")}
        environment.update(KB_APP_ROOT=str(root), KB_EMBEDDING_MODEL=NO_MODEL, KB_EMBEDDING_FALLBACK="none", **env)
        self.process = subprocess.Popen([sys.executable, "-c", AGENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self.log, text=True, env=environment)
        self.pid = self.process.pid

    def send(self, op: str, **args) -> None:
        self.process.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self.process.stdin.flush()

    def reply(self) -> dict:
        line = self.process.stdout.readline()
        assert line, f"agent {self.pid} died: {Path(self.log.name).read_text()[-3000:]}"
        return json.loads(line)

    def call(self, op: str, **args) -> dict:
        self.send(op, **args)
        return self.reply()

    def started(self) -> Agent:
        assert "ready" in self.reply()
        return self

    def logged(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_text()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.log.close()


def _doc(title: str, keyword: str, body: str) -> str:
    return (f"---\ntitle: {title}\nkeywords: [{keyword}, CLI]\nsummary: {title} for operators\n---\n"
            f"<!-- Licensed under the Apache License 2.0; see LICENSE. -->\n# {title}\n\n{body}\n")


GATEWAY = _doc("Gateway retries", "GW_RETRY_BUDGET",
               "The gateway retries an idempotent request at most three times with jittered backoff.\n"
               "网关对幂等请求最多重试三次，并使用带抖动的退避。")
LEDGER = _doc("Ledger snapshots", "LEDGER_SNAPSHOT",
              "A ledger snapshot is written every night and kept for ninety days in cold storage.\n"
              "账本快照每晚写入一次，在冷存储中保留九十天。")
QUOTA = _doc("Quota alarms", "QUOTA_ALARM",
             "A quota alarm fires when a tenant uses more than eighty percent of its monthly allowance.\n"
             "租户用量超过月度额度的百分之八十时触发配额告警。")


@pytest.fixture
def agents(tmp_path):
    started: list[Agent] = []

    def _start(name: str, **env: str) -> Agent:
        agent = Agent(tmp_path, name, **env)
        started.append(agent)
        return agent

    yield _start
    for agent in started:
        if agent.process.poll() is None:
            os.kill(agent.pid, signal.SIGCONT)  # a test that stopped it may have failed before resuming it
        agent.stop()


@pytest.mark.timeout(120)
def test_a_second_process_on_the_default_settings_shares_the_directory(tmp_path, agents):
    (tmp_path / "knowledge_base").mkdir()
    kb = open_knowledge_base(make_settings(tmp_path))  # this process opens first: the owner
    try:
        assert parts_of(kb).vectors._session.is_owner
        assert read_server(parts_of(kb).vectors._session.directory).pid == os.getpid()
        agent = agents("agent").started()
        opened = agent.call("open")
        assert opened["error"] is None and opened["role"] == "follower" and opened["owner_pid"] == os.getpid()

        mine = kb.documents.upload("ledger-snapshots.md", LEDGER.encode(), "ops").document
        theirs = agent.call("upload", name="gateway-retries.md", text=GATEWAY, category="api")
        assert theirs["action"] == "indexed", theirs

        # Each sees the other's chunks through L1 (BM25 in the shared full-text file) and in Milvus itself.
        answer = agent.call("lookup", query="冷存储保留多久")["answer"]
        assert "ledger-snapshots.md" in answer
        assert "gateway-retries.md" in json.dumps(kb.lookup("幂等请求的重试次数").to_dict(), ensure_ascii=False)
        seen = agent.call("milvus", doc_ids=[mine.id, theirs["doc_id"]])
        assert seen["total"] == parts_of(kb).vectors.count_chunks() > 0
        assert all(n > 0 for n in seen["chunks"].values())
        theirs_now = parts_of(kb).vectors.chunks_of(theirs["doc_id"], with_vectors=True)
        assert len(theirs_now) == seen["chunks"][str(theirs["doc_id"])]
    finally:
        kb.close()
    assert not info_path(tmp_path / "kb_milvus.db").exists()  # close() stopped serving

    # The owner closed: the follower's next call takes over, and keeps working as the owner.
    after = agent.call("upload", name="quota-alarms.md", text=QUOTA, category="ops")
    assert after["action"] == "indexed" and after["role"] == "owner", after
    assert after["seconds"] < 5
    assert "quota-alarms.md" in agent.call("lookup", query="租户配额告警何时触发")["answer"]


@pytest.mark.timeout(120)
def test_the_owner_exits_a_follower_takes_over_and_close_frees_the_directory(tmp_path, agents):
    (tmp_path / "knowledge_base").mkdir()
    owner, follower = agents("owner").started(), agents("follower").started()
    assert owner.call("open")["role"] == "owner"
    assert follower.call("open")["role"] == "follower"
    first = owner.call("upload", name="gateway-retries.md", text=GATEWAY, category="api")

    owner.process.stdin.close()  # a plain exit: no close(); the lock goes with the process
    owner.process.wait(30)
    took_over = follower.call("upload", name="ledger-snapshots.md", text=LEDGER, category="ops")
    assert took_over["action"] == "indexed" and took_over["role"] == "owner", took_over
    assert took_over["seconds"] < 8
    seen = follower.call("milvus", doc_ids=[first["doc_id"], took_over["doc_id"]])
    assert all(n > 0 for n in seen["chunks"].values()), seen
    assert "has gone" in follower.logged() and "Traceback" not in follower.logged()  # one line, no alarm

    assert follower.call("close") is not None  # the process lives on, the directory is free
    kb = open_knowledge_base(make_settings(tmp_path))
    try:
        assert parts_of(kb).vectors._session.is_owner
        assert kb.lookup_knowledge("LEDGER_SNAPSHOT")["primary"]["confidence"] == "high"
        assert parts_of(kb).vectors.count_chunks() == seen["total"]
    finally:
        kb.close()


@pytest.mark.timeout(120)
def test_three_processes_opening_a_fresh_directory_at_once_agree_on_one_owner(tmp_path, agents):
    (tmp_path / "knowledge_base").mkdir()
    three = [agents(f"agent{i}").started() for i in range(3)]
    for agent in three:  # all three start opening before any has finished
        agent.send("open")
    opened = [agent.reply() for agent in three]
    assert all(o["error"] is None for o in opened), opened
    assert sorted(o["role"] for o in opened) == ["follower", "follower", "owner"]
    assert len({o["owner_pid"] for o in opened}) == 1

    for agent, (name, text) in zip(three, [("a.md", GATEWAY), ("b.md", LEDGER), ("c.md", QUOTA)], strict=True):
        agent.send("upload", name=name, text=text, category="ops")
    uploads = [agent.reply() for agent in three]
    assert [u.get("action") for u in uploads] == ["indexed"] * 3, uploads
    ids = [u["doc_id"] for u in uploads]
    totals = {agent.call("milvus", doc_ids=ids)["total"] for agent in three}
    assert len(totals) == 1 and totals.pop() >= 3


@pytest.mark.timeout(120)
def test_a_stopped_owner_gives_followers_a_timely_error_naming_it(tmp_path, agents):
    (tmp_path / "knowledge_base").mkdir()
    owner = agents("owner", KB_BACKEND_TIMEOUT="2").started()
    follower = agents("follower", KB_BACKEND_TIMEOUT="2").started()
    late = agents("late", KB_BACKEND_TIMEOUT="2").started()
    assert owner.call("open")["role"] == "owner"
    assert follower.call("open")["role"] == "follower"
    address = read_server(tmp_path / "kb_milvus.db").address

    os.kill(owner.pid, signal.SIGSTOP)
    try:
        stuck = follower.call("upload", name="gateway-retries.md", text=GATEWAY, category="api")
        assert f"served by process {owner.pid} at {address}" in stuck.get("error", ""), stuck
        assert "did not answer within 2 s" in stuck["error"], stuck
        assert stuck["seconds"] < 2 * 2 + 2, stuck  # the write and its undo each wait the backend timeout
        # L0 and the shared full-text file still answer meanwhile.
        assert "answer" in follower.call("lookup", query="重试")
        # A process opening now opens degraded (each Milvus step waits the timeout once) and says why.
        opened = late.call("open")
        assert f"served by process {owner.pid}" in opened["error"] and opened["seconds"] < 30, opened
    finally:
        os.kill(owner.pid, signal.SIGCONT)
    resumed = follower.call("upload", name="gateway-retries.md", text=GATEWAY, category="api")
    assert resumed.get("action") in ("indexed", "replaced"), resumed
    assert "Traceback" not in follower.logged() + late.logged()


def test_a_directory_held_by_a_process_that_does_not_share_it_fails_fast_with_the_fix(tmp_path):
    from kb_core.storage.vector_store import MilvusVectorStore

    with bare_lite_holder(tmp_path / "kb_milvus.db"):
        store = MilvusVectorStore(str(tmp_path / "kb_milvus.db"), collection="kb_fulltext", dense_dim=None)
        started = time.monotonic()
        with pytest.raises(KnowledgeBaseError, match="does not share it.*milvus-lite server.*KB_MILVUS_URI"):
            store.client()
        assert time.monotonic() - started < 2  # nothing published: nobody to wait for


def test_the_shared_server_listens_on_loopback_only_and_its_port_file_is_private(tmp_path):
    """Other machines cannot reach the owner's Milvus Lite server, and other users cannot read which
    port it is on (the port itself asks for no password: docs/security.md)."""
    (tmp_path / "knowledge_base").mkdir()
    umask = os.umask(0)  # the most permissive umask: the file's mode must not depend on it
    try:
        kb = open_knowledge_base(make_settings(tmp_path))
    finally:
        os.umask(umask)
    try:
        published = info_path(tmp_path / "kb_milvus.db")
        assert stat.S_IMODE(published.stat().st_mode) == 0o600
        address = urlparse(read_server(tmp_path / "kb_milvus.db").address)
        assert address.hostname == "127.0.0.1"
        listening = listening_addresses(address.port)
        assert listening and all(ip.is_loopback for ip in listening), listening
        for ip in machine_addresses():  # what another machine would connect to
            with pytest.raises(OSError):
                socket.create_connection((ip, address.port), timeout=2).close()
        assert parts_of(kb).vectors.count_chunks() == 0  # and it serves this process as before
    finally:
        kb.close()


@pytest.mark.timeout(120)
def test_an_owner_closing_during_a_followers_write_costs_the_follower_nothing(tmp_path, agents):
    """The owner's last store releases the directory while a follower's write is on its way to the old port:
    the follower opens the directory again (as its new owner here) and writes once more."""
    (tmp_path / "knowledge_base").mkdir()
    owner = agents("owner").started()
    assert owner.call("open")["role"] == "owner"
    kb = open_knowledge_base(make_settings(tmp_path))
    try:
        vectors = parts_of(kb).vectors
        kb.documents.upload("gateway-retries.md", GATEWAY.encode(), "api")  # connects this process as a follower
        assert not vectors._session.is_owner
        client = vectors.client()
        real_upsert = client.upsert
        closed = []

        def owner_closes_first(*args, **kwargs):
            if not closed:  # the call has left the follower's checks; now the owner lets go of the directory
                closed.append(owner.call("close"))
            return real_upsert(*args, **kwargs)

        client.upsert = owner_closes_first
        outcome = kb.documents.upload("ledger-snapshots.md", LEDGER.encode(), "ops")
        assert closed and outcome.action == "indexed"
        assert vectors._session.is_owner  # it opened the directory again and took it over
        assert len(vectors.chunks_of(outcome.document.id, with_vectors=True)) > 0
        assert kb.lookup_knowledge("LEDGER_SNAPSHOT")["primary"]["confidence"] == "high"
    finally:
        kb.close()
