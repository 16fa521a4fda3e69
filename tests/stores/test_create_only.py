"""`upload(..., create_only=True)`: an upload that may only create. A file of that name that
appeared meanwhile - written by another process, or dropped on disk - makes it a conflict instead of being
replaced, checked under the document's lock: of two processes creating one new name, exactly one wins."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from support.console import finish_jobs, run_page, shown
from support.documents import doc
from support.stores import assert_consistent, make_settings

from kb_core.errors import DocumentConflictError, KnowledgeBaseError, UploadRejected

ROUTE = doc("Route", ["ROUTE_KEY", "APISIX"], "Match requests and send them upstream.", "# Route\n\nmatch.\n")
THEIRS = ROUTE.replace("match.", "their route.")


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture
def kb(open_kb, db_url):
    return open_kb(db_url=db_url)


def test_a_new_name_is_created(kb, tmp_path):
    outcome = kb.documents.upload("route.md", ROUTE.encode(), "gateway", create_only=True)
    assert outcome.action == "indexed"
    assert (tmp_path / "knowledge_base/gateway/route.md").read_text(encoding="utf-8") == ROUTE
    assert_consistent(kb)


def test_an_existing_document_is_a_conflict_and_nothing_is_written(kb, tmp_path):
    kb.documents.upload("route.md", THEIRS.encode(), "gateway")
    with pytest.raises(DocumentConflictError) as caught:
        kb.documents.upload("route.md", ROUTE.encode(), "gateway", create_only=True)
    error = caught.value
    assert (error.path, error.expected, error.current) == ("knowledge_base/gateway/route.md", None, _sha(THEIRS))
    assert "already exists" in str(error) and "nothing was written" in str(error) and _sha(THEIRS)[:12] in str(error)
    assert (tmp_path / "knowledge_base/gateway/route.md").read_text(encoding="utf-8") == THEIRS
    [row] = kb.documents.list()
    assert row.content_sha256 == _sha(THEIRS)
    with pytest.raises(DocumentConflictError):  # the very same bytes: still not a new document
        kb.documents.upload("route.md", THEIRS.encode(), "gateway", create_only=True)
    assert_consistent(kb)


def test_a_file_dropped_on_disk_but_not_indexed_is_a_conflict(kb, tmp_path):
    target = tmp_path / "knowledge_base/gateway/route.md"
    target.parent.mkdir(parents=True)
    target.write_text(THEIRS, encoding="utf-8")
    with pytest.raises(DocumentConflictError) as caught:
        kb.documents.upload("route.md", ROUTE.encode(), "gateway", create_only=True)
    assert caught.value.current == _sha(THEIRS)
    assert target.read_text(encoding="utf-8") == THEIRS and kb.documents.list() == []


def test_a_file_that_appears_while_the_upload_is_prepared_is_a_conflict(kb, tmp_path, monkeypatch):
    """The check runs again under the document's lock: the early one passed, then the file came."""
    from kb_core.bootstrap import parts_of

    service = parts_of(kb).documents
    prepare = service.prepare
    target = tmp_path / "knowledge_base/gateway/route.md"

    def prepare_while_someone_writes(*args, **kwargs):
        prepared = prepare(*args, **kwargs)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(THEIRS, encoding="utf-8")  # dropped on disk between the early check and the write
        return prepared

    monkeypatch.setattr(service, "prepare", prepare_while_someone_writes)
    with pytest.raises(DocumentConflictError):
        kb.documents.upload("route.md", ROUTE.encode(), "gateway", create_only=True)
    assert target.read_text(encoding="utf-8") == THEIRS and kb.documents.list() == []


def test_create_only_and_if_match_together_are_bad_input(kb):
    with pytest.raises(UploadRejected, match="exclude each other"):
        kb.documents.upload("route.md", ROUTE.encode(), "gateway", create_only=True, if_match=_sha(ROUTE))
    assert kb.documents.list() == []


