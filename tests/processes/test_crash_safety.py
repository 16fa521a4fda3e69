"""Crash safety: a writer killed with SIGKILL at any step of an upload, a replace or a delete leaves
stores that the next opening (`recover`) brings back into agreement, with the document either wholly old or
wholly new (or wholly present / wholly absent), and nothing served from a file that is gone.

Group 1 runs each kill point in a child process (tests/support/crash_child.py) on SQLite + Milvus Lite (every kill
point, including those between the SQLite FTS5 index and Milvus inside one chunk-store call) and on MariaDB +
a `milvus-lite server` (a selection). Before reopening, each case checks that the crash really left work for
`recover` (a PENDING row, a temp file) where it should. Group 2 raises a `BaseException` (Streamlit's
rerun) from the upload's progress callback at every stage, in-process.

A failing case names its kill point, lists everything that broke, shows the child's log and prints the command
that reproduces the child.
"""

from __future__ import annotations

import hashlib
import json
import os
import selectors
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from support import crash_child as child
from support.paths import REPO
from support.stores import MYSQL_SERVER, NO_MODEL, assert_consistent, make_settings

from kb_core.bootstrap import open_knowledge_base, parts_of

CHILD_SCRIPT = Path(child.__file__).resolve()
FILE_PATH = f"knowledge_base/{child.CATEGORY}/{child.TARGET}"
BYSTANDER_PATH = f"knowledge_base/{child.CATEGORY}/{child.BYSTANDER}"
SIGKILLED = -9

# Which states of the target document each scenario may end in: the old version, the new one, or none.
ALLOWED = {
    "upload": {"absent", "beta"},
    "replace-fewer": {"alpha", "beta"},
    "replace-more": {"alpha", "beta"},
    "delete": {"alpha", "absent"},
}


def _upload_points(scenario: str) -> list[tuple[str, str]]:
    """In the order the upload runs them. "fulltext.X:after" lies inside `vectors.X` (FTS5 written, Milvus not)."""
    points = [("metadata.save_document", "before"), ("metadata.save_document", "after"),
              ("write_atomic", "before"), ("write_atomic", "inside"), ("write_atomic", "after"),
              ("vectors.upsert", "before"), ("fulltext.upsert", "after"), ("vectors.upsert", "after")]
    if scenario == "replace-fewer":  # only a version with fewer chunks drops the old version's extra chunks
        points += [("vectors.delete_chunks_from", "before"), ("fulltext.delete_chunks_from", "after"),
                   ("vectors.delete_chunks_from", "after")]
    points += [("metadata.finish_write", "before"), ("metadata.finish_write", "after"),
               ("index.add", "before"), ("index.add", "after")]
    return points


def _delete_points() -> list[tuple[str, str]]:
    points = [(step, when) for step in child.DELETE_STEPS for when in ("before", "after")]
    points.insert(points.index(("vectors.delete_document", "after")), ("fulltext.delete_document", "after"))
    return points


def _points_of(scenario: str) -> list[str]:
    return [f"{step}:{when}" for step, when in (_delete_points() if scenario == "delete"
                                                 else _upload_points(scenario))]


def _all_cases() -> list[tuple[str, str]]:
    return [(scenario, point) for scenario in ("upload", "replace-fewer", "replace-more", "delete")
            for point in _points_of(scenario)]


def _case_id(case: tuple[str, str]) -> str:
    scenario, point = case
    step, when = point.rsplit(":", 1)
    return f"{scenario}-killed-{when}-{step}"


SQLITE_CASES = _all_cases()
# The server setup: at least one kill point in each phase of each operation.
SERVER_CASES = [
    ("upload", "metadata.save_document:after"),
    ("upload", "write_atomic:inside"),
    ("upload", "vectors.upsert:after"),
    ("upload", "metadata.finish_write:after"),
    ("replace-fewer", "write_atomic:after"),
    ("replace-fewer", "vectors.upsert:after"),
    ("replace-fewer", "vectors.delete_chunks_from:after"),
    ("replace-fewer", "metadata.finish_write:before"),
    ("replace-more", "metadata.save_document:after"),
    ("replace-more", "vectors.upsert:after"),
    ("delete", "metadata.set_pending:after"),
    ("delete", "vectors.delete_document:after"),
    ("delete", "move:after"),
    ("delete", "metadata.delete_document:before"),
]
assert set(SERVER_CASES) <= set(SQLITE_CASES)


