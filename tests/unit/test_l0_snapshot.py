"""L0 opens from a saved snapshot: only files whose size or modification time changed are parsed
again; a missing, stale, corrupt or foreign snapshot falls back to a full scan and is rewritten — the index
opened from it always equals a fresh scan."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.documents import doc, write_doc
from support.l0_snapshot import open_index as _open
from support.l0_snapshot import parses as _parses
from support.l0_snapshot import view as _view

from kb_core.keywords import snapshot_file
from kb_core.keywords.index import KnowledgeIndex

NAMES = [f"knowledge_base/{c}/{n}.md" for c in ("api", "ops") for n in ("a", "b", "c")]


def test_an_unchanged_folder_opens_without_parsing_and_a_changed_file_is_parsed_again(tmp_path, monkeypatch):
    for i, name in enumerate(NAMES):
        write_doc(tmp_path, name, doc(f"T{i}", [f"key-{i}"]))
    write_doc(tmp_path, "knowledge_base/api/plain.md", "no frontmatter here\n")
    first = _open(tmp_path)
    assert first.save_snapshot() and (tmp_path / "l0.snap").is_file()
    parsed = _parses(monkeypatch)
    again = _open(tmp_path)
    assert parsed == [] and _view(again) == _view(first)  # nothing parsed, the same index
    path = tmp_path / NAMES[0]
    path.write_text(doc("T0 changed", ["key-0-new"]), encoding="utf-8")
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1_000_000))
    (tmp_path / NAMES[1]).unlink()
    write_doc(tmp_path, "knowledge_base/ops/new.md", doc("New", ["brand-new"]))
    reopened = _open(tmp_path)
    assert sorted(parsed) == ["api/a.md", "ops/new.md"]
    assert _view(reopened) == _view(_open(tmp_path, snapshot=False))


def test_a_corrupt_foreign_or_missing_snapshot_falls_back_to_a_full_scan(tmp_path, monkeypatch):
    for i, name in enumerate(NAMES):
        write_doc(tmp_path, name, doc(f"T{i}", [f"key-{i}"]))
    fresh = _view(_open(tmp_path, snapshot=False))
    snap = tmp_path / "l0.snap"
    for damage in (b"", b"garbage", snapshot_file.MAGIC + b"\0" * 40):
        snap.write_bytes(damage)
        assert _view(_open(tmp_path)) == fresh
    index = _open(tmp_path)
    index.save_snapshot()
    data = bytearray(snap.read_bytes())
    data[-5] ^= 0xFF  # one flipped byte in the payload: the digest no longer matches
    snap.write_bytes(bytes(data))
    parsed = _parses(monkeypatch)
    assert _view(_open(tmp_path)) == fresh and len(parsed) == len(NAMES)
    # a snapshot of another folder is not used either
    other = tmp_path / "other"
    for i, name in enumerate(NAMES):
        write_doc(other, name, doc(f"Other {i}", [f"other-{i}"]))
    snapshot_file.save(snap, (tmp_path / "knowledge_base").resolve(), {})  # valid, but empty
    assert snapshot_file.load(snap, other / "knowledge_base") is None


def test_the_snapshot_is_written_after_changes_and_at_close(tmp_path):
    write_doc(tmp_path, NAMES[0], doc("T0", ["key-0"]))
    index = _open(tmp_path)
    index.close()  # written at close
    assert snapshot_file.load(tmp_path / "l0.snap", index.folder.base_dir) is not None
    write_doc(tmp_path, NAMES[1], doc("T1", ["key-1"]))
    index.refresh(NAMES[1])  # a change: the next save records it (refreshed entries are parsed again)
    index.close()
    records = snapshot_file.load(tmp_path / "l0.snap", index.folder.base_dir)
    assert set(records) == {"knowledge_base/api/a.md"}  # by display path


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["create", "edit", "delete", "move", "break"]),
                          st.integers(0, len(NAMES) - 1), st.integers(0, 3)), max_size=12))
def test_after_any_edits_while_no_process_ran_the_snapshot_index_equals_a_fresh_scan(tmp_path_factory, edits):
    root = tmp_path_factory.mktemp("prop")
    for i, name in enumerate(NAMES[:3]):
        write_doc(root, name, doc(f"T{i}", [f"key-{i}"]))
    _open(root).close()
    for action, i, variant in edits:
        path = root / NAMES[i]
        if action == "create" or action == "edit":
            write_doc(root, NAMES[i], doc(f"T{i} v{variant}", [f"key-{i}-{variant}"]))
        elif action == "delete" and path.exists():
            path.unlink()
        elif action == "move" and path.exists():
            target = root / NAMES[(i + 1 + variant) % len(NAMES)]
            target.parent.mkdir(parents=True, exist_ok=True)
            path.rename(target)
        elif action == "break" and path.exists():
            path.write_text("---\ntitle: [unclosed\n---\nbody\n", encoding="utf-8")
        if path.exists():  # same size and a coarse clock must still be told apart: move the time on
            stat = path.stat()
            os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000 * (variant + 1)))
    saved, fresh = _open(root), _open(root, snapshot=False)
    assert _view(saved) == _view(fresh)
    assert _answers(saved) == _answers(fresh)
    reopened = _open(root)  # the first open rewrote the snapshot, with its built index when nothing differed
    assert _view(reopened) == _view(fresh) and _answers(reopened) == _answers(fresh)


def _answers(index: KnowledgeIndex) -> list:
    """What lookups read from L0 for every keyword any version may hold, and a few sentences around them."""
    queries = [f"key-{i}" for i in range(6)] + [f"key-{i}-{v}" for i in range(6) for v in range(4)]
    queries += ["how do I set key-1 and key-2-3", "T1", "nothing here"]
    out = []
    for query in queries:
        ranked = index.match(query)
        out.append((query, len(ranked), [(m.entry.file_path, m.keywords, m.rarest_keyword) for m in ranked],
                    sorted(e.file_path for e in index.exact_match(query)), index.claimants(query)))
    return out


def test_an_unchanged_folder_opens_with_the_saved_search_structures_and_a_changed_rule_rebuilds(tmp_path,
                                                                                             monkeypatch):
    import kb_core.keywords.index as module

    for i, name in enumerate(NAMES):
        write_doc(tmp_path, name, doc(f"T{i}", [f"key-{i}", "Plugin"]))
    _open(tmp_path).close()  # the scan's records; the index built from them is saved with them
    builds = []
    real = module.Snapshot.__init__

    def counting(self, *args, **kwargs):
        builds.append(len(args[0]))
        real(self, *args, **kwargs)

    monkeypatch.setattr(module.Snapshot, "__init__", counting)
    reopened = _open(tmp_path)
    assert [b for b in builds if b] == []  # nothing built: the saved structures are this folder's
    assert _answers(reopened) == _answers(_open(tmp_path, snapshot=False))
    builds.clear()
    other_rule = KnowledgeIndex("knowledge_base", app_root=tmp_path, snapshot_path=tmp_path / "l0.snap",
                                matching="substring")
    other_rule.load()
    assert [b for b in builds if b] == [len(NAMES)]  # saved under another rule: built again


def test_a_file_renamed_onto_another_of_the_same_size_and_time_is_not_taken_for_it(tmp_path):
    write_doc(tmp_path, NAMES[0], doc("Same A", ["key-a"]))
    write_doc(tmp_path, NAMES[1], doc("Same B", ["key-b"]))
    a, b = tmp_path / NAMES[0], tmp_path / NAMES[1]
    os.utime(b, ns=(a.stat().st_atime_ns, a.stat().st_mtime_ns))  # one clock tick for both, same size
    _open(tmp_path).close()
    a.rename(b)  # b now holds A's text, with the size and time b's record has
    assert [e.title for e in _open(tmp_path).entries()] == ["Same A"]


def test_a_snapshot_of_an_older_format_or_another_display_prefix_is_not_used_and_is_rewritten(tmp_path, monkeypatch):
    for i, name in enumerate(NAMES):
        write_doc(tmp_path, name, doc(f"T{i}", [f"key-{i}"]))
    fresh = _view(_open(tmp_path, snapshot=False))
    snap = tmp_path / "l0.snap"
    snap.write_bytes(b"KB-L0-SNAPSHOT 2\n" + b"\0" * 64)  # what the previous release wrote
    parsed = _parses(monkeypatch)
    index = _open(tmp_path)
    assert _view(index) == fresh and len(parsed) == len(NAMES)
    index.close()
    assert snap.read_bytes().startswith(snapshot_file.MAGIC)
    base = index.folder.base_dir
    assert snapshot_file.load(snap, base, "knowledge_base/") is not None
    # the same folder shown under another prefix (KB_BASE_PATH=. from inside it): its entries' paths differ
    assert snapshot_file.load(snap, base, "") is None
    inside = KnowledgeIndex(".", app_root=base, snapshot_path=snap)
    inside.load()
    assert sorted(e.file_path for e in inside.entries()) == sorted(n.removeprefix("knowledge_base/") for n in NAMES)


def test_an_open_after_edits_applies_them_as_a_delta_over_the_saved_index_and_saves_it_whole_again(
        tmp_path, monkeypatch):
    for i, name in enumerate(NAMES):
        write_doc(tmp_path, name, doc(f"T{i}", [f"key-{i}", "shared"]))
    _open(tmp_path).close()
    path = tmp_path / NAMES[0]
    path.write_text(doc("T0 changed", ["key-0-new", "shared"]), encoding="utf-8")
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1_000_000))
    (tmp_path / NAMES[1]).unlink()
    write_doc(tmp_path, "knowledge_base/ops/new.md", doc("New", ["brand-new", "shared"]))
    rebuilds: list[int] = []
    real = KnowledgeIndex._rebuild
    monkeypatch.setattr(KnowledgeIndex, "_rebuild", lambda self, entries: (rebuilds.append(len(entries)),
                                                                           real(self, entries))[1])
    parsed = _parses(monkeypatch)
    index = _open(tmp_path)
    assert sorted(parsed) == ["api/a.md", "ops/new.md"] and rebuilds == []
    assert index.view.delta_size == 3  # replaced, removed, added: no rebuild of every entry at open
    fresh = _open(tmp_path, snapshot=False)
    assert _view(index) == _view(fresh) and _answers(index) == _answers(fresh)
    assert index.save_snapshot()  # written while the delta is pending: the records, not the search structures
    assert snapshot_file.load_with_index(tmp_path / "l0.snap", index.folder.base_dir)[1] is None
    assert index.compact() and index.view.delta_size == 0  # (the background rebuild does this on its own)
    assert index.save_snapshot()  # ... and once it is whole, it is written again, with them
    assert snapshot_file.load_with_index(tmp_path / "l0.snap", index.folder.base_dir)[1] is not None
    index.close()  # the next open neither parses nor builds
    parsed.clear()
    rebuilds.clear()  # (the fresh scan's)
    again = _open(tmp_path)
    assert parsed == [] and rebuilds == [] and again.view.delta_size == 0
    assert _view(again) == _view(fresh) and _answers(again) == _answers(fresh)


def test_the_exact_title_table_comes_with_the_saved_index(tmp_path, monkeypatch):
    """An answer looks the query up among the exact titles; building that table decoded every entry's
    title, a quarter of a fresh `kb lookup` at 10,000 pages. The saved index holds it."""
    from kb_core.keywords.entry import KnowledgeEntry

    for i, name in enumerate(NAMES):
        write_doc(tmp_path, name, doc(f"Rate Limits {i % 2}", [f"key-{i}"]))
    _open(tmp_path).close()
    decoded: list[str] = []
    real = KnowledgeEntry.title.fget

    monkeypatch.setattr(KnowledgeEntry, "title", property(lambda e: decoded.append(e.file_path) or real(e)))
    reopened = _open(tmp_path)
    found = [e.file_path for e in reopened.titled("rate limits 1")]
    assert decoded == []  # the table was read, no entry's title decoded
    monkeypatch.undo()
    assert found == [e.file_path for e in _open(tmp_path, snapshot=False).titled("rate limits 1")] == NAMES[1::2]


def test_a_snapshot_is_not_saved_in_the_middle_of_a_batch(tmp_path):
    """A batch (`bulk()`, as a reconcile writes) records each new file's version at once and shows its entry
    at the end: a snapshot saved in between (the save timer fires while a slow batch pauses) would record the
    new files as no L0 document, and the next open would trust that and leave them out."""
    import hashlib

    from kb_core.keywords.entry import entry_of_bytes

    write_doc(tmp_path, NAMES[0], doc("T0", ["key-0"]))
    index = _open(tmp_path)
    data = doc("T1", ["key-1"]).encode()
    (tmp_path / NAMES[1]).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / NAMES[1]).write_bytes(data)
    with index.bulk():
        index.add(entry_of_bytes(index.folder, NAMES[1].removeprefix("knowledge_base/"), data),
                  sha256=hashlib.sha256(data).hexdigest())
        index.save_snapshot()  # what the timer would do now
    index.close()
    reopened = _open(tmp_path)
    assert [e.file_path for e in _view(reopened)] == sorted(NAMES[:2])
    reopened.close()