def test_two_knowledge_bases_creating_one_name_exactly_one_wins(open_kb, db_url, tmp_path):
    """Two KnowledgeBase objects on one database and folder, each with its own in-process lock (as two processes
    would have): only the database's document lock and the check under it stop the second from replacing."""
    first, second = open_kb(db_url=db_url), open_kb(db_url=db_url)
    bodies = {"first": ROUTE.replace("match.", "by the first."), "second": ROUTE.replace("match.", "by the second.")}
    outcomes: dict[str, object] = {}
    start = threading.Barrier(2)

    def create(name, kb):
        start.wait()
        try:
            outcomes[name] = kb.documents.upload("route.md", bodies[name].encode(), "gateway", create_only=True).action
        except KnowledgeBaseError as exc:
            outcomes[name] = exc

    threads = [threading.Thread(target=create, args=item) for item in (("first", first), ("second", second))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    winners = [name for name, result in outcomes.items() if result == "indexed"]
    losers = [result for result in outcomes.values() if isinstance(result, DocumentConflictError)]
    assert len(winners) == 1 and len(losers) == 1, outcomes
    assert (tmp_path / "knowledge_base/gateway/route.md").read_text(encoding="utf-8") == bodies[winners[0]]
    assert losers[0].current == _sha(bodies[winners[0]])
    assert_consistent({"first": first, "second": second}[winners[0]])


CREATOR = textwrap.dedent("""
    import json, sys, time
    from kb_core import load_settings, open_knowledge_base
    from kb_core.errors import DocumentConflictError
    config = json.loads(sys.argv[1])
    kb = open_knowledge_base(load_settings(**config["settings"]))
    print("ready", flush=True)
    while time.time() < config["start_at"]:
        time.sleep(0.001)
    outcomes = {}
    for i in range(config["names"]):
        body = f"---\\ntitle: New {i}\\nkeywords: [NEW_KEY_{i}]\\n---\\n# New {i}\\n\\nwritten by {config['name']}\\n"
        try:
            outcomes[f"new-{i}.md"] = kb.documents.upload(f"new-{i}.md", body.encode(), "api", create_only=True).action
        except DocumentConflictError as exc:
            outcomes[f"new-{i}.md"] = "conflict" if exc.expected is None and exc.current else repr(exc)
    kb.close()
    print(json.dumps(outcomes))
""")


@pytest.mark.processes
@pytest.mark.timeout(300)
def test_two_processes_creating_the_same_new_names_exactly_one_wins_each(tmp_path, db_url):
    """On SQLite with a shared Milvus Lite directory (the embedded default) and on MariaDB + a Milvus server."""
    from support.servers import free_port as _free_port

    settings = {"app_root": str(tmp_path), "database_url": db_url, "embedding_model": "no-such-org/no-such-model",
                "refresh_interval": 0.2}
    server = None
    if not db_url.startswith("sqlite"):
        port = _free_port()
        server = subprocess.Popen([str(Path(sys.executable).parent / "milvus-lite"), "server", "--data-dir",
                                   str(tmp_path / "milvus.db"), "--host", "127.0.0.1", "--port", str(port)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        settings["milvus_uri"] = f"http://127.0.0.1:{port}"
    (tmp_path / "knowledge_base").mkdir()
    try:
        if server is not None:
            _wait_for_port(port)
        start_at = time.time() + 10  # both processes are open and waiting by then
        creators = [subprocess.Popen([sys.executable, "-c", CREATOR, json.dumps(
            {"settings": settings, "start_at": start_at, "names": 10, "name": name})],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for name in ("a", "b")]
        results = [c.communicate(timeout=240) for c in creators]
        outcomes = {}
        for creator, (out, err), name in zip(creators, results, ("a", "b"), strict=True):
            assert creator.returncode == 0, err[-3000:]
            assert out.startswith("ready"), out
            outcomes[name] = json.loads(out.strip().splitlines()[-1])
        for i in range(10):
            got = sorted(outcomes[name][f"new-{i}.md"] for name in ("a", "b"))
            assert got == ["conflict", "indexed"], (i, outcomes)
        from kb_core.bootstrap import open_knowledge_base

        kb = open_knowledge_base(make_settings(tmp_path, db_url=db_url).model_copy(
            update={"milvus_uri": settings.get("milvus_uri", str(tmp_path / "kb_milvus.db"))}))
        try:
            for i in range(10):
                winner = next(name for name in ("a", "b") if outcomes[name][f"new-{i}.md"] == "indexed")
                text = (tmp_path / f"knowledge_base/api/new-{i}.md").read_text(encoding="utf-8")
                assert text.endswith(f"written by {winner}\n"), (i, winner, text)
            assert len(kb.documents.list()) == 10
            assert_consistent(kb)
        finally:
            kb.close()
    finally:
        if server is not None:
            server.kill()
            server.wait()


def _wait_for_port(port: int) -> None:
    import socket

    deadline = time.monotonic() + 60
    while True:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        assert time.monotonic() < deadline, "milvus-lite server did not start"
        time.sleep(0.2)


def test_the_upload_page_sends_new_files_as_create_only(synced_sample, monkeypatch):
    """Files the preview showed as new, created by another process or dropped on disk after the click's own
    preview (while the batch uploads): conflicts, and what is there is kept; the rest of the batch goes on."""
    from support.console import stores
    from support.console import upload_button as _upload_button
    from support.console import upload_files as _files

    from kb_core.services.documents import Documents

    target = synced_sample / "knowledge_base/troubleshooting/retries.md"
    dropped = synced_sample / "knowledge_base/troubleshooting/backoff.md"
    mine = doc("Retries (mine)", ["RETRY_BUDGET"], "My retries.")
    theirs = doc("Retries (colleague)", ["RETRY_BUDGET", "Backoff"], "Their retries.")
    by_hand = "---\ntitle: Backoff (by hand)\n---\n# by hand\n"
    upload = Documents.upload
    sent: list[tuple[str, object, bool]] = []

    def upload_while_others_create(self, file_name, data, category, **kwargs):
        if not sent:  # the batch's first upload starts: meanwhile, another process and someone with a shell
            sent.append(("(colleague)", None, None))
            with stores() as colleague:
                upload(colleague.documents, "retries.md", theirs.encode(), "troubleshooting")
            dropped.write_text(by_hand, encoding="utf-8")
        sent.append((file_name, kwargs.get("if_match"), kwargs.get("create_only")))
        return upload(self, file_name, data, category, **kwargs)

    at = run_page("upload")
    at.selectbox(key="category").set_value("troubleshooting")
    at.file_uploader(key="files").set_value(_files(("retries.md", mine), ("backoff.md", doc("Backoff", ["BACKOFF"])),
                                                   ("jitter.md", doc("Jitter", ["JITTER"])))).run()
    assert _upload_button(at).label == "Upload 3 file(s)"  # all three shown as new
    monkeypatch.setattr(Documents, "upload", upload_while_others_create)
    _upload_button(at).click().run()
    assert not at.exception, at.exception
    finish_jobs(at)
    assert sent[1:] == [(name, None, True) for name in ("retries.md", "backoff.md", "jitter.md")]
    rows = {r["file"]: r["result"] for r in at.dataframe[0].value.to_dict("records")}
    assert rows == {"retries.md": "conflict", "backoff.md": "conflict", "jitter.md": "indexed"}
    assert any("retries.md already exists" in shown(e.value) for e in at.error)
    assert target.read_text(encoding="utf-8") == theirs
    assert dropped.read_text(encoding="utf-8") == by_hand
