"""The fixtures and marking hooks of the whole suite; the helpers live in tests/support/ (`from support.x import y`).

The rooms: unit/ (pure logic), stores/ (SQLite, MariaDB, Milvus and the full-text stores), console/ (the pages under
AppTest), browser/ (chromium through playwright) and processes/ (child processes, SIGKILL, servers)."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

# The L0 snapshot key (kb_core/keywords/snapshot_key.py) of the test processes and their children: not the
# user's own in ~/.config, and one for the whole run, so that a child process reads the parent's snapshots.
if not os.environ.get("KB_L0_SNAPSHOT_KEY_FILE", "").strip():
    os.environ["KB_L0_SNAPSHOT_KEY_FILE"] = str(Path(tempfile.gettempdir()) / f"kb-test-l0-snapshot-{os.getuid()}.key")

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Tests that name a missing model mean "BM25 only"; the built-in stand-in is tested on purpose
# where it is the subject (tests/unit/test_builtin_model.py), and subprocesses inherit this.
os.environ.setdefault("KB_EMBEDDING_FALLBACK", "none")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# The console's own .streamlit/config.toml binds 127.0.0.1, but AppTest reads it only when pytest runs from the
# checkout: state it for any working directory (tests/processes/test_exposure.py sets other addresses on purpose).
os.environ.setdefault("STREAMLIT_SERVER_ADDRESS", "127.0.0.1")

from support.documents import write_doc  # noqa: E402
from support.paths import SAMPLE_KB  # noqa: E402
from support.stores import MYSQL_SERVER, NO_MODEL, empty_mysql_tables, make_settings  # noqa: E402

IMPLY_SLOW = ("browser", "processes", "mysql")

# Parametrised matrices whose every case opens a knowledge base to check one more input on the same code path:
# the inner loop runs every n-th case (the first included), the full suite all of them. A renamed test drops out
# of this table and simply runs in full.
SAMPLED_IN_INNER_LOOP = {
    ("test_documents.py", "test_hostile_file_names_are_refused_and_leave_nothing"): 4,
    ("test_documents.py", "test_invalid_categories_are_refused"): 3,
    ("test_documents.py", "test_failed_upload_leaves_nothing_behind"): 2,
    ("test_documents.py", "test_failed_replacement_restores_the_previous_version"): 2,
    ("test_hostile_input.py", "test_reserved_and_look_alike_names_are_refused"): 3,
    ("test_tool.py", "test_bad_arguments_give_a_readable_error_result"): 3,
    ("test_crash_safety.py", "test_rerun_raised_from_progress_leaves_the_stores_agreeing"): 5,
    ("test_embedding.py", "test_fast_encoder_matches_flagembedding_reference"): 2,
}


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects
def pytest_collection_modifyitems(config, items):
    """One inner loop: `pytest -m "not slow"`. A test using the real MariaDB (the mysql param of `db_url`, or
    `mysql_database`) is marked mysql; every browser, processes and mysql test is slow too; so are the cases
    of SAMPLED_IN_INNER_LOOP that the inner loop skips."""
    seen: dict[tuple[str, str], int] = {}
    for item in items:
        if "mysql_database" in getattr(item, "fixturenames", ()) and not item.get_closest_marker("mysql"):
            item.add_marker(pytest.mark.mysql)
        if item.get_closest_marker("slow"):
            continue
        if any(item.get_closest_marker(m) for m in IMPLY_SLOW):
            item.add_marker(pytest.mark.slow)
            continue
        key = (item.path.name, getattr(item, "originalname", item.name))
        if key in SAMPLED_IN_INNER_LOOP:
            seen[key] = seen.get(key, -1) + 1
            if seen[key] % SAMPLED_IN_INNER_LOOP[key]:
                item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _no_folder_watcher_unless_asked(monkeypatch):
    """app.py turns the watcher on with os.environ.setdefault, which would outlive an AppTest run and start
    watchers in later tests (a watcher's catch-up deletes rows whose file is gone, racing the test). Tests
    of the watcher ask for it explicitly."""
    monkeypatch.setenv("KB_WATCH", "0")


@pytest.fixture
def sample_root(tmp_path: Path) -> Path:
    """An application root holding a copy of the shipped sample knowledge base."""
    shutil.copytree(SAMPLE_KB, tmp_path / "knowledge_base")
    return tmp_path


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    """A random-weight BGE-M3-shaped model, built offline once per session (real FlagEmbedding loading code)."""
    from kb_core.testing import build_tiny_bge_m3

    return build_tiny_bge_m3(tmp_path_factory.getbasetemp() / "models" / "tiny-bge-m3")


@pytest.fixture(scope="session")
def mysql_database():
    """A throwaway database on the MariaDB/MySQL server, dropped after the session. Never skipped:
    `.ci/run` starts MariaDB; set KB_TEST_MYSQL_URL to use another server."""
    from sqlalchemy import create_engine, text

    name = f"kb_test_{uuid.uuid4().hex[:10]}"
    engine = create_engine(f"{MYSQL_SERVER}/?charset=utf8mb4", pool_pre_ping=True)
    try:
        with engine.connect() as connection:
            connection.execute(text(f"CREATE DATABASE {name} CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"))
    except Exception as exc:  # noqa: BLE001
        pytest.fail(f"MariaDB/MySQL is not reachable at {MYSQL_SERVER} ({exc}); start it with "
                    "`start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd`")
    yield f"{MYSQL_SERVER}/{name}?charset=utf8mb4"
    with engine.connect() as connection:
        connection.execute(text(f"DROP DATABASE IF EXISTS {name}"))
    engine.dispose()

@pytest.fixture(params=["sqlite", pytest.param("mysql", marks=pytest.mark.mysql)])
def db_url(request, tmp_path) -> str:
    """Each storage test runs on SQLite and on the real MariaDB server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'kb.sqlite3'}"
    url = request.getfixturevalue("mysql_database")
    empty_mysql_tables(url)
    return url


