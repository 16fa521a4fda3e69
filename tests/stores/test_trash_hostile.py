"""The trash under hostile or careless ids: an id is looked up among the trash's items, never resolved
as a path, so `"."`, `".."`, `""`, separators, 10,000-character ids and ids of purged items are refused with one
of kb_core's errors and every item stays. `restore(replace=True)` keeps the version it replaces in the trash,
and a kill -9 at each step around that swap loses no version."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.documents import doc
from support.stores import assert_consistent

from kb_core import KnowledgeBaseError
from kb_core.bootstrap import parts_of
from kb_core.errors import InvalidInputError

CATEGORY = "ops/runbooks"
HOSTILE_IDS = [".", "..", "", " ", "/", "//", "./", "../", "./.", "a/..", "\\", "..\\..", "\x00", ".purging-x",
               "x" * 10_000, "." * 300, "/" + "a" * 5000, "kb_trash", "*", "~"]


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def kb_with_trash(open_kb, tmp_path):
    """Four documents in the trash, one purged (its id kept), and one live document."""
    kb = open_kb()
    items = []
    for i in range(5):
        record = kb.documents.upload(f"page-{i}.md", doc(f"Page {i}", [f"TRASH_PAGE_{i}"]).encode(), CATEGORY).document
        items.append(kb.documents.delete(record.id).trashed)
    purged = items.pop()
    kb.trash.purge(items=[purged.item_id])
    kb.documents.upload("live.md", doc("Live", ["LIVE_PAGE"]).encode(), CATEGORY)
    return kb, items, purged


def _state(kb, tmp_path):
    """What the trash and the knowledge base hold, byte for byte."""
    trash = parts_of(kb).trash.directory
    files = sorted((p.relative_to(tmp_path).as_posix(), p.read_bytes())
                   for folder in (trash, tmp_path / "knowledge_base") for p in folder.rglob("*") if p.is_file())
    return sorted(item.item_id for item in kb.trash.items()), files


@pytest.mark.parametrize("operation", ["restore", "restore-replace", "purge"])
def test_a_hostile_or_gone_trash_id_is_refused_and_the_trash_keeps_its_items(kb_with_trash, tmp_path, operation):
    kb, items, purged = kb_with_trash
    before = _state(kb, tmp_path)
    assert len(before[0]) == 4
    for item_id in [*HOSTILE_IDS, purged.item_id, purged.item_id + "/", items[0].item_id + "/.."]:
        with pytest.raises(InvalidInputError, match="is not in the trash") as refused:
            if operation == "purge":
                kb.trash.purge(items=[item_id])
            else:
                kb.trash.restore(item_id, replace=operation == "restore-replace")
        assert isinstance(refused.value, KnowledgeBaseError)
        assert len(str(refused.value)) < 400, "a 10,000-character id is not echoed whole"
        assert _state(kb, tmp_path) == before, f"{item_id[:20]!r} changed the trash or the knowledge base"
    assert_consistent(kb)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(item_id=st.one_of(
    st.text(alphabet=st.sampled_from("./\\\x00 a-_~*"), max_size=12),
    st.text(max_size=40),
    st.builds(lambda n, c: c * n, st.integers(200, 10_000), st.sampled_from(["a", ".", "/", "é"]))))
def test_no_id_but_an_items_own_reaches_the_trash(kb_with_trash, tmp_path, item_id):
    kb, items, _purged = kb_with_trash
    trash = parts_of(kb).trash
    if item_id in {item.item_id for item in items}:
        return
    assert trash.get(item_id) is None
    before = _state(kb, tmp_path)
    for call in (lambda: kb.trash.purge(items=[item_id]), lambda: kb.trash.restore(item_id),
                 lambda: kb.trash.restore(item_id, replace=True)):
        try:
            call()
        except KnowledgeBaseError:
            pass
    assert _state(kb, tmp_path) == before


def test_the_items_own_ids_still_work(kb_with_trash, tmp_path):
    kb, items, _purged = kb_with_trash
    assert kb.trash.restore(items[0].item_id).action == "indexed"
    assert kb.trash.purge(items=[items[1].item_id]) == [items[1]]
    assert sorted(i.item_id for i in kb.trash.items()) == sorted(i.item_id for i in items[2:])
    assert_consistent(kb)


def test_restore_with_replace_keeps_the_replaced_version_in_the_trash(open_kb, tmp_path):
    kb = open_kb()
    old = doc("Runbook", ["RUNBOOK_OLD"]).encode()
    new = doc("Runbook v2", ["RUNBOOK_NEW"]).encode()
    item = kb.documents.delete(kb.documents.upload("runbook.md", old, CATEGORY).document.id).trashed
    kb.documents.upload("runbook.md", new, CATEGORY)

    assert kb.trash.restore(item.item_id, replace=True).action == "replaced"
    path = tmp_path / "knowledge_base" / CATEGORY / "runbook.md"
    assert path.read_bytes() == old
    [kept] = kb.trash.items()
    assert kept.sha256 == _sha(new) and kept.problem is None
    assert (parts_of(kb).trash.directory / kept.item_id / kept.relative_path).read_bytes() == new
    # and it comes back the same way, the restored one going to the trash in turn
    assert kb.trash.restore(kept.item_id, replace=True).action == "replaced"
    assert path.read_bytes() == new and [i.sha256 for i in kb.trash.items()] == [_sha(old)]
    assert_consistent(kb)


_CHILD = textwrap.dedent("""
    import json, os, signal, sys
    from pathlib import Path
    from kb_core.bootstrap import open_knowledge_base, parts_of
    from kb_core.settings import load_settings
    from kb_core.documents import service, trash

    root, point = Path(sys.argv[1]), sys.argv[2]
    kb = open_knowledge_base(load_settings(app_root=root, database_url=f"sqlite:///{root / 'kb.sqlite3'}",
                                           milvus_uri=str(root / "kb_milvus.db"),
                                           embedding_model="no-such-org/no-such-model"))
    old, new = (root / "old.md").read_bytes(), (root / "new.md").read_bytes()
    item = kb.documents.delete(kb.documents.upload("runbook.md", old, "ops").document.id).trashed
    kb.documents.upload("runbook.md", new, "ops")

    def kill(where):
        print("SIGKILL at", where, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)

    def around(owner, name, when):
        real = getattr(owner, name)
        def wrapper(*args, **kwargs):
            if when == "before":
                kill(f"{name}:before")
            result = real(*args, **kwargs)
            if when == "after":
                kill(f"{name}:after")
            return result
        setattr(owner, name, wrapper)

    step, when = point.split(":")
    if step == "keep_copy":
        around(trash.Trash, "keep_copy", when)
    elif step == "replace":  # the upload's write of the restored bytes over the kept version
        real_replace = os.replace
        target = parts_of(kb).folder.base_dir / "ops" / "runbook.md"
        def replace(src, dst, *a, **k):
            if Path(dst) == target and when == "before":
                kill("replace:before")
            real_replace(src, dst, *a, **k)
            if Path(dst) == target and when == "after":
                kill("replace:after")
        os.replace = replace
    elif step == "remove":
        around(trash.Trash, "remove", when)
    kb.trash.restore(item.item_id, replace=True)
    print("NOT REACHED", flush=True)
    sys.exit(3)
