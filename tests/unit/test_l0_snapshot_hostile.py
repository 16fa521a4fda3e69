"""The L0 snapshot file under hostile use: it can hold nothing that runs (data only, keyed), a
forged, foreign-keyed or damaged-but-signed file only makes the open scan in full, a FIFO or device at its path
is skipped and replaced by a regular file, and the temp file of a save killed by SIGKILL is removed at the next
open."""

from __future__ import annotations

import ast
import hashlib
import hmac
import os
import pickle
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.documents import doc, write_doc
from support.l0_snapshot import open_index as _open
from support.l0_snapshot import parses as _parses
from support.l0_snapshot import view as _view
from support.paths import REPO as ROOT

from kb_core.keywords import snapshot_file
from kb_core.keywords.index import KnowledgeIndex
from kb_core.keywords.snapshot_key import snapshot_key

NAMES = [f"knowledge_base/{c}/{n}.md" for c in ("api", "ops/runbooks") for n in ("err-timeout", "limit", "tls")]


def _tree(root: Path) -> None:
    for i, name in enumerate(NAMES):
        write_doc(root, name, doc(f"Page {i}", [f"ERR_CODE_{i}", "plugin", f"限流{i}"],
                                  body=f"# Page {i}\n\n## Attributes\n\nText {i}.\n"))


def _answers(index: KnowledgeIndex) -> list:
    return [[m.entry.file_path for m in index.match(q)] for q in ("ERR_CODE_1", "plugin", "限流4", "nothing")]