@pytest.fixture
def open_kb(tmp_path):
    """The one factory of a test's `KnowledgeBase` on real stores, closed after the test:
    `open_kb(root=None, *, tree=None, files=None, reconcile=False, uploads=None, **settings)`.

    `root` defaults to the test's tmp_path; `tree` is a folder copied to root/knowledge_base first, `files` maps
    paths under root to the text written there (in order); the knowledge base opens on `make_settings(root,
    **settings)` (SQLite and Milvus Lite under root, no model unless `model=`), waits for its model, reconciles
    if `reconcile`, then uploads each `(name, data, category)` of `uploads`."""
    from kb_core.bootstrap import open_knowledge_base, parts_of

    opened = []

    def _open(root: Path | None = None, *, tree: Path | None = None, files: Mapping[str, str] | None = None,
              reconcile: bool = False, uploads: Iterable[tuple[str, bytes, str]] = (), **settings):
        root = root or tmp_path
        if tree is not None:
            shutil.copytree(tree, root / "knowledge_base")
        for relative, text in (files or {}).items():
            write_doc(root, relative, text)
        kb = open_knowledge_base(make_settings(root, **settings))
        opened.append(kb)
        if parts_of(kb).embedder.available:
            parts_of(kb).embedder.wait_ready(120)
        if reconcile:
            kb.documents.reconcile()
        for name, data, category in uploads:
            kb.documents.upload(name, data, category)
        return kb

    yield _open
    for kb in opened:
        kb.close()


@pytest.fixture
def store(db_url):
    """A migrated metadata store on SQLite and on MariaDB."""
    from kb_core.storage.metadata_store import MetadataStore

    opened = MetadataStore(db_url)
    opened.migrate()
    yield opened
    opened.dispose()


@pytest.fixture
def app_root(monkeypatch, tmp_path):
    """Environment for the console under AppTest: a tmp app root, no model, no watcher, a fresh cache."""
    import streamlit as st

    monkeypatch.setenv("KB_APP_ROOT", str(tmp_path))
    monkeypatch.setenv("KB_EMBEDDING_MODEL", NO_MODEL)
    # app.py's default would outlive the test in os.environ; the watcher has its own test below
    monkeypatch.setenv("KB_WATCH", "0")
    for name in ("KB_DATABASE_URL", "KB_MILVUS_URI", "KB_BASE_PATH", "KB_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    st.cache_resource.clear()  # the cache outlives AppTest runs in one process
    yield tmp_path
    st.cache_resource.clear()


@pytest.fixture
def synced_sample(app_root, sample_root):
    """The shipped sample (copied into the same tmp root), synced into the stores the app will open."""
    from kb_core import load_settings, open_knowledge_base

    kb = open_knowledge_base(load_settings())
    kb.documents.reconcile()
    kb.close()
    return app_root