""")


@pytest.mark.slow
@pytest.mark.processes
@pytest.mark.parametrize("point", ["keep_copy:before", "keep_copy:after", "replace:before", "replace:after",
                                   "remove:before", "remove:after"])
def test_a_kill_around_the_replace_of_a_restore_loses_no_version(open_kb, tmp_path, point):
    old = doc("Runbook", ["RUNBOOK_OLD"], body="# Old\n" + "old words " * 200).encode()
    new = doc("Runbook v2", ["RUNBOOK_NEW"], body="# New\n" + "new words " * 200).encode()
    (tmp_path / "old.md").write_bytes(old)
    (tmp_path / "new.md").write_bytes(new)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "KB_LOG_FILE": "off"}
    done = subprocess.run([sys.executable, "-c", _CHILD, str(tmp_path), point], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == -9, f"not killed at {point}: {done.returncode}\n{done.stdout}\n{done.stderr[-3000:]}"
    assert f"SIGKILL at {point}" in done.stdout

    kb = open_kb()  # reopening finishes what the kill interrupted (the upload's undo journal, reconcile)
    path = tmp_path / "knowledge_base" / "ops" / "runbook.md"
    trash = parts_of(kb).trash.directory
    versions = [path.read_bytes()] if path.exists() else []
    versions += [(trash / i.item_id / i.relative_path).read_bytes() for i in kb.trash.items()]
    assert old in versions and new in versions, f"a version was lost at {point}: {[_sha(v)[:8] for v in versions]}"
    assert path.read_bytes() in (old, new)
    kb.documents.reconcile()
    assert_consistent(kb)
    current = "RUNBOOK_OLD" if path.read_bytes() == old else "RUNBOOK_NEW"
    assert kb.lookup_knowledge(current)["primary"]["source"] == "knowledge_base/ops/runbook.md"