def test_the_snapshot_modules_cannot_unpickle_or_unmarshal():
    """Nothing that reads the file (nor the entries it restores) imports a deserialiser of code."""
    for module in ("kb_core/keywords/snapshot_file.py", "kb_core/keywords/index_data.py",
                   "kb_core/keywords/snapshot_key.py", "kb_core/keywords/entry.py"):
        tree = ast.parse((ROOT / module).read_text(encoding="utf-8"))
        imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                    for alias in node.names}
        imported |= {(node.module or "").split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        assert not imported & {"pickle", "marshal", "dill", "cloudpickle", "shelve"}, module


class _Payload:
    """Unpickling this runs a command (what a forged snapshot of the old format did)."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def test_a_forged_snapshot_runs_nothing_and_the_open_equals_a_fresh_scan(tmp_path, monkeypatch):
    _tree(tmp_path)
    fresh = _open(tmp_path, snapshot=False)
    snap, marker = tmp_path / "l0.snap", tmp_path / "ran"
    payload = pickle.dumps({"base": str((tmp_path / "knowledge_base").resolve()), "x": _Payload(marker)})
    forged = [
        # the format before the file was data only and keyed, with its unkeyed SHA-256 header right
        b"KB-L0-SNAPSHOT 3\n" + hashlib.sha256(payload).digest() + payload,
        # today's magic, the pickle as the rest, an unkeyed digest and a tag under a key guessed as empty
        snapshot_file.MAGIC + hashlib.sha256(payload).digest() + payload,
        snapshot_file.MAGIC + hmac.digest(b"", payload, "sha256") + payload,
    ]
    for data in forged:
        snap.write_bytes(data)
        parsed = _parses(monkeypatch)
        index = _open(tmp_path)
        assert not marker.exists(), "a forged snapshot ran a command"
        assert _view(index) == _view(fresh) and _answers(index) == _answers(fresh)
        assert len(parsed) == len(NAMES), "a forged snapshot is not used: every file is parsed"
        index.close()
        monkeypatch.undo()


def test_a_snapshot_signed_under_another_key_is_not_used(tmp_path, monkeypatch):
    """Another user's (or an attacker's) snapshot with entries that lie: never read, the open scans in full."""
    _tree(tmp_path)
    index = _open(tmp_path)
    index.save_snapshot()
    index.close()
    data = (tmp_path / "l0.snap").read_bytes()
    body = data[len(snapshot_file.MAGIC) + 32:].replace(b"ERR_CODE_1", b"ERR_CODE_X")
    (tmp_path / "l0.snap").write_bytes(snapshot_file.MAGIC + hmac.digest(os.urandom(32), body, "sha256") + body)
    parsed = _parses(monkeypatch)
    reopened = _open(tmp_path)
    assert len(parsed) == len(NAMES) and len(reopened.match("ERR_CODE_X")) == 0
    assert _answers(reopened) == _answers(_open(tmp_path, snapshot=False))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flips=st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(1, 255)), min_size=1, max_size=4),
       cut=st.one_of(st.none(), st.floats(0, 1)))
def test_a_damaged_file_signed_with_the_right_key_never_breaks_the_open(tmp_path_factory, flips, cut):
    """Only the key keeps out wrong data (a key holder can write any entries, as they can write the database).
    What a wrong file signed with it may still not do: raise, hang, or leave values of another type - every blob
    is checked, so the open uses data of the right shape or scans; every answer and every field still reads."""
    root = tmp_path_factory.mktemp("signed")
    _tree(root)
    index = _open(root)
    index.save_snapshot()
    index.close()
    snap = root / "l0.snap"
    data = snap.read_bytes()
    start = len(snapshot_file.MAGIC) + 32
    body = bytearray(data[start:])
    for where, xor in flips:
        body[int(where * len(body))] ^= xor
    if cut is not None:
        del body[int(cut * len(body)):]
    snap.write_bytes(data[:len(snapshot_file.MAGIC)] + hmac.digest(snapshot_key(), bytes(body), "sha256") + body)
    damaged = _open(root)
    for query in ("ERR_CODE_1", "plugin", "限流4", "err", "nothing", "Page 3 plugin ERR_CODE_5"):
        for match in damaged.match(query):
            assert isinstance(match.entry.file_path, str)
    for entry in damaged.entries():
        assert isinstance(entry.title, str) and isinstance(entry.summary, str)
        assert all(isinstance(k, str) for k in entry.keywords) and isinstance(entry.lang, str)
        assert entry.sections is None or all(isinstance(s, str) for s in entry.sections)
        assert (root / entry.file_path).is_file(), "an entry of a file that is not there"


def test_a_fifo_at_the_snapshot_path_is_skipped_and_replaced_by_a_regular_file(tmp_path, caplog):
    _tree(tmp_path)
    snap = tmp_path / "l0.snap"
    os.mkfifo(snap)
    opened: list[KnowledgeIndex] = []
    opener = threading.Thread(target=lambda: opened.append(_open(tmp_path)), daemon=True)
    opener.start()
    opener.join(30)
    if opener.is_alive():  # unblock the reader so the test process can end, then fail
        with open(snap, "wb"):
            pass
        pytest.fail("opening with a FIFO at the snapshot path hangs")
    [index] = opened
    assert "not a regular file" in caplog.text and _view(index) == _view(_open(tmp_path, snapshot=False))
    index.close()
    assert snap.is_file() and not snap.is_fifo() and snapshot_file.load(snap, index.folder.base_dir)


def test_a_link_to_a_device_at_the_snapshot_path_is_not_followed(tmp_path, caplog):
    _tree(tmp_path)
    snap = tmp_path / "l0.snap"
    snap.symlink_to("/dev/zero")
    index = _open(tmp_path)
    index.close()
    assert "is a link" in caplog.text
    assert snap.is_file() and not snap.is_symlink() and Path("/dev/zero").exists()


def test_stale_temp_files_of_killed_saves_are_removed_at_open(tmp_path):
    _tree(tmp_path)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True, check=True).stdout.strip()
        dead = tmp_path / f".l0.snap.{gone}.abc123.tmp"
        live = tmp_path / f".l0.snap.{sleeper.pid}.def456.tmp"  # a save in flight in a process that runs
        other = tmp_path / f".other.snap.{gone}.abc123.tmp"  # not this snapshot's
        for path in (dead, live, other):
            path.write_bytes(b"half a snapshot")
        _open(tmp_path).close()
        assert not dead.exists() and live.exists() and other.exists()
    finally:
        sleeper.kill()
        sleeper.wait()


_KILLED_SAVE = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from kb_core.keywords.index import KnowledgeIndex
    root = Path(sys.argv[1])
    real_fsync = os.fsync
    def fsync(fd):
        if os.readlink(f"/proc/self/fd/{fd}").endswith(".tmp"):  # the snapshot's temp file, written
            print("SIGKILL during the save", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        real_fsync(fd)
    os.fsync = fsync
    index = KnowledgeIndex("knowledge_base", app_root=root, snapshot_path=root / "l0.snap")
    index.load()
    index.save_snapshot()
    print("NOT REACHED", flush=True)
""")


@pytest.mark.processes
def test_a_kill_during_a_save_leaves_a_temp_file_the_next_open_removes(tmp_path):
    _tree(tmp_path)
    done = subprocess.run([sys.executable, "-c", _KILLED_SAVE, str(tmp_path)], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert done.returncode == -9 and "SIGKILL during the save" in done.stdout, done.stderr[-2000:]
    [left] = [p for p in tmp_path.iterdir() if p.name.startswith(".l0.snap.")]
    assert not (tmp_path / "l0.snap").exists()
    index = _open(tmp_path)
    assert not left.exists() and _view(index) == _view(_open(tmp_path, snapshot=False))
    index.close()
