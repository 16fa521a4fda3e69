"""A full L0 scan whose files are parsed by child processes (`documents.parallel_scan`) gives what the serial
scan gives: the same entries in the same order (their strings shared), the same report, the same warnings in
the same order; and a child that cannot start or imports another kb_core leaves the work to the parent.
Self-contained (no conftest)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

from kb_core.keywords import parallel_scan
from kb_core.keywords.index import KnowledgeIndex


def _tree(root: Path) -> None:
    base = root / "knowledge_base"
    for i in range(40):
        folder = base / ("api" if i % 2 else "docs/zh")
        folder.mkdir(parents=True, exist_ok=True)
        if i % 10 == 3:
            text = f"# No frontmatter {i}\n\nbody\n"
        elif i % 10 == 5:
            text = f"---\ntitle: [unclosed {i}\n---\nbody\n"
        elif i % 10 == 7:
            text = f"---\ntitle: t{i}\nkeywords:\n  - K{i}\n  - shared\naudience: [ops]\n---\n\n## 章节 {i}\n\n文本\n"
        else:
            text = f"---\ntitle: T {i}\nkeywords: [ERR_{i:03d}, shared, API 网关]\nsummary: s {i}\n---\n\n# H{i}\n"
        (folder / f"doc-{i:02d}.md").write_text(text, encoding="utf-8")
    (base / "api" / "latin1.md").write_bytes(b"---\ntitle: caf\xe9\n---\n")  # not UTF-8: failed


def _scan(root: Path, processes: int, caplog, snapshot: Path | None = None):
    caplog.clear()
    index = KnowledgeIndex("knowledge_base", app_root=root, snapshot_path=snapshot)
    index.scan_processes = processes
    with caplog.at_level(logging.WARNING, logger="kb_core"):
        report = index.scan()
    messages = [(r.name, r.levelname, r.getMessage()) for r in caplog.records if r.name.startswith("kb_core")]
    entries = index.entries()
    if snapshot is None:
        index.discard()
    else:
        index.close()
    return report, entries, messages


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(parallel_scan, "PARALLEL_FROM", 5)
    monkeypatch.setattr(parallel_scan, "CHUNK", 7)


def _same(a, b) -> None:
    (report_a, entries_a, messages_a), (report_b, entries_b, messages_b) = a, b
    assert (report_a.scanned, report_a.indexed, report_a.skipped, report_a.failed, report_a.as_saved) == \
        (report_b.scanned, report_b.indexed, report_b.skipped, report_b.failed, report_b.as_saved)
    assert entries_a == entries_b
    assert [e.file_path for e in entries_a] == [e.file_path for e in entries_b]
    assert messages_a == messages_b


def test_children_parse_as_the_parent_does(tmp_path, caplog, small_chunks):
    _tree(tmp_path)
    serial, parallel = _scan(tmp_path, 0, caplog), _scan(tmp_path, 2, caplog)
    _same(serial, parallel)
    assert serial[0].failed == 1 and serial[0].skipped == 8 and serial[0].indexed == 32
    assert any("ignoring frontmatter" in m for *_, m in serial[2])
    assert any("cannot read" in m for *_, m in serial[2])
    for a, b in zip(serial[1], parallel[1], strict=True):  # the strings are this process's shared ones
        assert all(x is y for x, y in zip(a.keywords, b.keywords, strict=True))
        assert a.lang is b.lang and a.audience == b.audience


def test_children_really_parse(tmp_path, caplog, small_chunks, monkeypatch):
    _tree(tmp_path)
    here = []
    real = parallel_scan.parse_files

    def counted(folder, relatives, processes):
        found = real(folder, relatives, processes)
        here.append(len(found))
        return found

    monkeypatch.setattr(parallel_scan, "parse_files", counted)
    _scan(tmp_path, 2, caplog)
    assert here == [41]


def test_a_child_that_cannot_start_leaves_the_work_here(tmp_path, caplog, small_chunks, monkeypatch):
    _tree(tmp_path)
    serial = _scan(tmp_path, 0, caplog)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-such-python"))
    _same(serial, _scan(tmp_path, 2, caplog))


def test_a_child_with_another_kb_core_is_not_used(tmp_path, caplog, small_chunks, monkeypatch):
    _tree(tmp_path)
    serial = _scan(tmp_path, 0, caplog)
    monkeypatch.setattr(parallel_scan, "_PACKAGE_FILE", "/elsewhere/kb_core/__init__.py")
    assert parallel_scan.parse_files(KnowledgeIndex("knowledge_base", app_root=tmp_path).folder,
                                     ["api/doc-01.md"] * 10, 2) == {}
    _same(serial, _scan(tmp_path, 2, caplog))


def test_with_a_snapshot_only_changed_files_are_parsed(tmp_path, caplog, small_chunks, monkeypatch):
    _tree(tmp_path)
    snapshot = tmp_path / "l0.snap"
    _scan(tmp_path, 0, caplog, snapshot)
    for i in range(0, 40, 4):
        path = next((tmp_path / "knowledge_base").rglob(f"doc-{i:02d}.md"))
        path.write_text(path.read_text(encoding="utf-8").replace("shared", f"changed{i}") + "\nmore\n",
                        encoding="utf-8")
    asked = []
    real = parallel_scan.parse_files
    monkeypatch.setattr(parallel_scan, "parse_files",
                        lambda folder, relatives, processes: asked.append(len(relatives)) or real(folder, relatives,
                                                                                                processes))
    with_children = _scan(tmp_path, 2, caplog, snapshot)
    assert asked == [11]  # the 10 changed files and the one the snapshot has no record of (it failed)
    assert any(entry.keywords[1:2] == ("changed0",) for entry in with_children[1])
    assert with_children[1] == _scan(tmp_path, 0, caplog)[1]  # what a full serial scan makes of the tree now


def test_the_process_count(monkeypatch):
    monkeypatch.setenv("KB_L0_SCAN_PROCESSES", "3")
    assert parallel_scan.scan_processes() == 3
    monkeypatch.setenv("KB_L0_SCAN_PROCESSES", "nonsense")
    assert parallel_scan.scan_processes() == 0
    monkeypatch.delenv("KB_L0_SCAN_PROCESSES")
    assert parallel_scan.scan_processes() in (0, *range(2, parallel_scan.MAX_PROCESSES + 1))


def test_what_a_child_sends_is_data_checked_field_by_field():
    """The pipe carries JSON, never an object format: a pickle (which could run code) is not JSON, and a value
    of the wrong shape is refused (the caller then parses that chunk itself)."""
    import io
    import pickle
    import struct

    payload = pickle.dumps(("kb_core", "x"))
    with pytest.raises(ValueError):
        parallel_scan._receive(io.BytesIO(struct.pack("<Q", len(payload)) + payload))
    with pytest.raises(ValueError):
        parallel_scan._receive(io.BytesIO(struct.pack("<Q", parallel_scan.MAX_FRAME + 1)))
    good = [parallel_scan.ENTRY, ["knowledge_base/a.md", ["k"], "api", "en", "g", [["x", "y"]], [], "AAE="],
            [["kb_core", 30, "warned"]]]
    kind, value, records = parallel_scan._checked(good)
    assert kind == parallel_scan.ENTRY and value[-1] == b"\x00\x01" and records == (("kb_core", 30, "warned"),)
    for bad in ([9, None, []], [parallel_scan.NO_ENTRY, "x", []], [parallel_scan.UNREADABLE, 3, []],
                [parallel_scan.ENTRY, good[1][:7], []], [parallel_scan.ENTRY, [*good[1][:1], "k", *good[1][2:]], []],
                [parallel_scan.ENTRY, [*good[1][:7], "not base64!"], []], [parallel_scan.NO_ENTRY, None, [["a"]]]):
        with pytest.raises(ValueError):
            parallel_scan._checked(bad)