def _readable(stream, timeout: float) -> bool:
    """Whether `stream` has something to read within `timeout` (selectors, not select.select: a long test run
    holds descriptors past 1,024, which select() refuses with "filedescriptor out of range")."""
    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        return bool(selector.select(timeout))


# -- the child process -----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def run_child():
    """Runs crash_child.run_case in a new process and returns its exit code (-9: killed by SIGKILL).

    By default each case is a fork of `crash_child.py --serve`, which has imported the heavy third-party
    modules once (~1 s per case instead of ~4 s); KB_CRASH_CHILD=subprocess starts a fresh
    `python tests/support/crash_child.py '{...}'` per case instead."""
    if os.environ.get("KB_CRASH_CHILD") == "subprocess":
        def run(config: dict, timeout: float = 180) -> int:
            done = subprocess.run([sys.executable, str(CHILD_SCRIPT), json.dumps(config)], cwd=REPO,
                                  stdin=subprocess.DEVNULL, timeout=timeout)
            return done.returncode

        yield run
        return

    server = subprocess.Popen([sys.executable, str(CHILD_SCRIPT), "--serve"], cwd=REPO, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def answer(timeout: float) -> dict:
        ready = _readable(server.stdout, timeout)
        line = server.stdout.readline() if ready else ""
        if not line:
            server.kill()
            pytest.fail(f"the crash_child fork server {'died' if ready else 'did not answer'} "
                        f"(exit code {server.poll()})")
        return json.loads(line)

    def run(config: dict, timeout: float = 180) -> int:
        server.stdin.write(json.dumps(config) + "\n")
        server.stdin.flush()
        return answer(timeout)["returncode"]

    try:
        answer(120)  # {"ready": pid}: preloaded
        yield run
    finally:
        server.stdin.close()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _child_log(root: Path) -> str:
    try:
        text = (root / "child.log").read_text(errors="replace")
    except OSError:
        return "(no child log)"
    lines = text.splitlines()
    return "\n".join(lines[-40:])


# -- checking the stores after the crash --------------------------------------------------------------------------
def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _version_state(kb, tag: str, sections: int) -> list[str]:
    """What differs between the stores and version `tag` of the target (empty: coherent in every store)."""
    problems = []
    expected = child.version_text(tag, sections)
    count = sections + 1  # the frontmatter chunk + one chunk per section
    other = "beta" if tag == "alpha" else "alpha"
    row = parts_of(kb).metadata.get_by_path(FILE_PATH)
    target = parts_of(kb).folder.base_dir / child.CATEGORY / child.TARGET
    if not target.is_file() or target.read_bytes() != expected:
        problems.append(f"file on disk is not the {tag} version")
    if row is None:
        return [*problems, "no database row"]
    if row.content_sha256 != _sha(expected):
        problems.append(f"row's sha256 is not the {tag} version's")
    if row.status != "INDEXED" or row.pending_operation:
        problems.append(f"row is {row.status} with pending {row.pending_operation!r}")
    if row.chunk_count != count:
        problems.append(f"row says {row.chunk_count} chunks, the {tag} version has {count}")
    chunks = parts_of(kb).vectors.chunks_of(row.id)
    if sorted(c.chunk_no for c in chunks) != list(range(count)):
        problems.append(f"the chunk store holds chunks {sorted(c.chunk_no for c in chunks)}, "
                        f"expected 0..{count - 1}")
    wrong = [c.chunk_no for c in chunks if child.marker(tag) not in c.text or child.marker(other) in c.text]
    if wrong:
        problems.append(f"chunks {wrong} are not the {tag} version's text")
    # chunks_of reads the FTS5 index when there is one beside Milvus Lite; with_vectors reads Milvus itself
    in_milvus = parts_of(kb).vectors.chunks_of(row.id, with_vectors=True)
    if [(c.chunk_no, c.text) for c in in_milvus] != [(c.chunk_no, c.text) for c in chunks]:
        problems.append(f"Milvus holds chunks {[c.chunk_no for c in in_milvus]} that differ from the full-text "
                        f"index's {[c.chunk_no for c in chunks]}")
    entry = parts_of(kb).index.get(FILE_PATH)
    if entry is None or entry.title != child.title(tag):
        problems.append(f"L0 entry is {entry.title if entry else None!r}, expected {child.title(tag)!r}")
    return problems


def _absent_state(kb) -> list[str]:
    problems = []
    if parts_of(kb).metadata.get_by_path(FILE_PATH) is not None:
        problems.append("a database row remains")
    if (parts_of(kb).folder.base_dir / child.CATEGORY / child.TARGET).exists():
        problems.append("the file remains on disk")
    if parts_of(kb).index.get(FILE_PATH) is not None:
        problems.append("an L0 entry remains")
    stray = [c for c in parts_of(kb).vectors.search_bm25(child.KEYWORD, limit=10) if c.row.source == FILE_PATH]
    if stray:
        problems.append(f"full-text search still finds {len(stray)} chunks of it")
    return problems


def _target_state(kb, scenario: str) -> tuple[str, list[str]]:
    """'absent', 'alpha' (old) or 'beta' (new) when the target is coherent in every store; else 'incoherent'
    and what disagrees with each candidate."""
    seed, new = child.SCENARIOS[scenario]
    candidates = {"absent": lambda: _absent_state(kb)}
    for version in (seed, new):
        if version is not None:
            candidates[version[0]] = lambda v=version: _version_state(kb, *v)
    findings = {}
    for state, check in candidates.items():
        problems = check()
        if not problems:
            return state, []
        findings[state] = problems
    return "incoherent", [f"not {state}: {'; '.join(p)}" for state, p in findings.items()]


def _check_lookup(kb, state: str) -> list[str]:
    problems = []
    payload = kb.lookup_knowledge(child.KEYWORD)
    parts = {name: payload.get(name) for name in ("primary", "supplement")}
    for name, part in parts.items():
        if part is None:
            continue
        real = parts_of(kb).folder.resolve(part["source"])
        if real is None or not real.is_file():
            problems.append(f"lookup serves {part['source']} as {name}, but that file is gone")
    primary = parts["primary"]
    if state == "absent":
        served = [name for name, part in parts.items() if part and part["source"] == FILE_PATH]
        if served:
            problems.append(f"lookup serves the absent document as {served}")
    else:
        if not payload.get("found") or primary is None or primary["source"] != FILE_PATH:
            problems.append(f"lookup of {child.KEYWORD!r} does not answer with the document: {payload}")
        elif child.marker(state) not in primary["content"]:
            problems.append(f"lookup's primary is not the {state} version")
        supplement = parts["supplement"]
        if supplement and supplement["source"] == FILE_PATH and child.marker(state) not in supplement["content"]:
            problems.append(f"lookup's supplement is a chunk of another version than the {state} on disk")
    return problems


def _check_repair(kb) -> list[str]:
    report = kb.documents.reconcile()
    problems = []
    leftovers = {
        "finished": report.finished, "undone": report.undone,
        "left_to_live_writers": report.left_to_live_writers,
        "failed": report.failed, "temp_files_removed": report.temp_files_removed,
        "orphan_documents": report.orphan_documents, "trimmed": report.trimmed, "reindexed": report.reindexed,
        "missing_files": report.missing_files, "removed": report.removed,
        "added": report.added, "updated": report.updated,
    }
    found = {name: value for name, value in leftovers.items() if value}
    if found:
        problems.append(f"repair after recovery still had work to do: {found}")
    try:
        assert_consistent(kb)
    except AssertionError as exc:
        problems.append(f"stores disagree after repair: {exc}")
    return problems


def _check_trash(kb, scenario: str, state: str) -> list[str]:
    """Nothing is lost: a document deleted (absent) is in the trash once, byte for byte; one still there left
    nothing in it (a prepared item without its file is not listed)."""
    items = kb.trash.items()
    if scenario != "delete" or state != "absent":
        return [f"the trash holds {[i.file_path for i in items]}, expected nothing"] if items else []
    if [i.file_path for i in items] != [FILE_PATH]:
        return [f"the trash holds {[i.file_path for i in items]}, expected {FILE_PATH} once"]
    item, expected = items[0], child.version_text("alpha", child.LONG)
    problems = []
    if (parts_of(kb).trash.directory / item.item_id / item.relative_path).read_bytes() != expected:
        problems.append("the trashed file is not the deleted version")
    if item.sha256 not in (None, _sha(expected)):
        problems.append("the trash record's sha256 is not the deleted version's")
    return problems


def check_after_crash(kb, scenario: str) -> tuple[str, list[str]]:
    """Everything the reopened knowledge base must satisfy; returns the target's state and the problems."""
    problems = []
    try:
        assert_consistent(kb)
    except AssertionError as exc:
        problems.append(f"stores disagree after recovery: {exc}")
    state, incoherent = _target_state(kb, scenario)
    if state == "incoherent":
        problems += incoherent
    elif state not in ALLOWED[scenario]:
        problems.append(f"ended {state}, but a {scenario} may only end {sorted(ALLOWED[scenario])}")
    problems += _check_trash(kb, scenario, state)
    bystander = parts_of(kb).metadata.get_by_path(BYSTANDER_PATH)
    if (bystander is None or bystander.content_sha256 != _sha(child.bystander_text())
            or len(parts_of(kb).vectors.chunks_of(bystander.id)) != bystander.chunk_count
            or parts_of(kb).index.get(BYSTANDER_PATH) is None):
        problems.append("the other document in the knowledge base was damaged")
    if state != "incoherent":
        problems += _check_lookup(kb, state)
    problems += _check_repair(kb)
    if scenario == "delete" and state == "absent" and not problems:  # and it comes back from the trash whole
        kb.trash.restore(FILE_PATH)
        problems += [f"after restoring from the trash: {p}" for p in _version_state(kb, "alpha", child.LONG)]
        problems += [f"the trash still holds {i.file_path} after its restore" for i in kb.trash.items()]
    return state, problems


def _close(kb, milvus_uri: str | None) -> None:
    kb.close()
    if milvus_uri and "://" not in milvus_uri:  # Milvus Lite runs inside this process: let go of the directory
        try:
            from milvus_lite.server_manager import server_manager_instance

            server_manager_instance.release_server(milvus_uri)
        except Exception:  # noqa: BLE001 - best effort; the directory is in tmp_path anyway
            pass


def _left_for_recovery(root: Path, scenario: str, point: str, db_url: str | None) -> list[str]:
    """Before reopening: what the crash must have left behind (a PENDING row between the intent record and
    its settling, the temp file of a write cut short), so each case really exercises `recover`."""
    from kb_core.storage.metadata_store import MetadataStore

    points = _points_of(scenario)
    first, last = (("metadata.set_pending:after", "metadata.delete_document:before") if scenario == "delete"
                   else ("metadata.save_document:after", "metadata.finish_write:before"))
    expect_pending = points.index(first) <= points.index(point) <= points.index(last)
    store = MetadataStore(db_url or f"sqlite:///{root / 'kb.sqlite3'}")
    try:
        pending = [(r.file_path, r.pending_operation) for r in store.pending_documents()]
    finally:
        store.dispose()
    problems = []
    wanted = [(FILE_PATH, "delete" if scenario == "delete" else "upload")] if expect_pending else []
    if pending != wanted:
        problems.append(f"the crash left pending rows {pending}, expected {wanted}")
    temp = [p.name for p in (root / "knowledge_base").rglob(".*.tmp")]
    if bool(temp) != (point == "write_atomic:inside"):
        problems.append(f"the crash left temp files {temp}")
    return problems


def _settings(root: Path, db_url: str | None, milvus_uri: str):
    """support.stores.make_settings, with the Milvus URI chosen (make_settings always points at root/kb_milvus.db)."""
    if "://" not in milvus_uri:
        return make_settings(root, db_url=db_url, model=NO_MODEL)
    from kb_core import load_settings

    return load_settings(app_root=root, database_url=db_url or f"sqlite:///{root / 'kb.sqlite3'}",
                         milvus_uri=milvus_uri, embedding_model=NO_MODEL)


def crash_and_check(root: Path, scenario: str, point: str, run_child, *, db_url: str | None = None,
                    milvus_uri: str | None = None) -> None:
    config = {"root": str(root), "scenario": scenario, "point": point, "db_url": db_url, "milvus_uri": milvus_uri}
    setup = "MariaDB + milvus-lite server" if db_url else "SQLite + Milvus Lite"
    label = f"kill point {_case_id((scenario, point))} ({setup})"
    again = {**config, "root": "/tmp/crash-repro"}
    reproduce = (f"reproduce (on an empty root): .venv/bin/python tests/support/crash_child.py '{json.dumps(again)}'"
                 "; then open the knowledge base on that root")
    code = run_child(config)
    if code == child.EXIT_NO_SUCH_STEP:
        pytest.skip(f"{label}: this setup has no such step ({_child_log(root).splitlines()[-1]})")
    if code != SIGKILLED:
        why = {child.EXIT_NOT_REACHED: "the operation finished without reaching the kill point"}.get(
            code, "the child failed before the kill point")
        pytest.fail(f"{label}: child exit code {code}, expected {SIGKILLED} (SIGKILL): {why}\n"
                    f"--- child log ---\n{_child_log(root)}\n{reproduce}")
    log = _child_log(root)
    if f"SIGKILL at {point}" not in log:
        pytest.fail(f"{label}: the child was killed, but not at the kill point\n--- child log ---\n{log}\n{reproduce}")
    setup = _left_for_recovery(root, scenario, point, db_url)
    if setup:
        pytest.fail(f"{label}: the case does not test what it means to:\n  - " + "\n  - ".join(setup)
                    + f"\n--- child log ---\n{log}\n{reproduce}")
    milvus_uri = milvus_uri or str(root / "kb_milvus.db")
    kb = open_knowledge_base(_settings(root, db_url, milvus_uri))
    try:
        state, problems = check_after_crash(kb, scenario)
    finally:
        _close(kb, milvus_uri)
    if problems:
        pytest.fail(f"{label}: the document ended {state}, and\n  - " + "\n  - ".join(problems)
                    + f"\n--- child log ---\n{_child_log(root)}\n{reproduce}", pytrace=False)


# -- group 1a: SQLite + Milvus Lite, every kill point ---------------------------------------------------------------
def test_the_scenario_documents_have_the_chunk_counts_the_cases_rely_on(tmp_path):
    """"replace-fewer" must really drop chunks and "replace-more" add some; every chunk carries its marker."""
    kb = open_knowledge_base(make_settings(tmp_path, model=NO_MODEL))
    try:
        for tag, sections in (("alpha", child.SHORT), ("beta", child.LONG)):
            record = kb.documents.upload(f"{tag}.md", child.version_text(tag, sections), child.CATEGORY).document
            assert record.chunk_count == sections + 1
            assert all(child.marker(tag) in c.text for c in parts_of(kb).vectors.chunks_of(record.id))
    finally:
        _close(kb, str(tmp_path / "kb_milvus.db"))
    assert len(SQLITE_CASES) >= 20 and len(SERVER_CASES) >= 10


@pytest.mark.processes
@pytest.mark.parametrize("case", SQLITE_CASES, ids=[_case_id(c) for c in SQLITE_CASES])
def test_sigkill_on_sqlite_and_milvus_lite(case, tmp_path, run_child):
    crash_and_check(tmp_path, *case, run_child)


# -- group 1b: MariaDB + milvus-lite server -----------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def milvus_server(tmp_path_factory):
    """One `milvus-lite server` for the whole group; each test drops the collection first."""
    binary = Path(sys.executable).with_name("milvus-lite")
    data_dir = tmp_path_factory.mktemp("milvus-server") / "data.db"
    port = _free_port()
    log = open(data_dir.parent / "server.log", "wb")  # noqa: SIM115 - closed below
    server = subprocess.Popen([str(binary), "server", "--data-dir", str(data_dir), "--host", "127.0.0.1",
                               "--port", str(port)], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    pytest.fail(f"milvus-lite server did not start: {(data_dir.parent / 'server.log').read_text()}")
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


@pytest.fixture
def server_stores(milvus_server):
    """A fresh MariaDB database and an empty collection on the shared milvus-lite server."""
    from pymilvus import MilvusClient
    from sqlalchemy import create_engine, text

    from kb_core.storage.vector_store import collection_name

    client = MilvusClient(uri=milvus_server)
    client.drop_collection(collection_name(None, None))  # no model: the BM25-only collection
    client.close()
    name = f"kb_crash_{uuid.uuid4().hex[:10]}"
    engine = create_engine(f"{MYSQL_SERVER}/?charset=utf8mb4")
    try:
        with engine.connect() as connection:
            connection.execute(text(f"CREATE DATABASE {name} CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"))
    except Exception as exc:  # noqa: BLE001
        pytest.fail(f"MariaDB/MySQL is not reachable at {MYSQL_SERVER} ({exc})")
    yield f"{MYSQL_SERVER}/{name}?charset=utf8mb4", milvus_server
    with engine.connect() as connection:
        connection.execute(text(f"DROP DATABASE IF EXISTS {name}"))
    engine.dispose()


@pytest.mark.processes
@pytest.mark.mysql
@pytest.mark.parametrize("case", SERVER_CASES, ids=[_case_id(c) for c in SERVER_CASES])
def test_sigkill_on_mariadb_and_milvus_server(case, tmp_path, run_child, server_stores):
    db_url, milvus_uri = server_stores
    crash_and_check(tmp_path, *case, run_child, db_url=db_url, milvus_uri=milvus_uri)


# -- group 2: a BaseException from the progress callback -------------------------------------------------------------
class Rerun(BaseException):  # noqa: N818 - named like what it imitates
    """Imitates Streamlit's RerunException: a BaseException raised from inside a callback."""


# (stage, which report of it): "indexing" is reported twice, before the vectors are written and after
STAGES = [("parsing", 1), ("chunking", 1), ("saving", 1), ("indexing", 1), ("indexing", 2), ("done", 1)]


@pytest.mark.parametrize("scenario", ["upload", "replace-fewer", "replace-more"])
@pytest.mark.parametrize("stage", STAGES, ids=[f"{s}-{n}" for s, n in STAGES])
def test_rerun_raised_from_progress_leaves_the_stores_agreeing(stage, scenario, tmp_path):
    kb = open_knowledge_base(make_settings(tmp_path, model=NO_MODEL))
    try:
        seed, new = child.SCENARIOS[scenario]
        kb.documents.upload(child.BYSTANDER, child.bystander_text(), child.CATEGORY)
        if seed:
            kb.documents.upload(child.TARGET, child.version_text(*seed), child.CATEGORY)
        reported: list[str] = []

        def progress(name: str, done: int, total: int) -> None:
            reported.append(name)
            if (name, reported.count(name)) == stage:
                raise Rerun(name)

        with pytest.raises(Rerun):
            kb.documents.upload(child.TARGET, child.version_text(*new), child.CATEGORY, progress=progress)
        label = f"Rerun from progress({stage[0]!r}) #{stage[1]} during {scenario} (reported: {reported})"
        # the same object, as the Streamlit session keeps it: L0 in memory included
        problems = []
        try:
            assert_consistent(kb)
        except AssertionError as exc:
            problems.append(f"stores disagree: {exc}")
        state, incoherent = _target_state(kb, scenario)
        problems += incoherent
        if state != "incoherent":
            problems += _check_lookup(kb, state)
        problems += _check_repair(kb)
    finally:
        _close(kb, str(tmp_path / "kb_milvus.db"))
    if problems:
        pytest.fail(f"{label}: the document ended {state}, and\n  - " + "\n  - ".join(problems), pytrace=False)


# -- a rollback that could not finish --------------------------------------------------------------------------------
def test_repair_finishes_a_rollback_left_incomplete_in_this_process(tmp_path):
    """The upload's vectors fail and so does undoing its row (the stores are down); the error says "run repair".
    Once the stores are back, repair in the same process (the console's button) must settle the row."""
    from kb_core import KnowledgeBaseError

    kb = open_knowledge_base(make_settings(tmp_path, model=NO_MODEL))
    try:
        upsert, delete_row = parts_of(kb).vectors.upsert, parts_of(kb).metadata.delete_document

        def down(*args, **kwargs):
            raise KnowledgeBaseError("store down")

        parts_of(kb).vectors.upsert = parts_of(kb).metadata.delete_document = down
        with pytest.raises(KnowledgeBaseError, match="run reconcile"):
            kb.documents.upload(child.TARGET, child.version_text("beta", child.SHORT), child.CATEGORY)
        parts_of(kb).vectors.upsert, parts_of(kb).metadata.delete_document = upsert, delete_row  # the stores are back
        report = kb.documents.reconcile()
        assert report.left_to_live_writers == ()
        assert_consistent(kb)
    finally:
        _close(kb, str(tmp_path / "kb_milvus.db"))
