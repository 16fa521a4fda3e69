from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

# The L0 snapshot key (kb_core/retrieval/snapshot_key.py) of the test processes and their children: not the
# user's own in ~/.config, and one for the whole run, so that a child process reads the parent's snapshots.
if not os.environ.get("KB_L0_SNAPSHOT_KEY_FILE", "").strip():
    os.environ["KB_L0_SNAPSHOT_KEY_FILE"] = str(Path(__import__("tempfile").gettempdir())
                                                / f"kb-test-l0-snapshot-{os.getuid()}.key")

from kb_core import L1Hit  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
SAMPLE_KB = REPO / "knowledge_base"


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


def write_doc(root: Path, relative: str, text: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def doc(title: str, keywords: list[str], summary: str = "summary", body: str = "# Body\n") -> str:
    return f"---\ntitle: {title}\nkeywords: [{', '.join(keywords)}]\nsummary: {summary}\n---\n\n{body}"


class RecordingL1:
    """A fake L1 searcher for the lookup logic's unit tests: returns canned hits and records every call."""

    def __init__(self, hits: list[L1Hit] | None = None, error: Exception | None = None):
        self.hits = hits or []
        self.error = error
        self.calls: list[tuple[str, int, str | None]] = []

    def search(self, query: str, top_k: int = 3, category: str | None = None) -> list[L1Hit]:
        self.calls.append((query, top_k, category))
        if self.error is not None:
            raise self.error
        return list(self.hits[:top_k])


# -- storage fixtures ------------------------------------------------------------------------------------
import os  # noqa: E402
import uuid  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Tests that name a missing model mean "BM25 only"; the built-in stand-in (issue 31) is tested on purpose
# where it is the subject (test_builtin_model.py), and subprocesses inherit this.
os.environ.setdefault("KB_EMBEDDING_FALLBACK", "none")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# The console's own .streamlit/config.toml binds 127.0.0.1, but AppTest reads it only when pytest runs from the
# checkout: state it for any working directory (tests/test_exposure.py sets other addresses on purpose).
os.environ.setdefault("STREAMLIT_SERVER_ADDRESS", "127.0.0.1")

MYSQL_SERVER = os.environ.get("KB_TEST_MYSQL_URL", "mysql+pymysql://root@127.0.0.1:3306")
NO_MODEL = "no-such-org/no-such-model"  # not a folder, not in the hub cache: BM25 only


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    """A random-weight BGE-M3-shaped model, built offline once per session (real FlagEmbedding loading code)."""
    from model_factory import build_tiny_bge_m3

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


def _empty_mysql_tables(url: str) -> None:
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    with engine.begin() as connection:
        for table in ("tool_call", "tool_call_dropped", "query_history", "api_document", "kb_change", "kb_job",
                      "eval_query", "eval_run", "eval_outcome", "alembic_version"):
            connection.execute(text(f"DROP TABLE IF EXISTS {table}"))
    engine.dispose()


@pytest.fixture(params=["sqlite", pytest.param("mysql", marks=pytest.mark.mysql)])
def db_url(request, tmp_path) -> str:
    """Each storage test runs on SQLite and on the real MariaDB server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'kb.sqlite3'}"
    url = request.getfixturevalue("mysql_database")
    _empty_mysql_tables(url)
    return url


def make_settings(root: Path, *, db_url: str | None = None, model: str = NO_MODEL, **extra):
    from kb_core import load_settings

    return load_settings(
        app_root=root,
        database_url=db_url or f"sqlite:///{root / 'kb.sqlite3'}",
        milvus_uri=str(root / "kb_milvus.db"),
        embedding_model=model,
        **extra,
    )


@pytest.fixture
def open_kb(tmp_path):
    """Opens KnowledgeBase objects on real stores and closes them after the test."""
    from kb_core.bootstrap import open_knowledge_base

    opened = []

    def _open(root: Path | None = None, **kwargs):
        root = root or tmp_path
        kb = open_knowledge_base(make_settings(root, **kwargs))
        if internals(kb).embedder.available:
            internals(kb).embedder.wait_ready(120)
        opened.append(kb)
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


@contextlib.contextmanager
def bare_lite_holder(directory: Path):
    """Another process holding a Milvus Lite directory the way a notebook would (a bare MilvusClient), without
    sharing it."""
    import subprocess
    import sys

    holder = subprocess.Popen(
        [sys.executable, "-c", "import time\nfrom pymilvus import MilvusClient\n"
         f"MilvusClient({str(directory)!r})\nprint('open', flush=True)\ntime.sleep(60)\n"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        yield holder
    finally:
        holder.kill()
        holder.wait()


@contextlib.contextmanager
def two_knowledge_bases(root: Path, db_url: str, *, refresh_interval: float):
    """A and B on one database and one knowledge-base folder, each with its own Milvus Lite directory: L0 is
    per process, the change feed lives in the database. `refresh_interval=0`: they follow only when polled."""
    from kb_core.bootstrap import open_knowledge_base

    opened = []
    try:
        for name in ("a", "b"):
            settings = make_settings(root, db_url=db_url, refresh_interval=refresh_interval).model_copy(
                update={"milvus_uri": str(root / f"{name}_milvus.db")})
            opened.append(open_knowledge_base(settings))
        yield opened
    finally:
        for kb in opened:
            kb.close()


def assert_consistent(kb) -> None:
    """Disk, database, Milvus and L0 agree, checked by looking at each store itself."""
    import hashlib
    import json as _json

    from kb_core.retrieval.keyword_index import split_keywords

    rows = internals(kb).metadata.list_documents()
    by_path = {r.file_path: r for r in rows}
    disk = {internals(kb).folder.display_path(rel) for rel in internals(kb).folder.markdown_files()}
    assert disk == set(by_path), f"disk {sorted(disk)} != database {sorted(by_path)}"
    leftovers = [p.name for p in internals(kb).folder.base_dir.rglob(".*.tmp")]
    assert leftovers == [], f"temporary files left behind: {leftovers}"
    for row in rows:
        data = internals(kb).folder.resolve(row.file_path).read_bytes()
        assert hashlib.sha256(data).hexdigest() == row.content_sha256, f"{row.file_path} differs from its row"
        chunks = internals(kb).vectors.chunks_of(row.id)
        assert len(chunks) == row.chunk_count, f"{row.file_path}: {len(chunks)} in Milvus, {row.chunk_count} in row"
        assert all(c.source == row.file_path for c in chunks)
    assert internals(kb).vectors.document_ids() == {r.id for r in rows}
    l0 = {e.file_path: e for e in internals(kb).index.entries()}
    with_frontmatter = {r.file_path: _json.loads(r.metadata_json) for r in rows if r.metadata_json}
    assert set(l0) == set(with_frontmatter), f"L0 {sorted(l0)} != rows with frontmatter {sorted(with_frontmatter)}"
    for path, meta in with_frontmatter.items():
        kept, _ignored = split_keywords(tuple(meta["keywords"]))
        assert l0[path].keywords == kept
    pending = [(r.file_path, r.pending_operation) for r in rows if r.pending_operation or r.status != "INDEXED"]
    assert pending == [], f"rows still pending or failed: {pending}"
    counts = {r.id: r.chunk_count for r in rows}
    beyond = [(d, c) for d, c in internals(kb).vectors.chunk_keys() if d not in counts or c >= counts[d]]
    assert beyond == [], f"vectors without a row or beyond the row's chunk count: {beyond[:10]}"


def internals(kb):
    """The stores behind a `KnowledgeBase` facade, for tests that check each store itself (the facade keeps
    them private): index (L0), folder, metadata, vectors, embedder, documents (the writer), reconciler,
    follower, watcher, summaries, trash and jobs (the job runner)."""
    from types import SimpleNamespace

    return SimpleNamespace(**{name: getattr(kb, f"_{name}") for name in (
        "index", "folder", "metadata", "vectors", "embedder", "documents", "reconciler", "follower", "watcher",
        "summaries", "trash", "jobs")})


# -- the console under AppTest (shared by the page tests) ----------------------------------------------------------
APP = str(Path(__file__).resolve().parent / "app_entry.py")


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
    kb.reconcile()
    kb.close()
    return app_root


def run_page(page: str, **session):
    """The app after one run, switched to `page` (a file under pages/, or "playground")."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=60)
    for key, value in session.items():
        at.session_state[key] = value
    at.run()
    if page != "playground":
        at.switch_page(f"../pages/{page}.py").run()
    return at


# Sign-in configured (st.login's secrets, an OpenID provider nobody reaches: AppTest sets the user itself)
SIGNIN_AUTH = {"redirect_uri": "http://localhost:8501/oauth2callback", "cookie_secret": "x" * 32,
               "client_id": "kb-console", "client_secret": "s" * 16,
               "server_metadata_url": "http://localhost:1/.well-known/openid-configuration"}


def signed_in_page(page: str, monkeypatch, email: str, role: str):
    """The app after one run as `email` signed in with `role` (`KB_ROLES`), switched to `page` (under pages/)."""
    import json

    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("KB_ROLES", json.dumps({email: role}))
    at = AppTest.from_file(APP, default_timeout=60)
    at.secrets["auth"] = SIGNIN_AUTH
    at.user = {"is_logged_in": True, "email": email, "email_verified": True}
    at.run()
    at.switch_page(f"../pages/{page}.py").run()
    return at


def wait_for_jobs(root: Path, timeout: float = 120) -> None:
    """Wait until no job of the knowledge base at `root` (its default SQLite file) is queued or running: the
    console's jobs run on their worker thread, after the script run that started them. Read from the database,
    as another process would."""
    from kb_core.jobs.store import JobStore
    from kb_core.storage.metadata_store import MetadataStore

    store = MetadataStore(f"sqlite:///{root / 'kb.sqlite3'}")
    try:
        jobs = JobStore(store)
        deadline = time.monotonic() + timeout
        while active := jobs.active():
            if time.monotonic() > deadline:
                pytest.fail(f"jobs still active after {timeout:.0f} s: {active}")
            time.sleep(0.05)
    finally:
        store.dispose()


def finish_jobs(at, root: Path | None = None):
    """Let the jobs a click started finish, then run the page again (what the panel's refresh does in a
    browser: AppTest runs no timers). `root`: the console's application root (default KB_APP_ROOT)."""
    wait_for_jobs(root or Path(os.environ["KB_APP_ROOT"]))
    at.run()
    assert not at.exception, at.exception
    return at


def shown(markdown: str) -> str:
    """The text a Markdown value shows once its backslash escapes are read (pages/shell/safe.py escapes what
    documents, queries and messages bring)."""
    import re

    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", markdown)


def look_up(at, query: str):
    """Type a query into the playground and press "Look up"."""
    at.text_input(key="query").set_value(query)
    next(b for b in at.button if b.label == "Look up").click().run()  # the form's submit button
    assert not at.exception, at.exception
    return at


def history_shown(at) -> list[str]:
    """The playground's history as it shows it, newest first: each run's query as inline code, with
    " · section `…`" when it asked for one (the history is the acting user's, from the database)."""
    boxes = [e for e in at.expander if e.label.startswith("History")]
    return [m.value for m in boxes[0].markdown] if boxes else []


# -- a real browser against `streamlit run app.py` (the browser and three-process tests) -------------------------
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
VIEWPORT = {"width": 1400, "height": 1000}


@contextlib.contextmanager
def chromium_page(timeout_ms: float, *extra_args: str):
    """A page of Debian's chromium driven by playwright (which never downloads a browser of its own), at VIEWPORT,
    every wait bounded by `timeout_ms`; chromium is closed on the way out, even on failure."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium with `apt-get install chromium` "
                    "(playwright must not download a browser of its own)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=[*CHROMIUM_ARGS, *extra_args])
        try:
            context = browser.new_context(viewport=VIEWPORT)
            context.set_default_timeout(timeout_ms)
            yield context.new_page()
        finally:
            browser.close()


def show_job_changes(page, shown, timeout_ms: float) -> None:
    """Wait until the page shows `shown` (a locator), which a job this tab started changes. The jobs panel does
    not redraw the page by itself when a job ends (pages/shell/jobs_panel.py): if the job ended after the page
    was drawn, the panel offers "Show the changes", pressed here; if it ended before, the page shows it already
    and no button comes (the panel stops refreshing once no job is active)."""
    from playwright.sync_api import expect

    button = page.get_by_role("button", name="Show the changes")
    expect(shown.or_(button).first).to_be_visible(timeout=timeout_ms)
    if not shown.first.is_visible():
        button.click()
    expect(shown.first).to_be_visible(timeout=timeout_ms)
    expect(button).to_have_count(0)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_healthy(url: str, server: subprocess.Popen, log: Path, deadline_s: float = 60) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"streamlit exited with {server.returncode}:\n{log.read_text(errors='replace')}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200 and response.read().strip() == b"ok":
                    return
        except OSError:
            pass
        time.sleep(0.5)
    pytest.fail(f"streamlit did not become healthy within {deadline_s:.0f} s:\n{log.read_text(errors='replace')}")


# -- one `streamlit run app.py` for the process tests (browser, sign-in, exposure) ------------------------------
STALE_ENV = ("KB_DATABASE_URL", "KB_MILVUS_URI", "KB_BASE_PATH", "KB_CONFIG")  # would point at another KB


def server_env(root: Path, *, drop_prefixes: tuple[str, ...] = (), **extra: str) -> dict[str, str]:
    """The environment of a console (or of the process that syncs its root first) over `root`: this one's, without
    STALE_ENV and the variables starting with one of `drop_prefixes`, BM25 only and offline, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if k not in STALE_ENV and not k.startswith(drop_prefixes)}
    env.update(KB_APP_ROOT=str(root), KB_EMBEDDING_MODEL=NO_MODEL, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env.update(extra)
    return env


def sync_root(env: dict[str, str]) -> None:
    """Reconcile the knowledge base `env` names in a process of its own, before a server opens it (Milvus Lite
    admits one process at a time, and the server must be the one holding it)."""
    done = subprocess.run([sys.executable, "-c", "from kb_core import open_knowledge_base as o; o().reconcile()"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


@dataclass(frozen=True)
class Served:
    port: int
    url: str  # http://127.0.0.1:<port>
    log: Path  # the server's stdout and stderr


@contextlib.contextmanager
def streamlit_server(tmp_path: Path, env: dict[str, str], *, port: int | None = None,
                     address: str | None = "127.0.0.1", args: Sequence[str] = ()) -> Iterator[Served]:
    """`streamlit run app.py` from the checkout (its .streamlit/config.toml applies) in `env` (see server_env) on
    `port` (a free one by default) and `address` (None: no option, the config file's), headless, no file watcher,
    plus `args`; yielded once its health check answers. Its output goes to `tmp_path/streamlit-<port>.log`, shown
    when it does not come up and added to the error of a test that fails while it runs. On the way out, even on
    failure, it is stopped (SIGTERM, then SIGKILL for its whole process group) and waited for: the port is free."""
    port = port or free_port()
    log = tmp_path / f"streamlit-{port}.log"
    command = [sys.executable, "-m", "streamlit", "run", str(REPO / "app.py"), "--server.headless", "true",
               "--server.port", str(port), "--browser.gatherUsageStats", "false",
               "--server.fileWatcherType", "none",  # no reruns or banners while someone edits the checkout
               *(["--server.address", address] if address else []), *args]
    with log.open("wb") as out:
        proc = subprocess.Popen(command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)  # a group of its own: nothing it starts outlives it
    failed: BaseException | None = None
    try:
        wait_healthy(f"http://127.0.0.1:{port}/_stcore/health", proc, log)
        try:
            yield Served(port=port, url=f"http://127.0.0.1:{port}", log=log)
        except BaseException as exc:
            failed = exc
            raise
    finally:
        _stop(proc)
        if failed is not None and not isinstance(failed, GeneratorExit):
            failed.add_note(f"streamlit's log ({log}), its end:\n{log.read_text(errors='replace')[-4000:]}")


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()  # a clean shutdown first: a test may read the log for tracebacks afterwards
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # the server if it hung, and anything of its group left behind
    proc.wait(timeout=15)


# -- who can reach a listening socket (loopback by default: issue 22) ----------------------------------------------
def machine_addresses() -> list[str]:
    """This machine's non-loopback IP addresses (`hostname -I`): what other machines would connect to."""
    import ipaddress

    found = subprocess.run(["hostname", "-I"], capture_output=True, text=True, check=False).stdout.split()
    return [a for a in found if not ipaddress.ip_address(a.split("%")[0]).is_loopback]


def listening_addresses(port: int) -> set:
    """The local addresses of the TCP sockets listening on `port` (from /proc/net/tcp and tcp6), IPv4-mapped IPv6
    addresses as IPv4."""
    import ipaddress

    found = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            local, state = fields[1], fields[3]
            ip_hex, port_hex = local.split(":")
            if state != "0A" or int(port_hex, 16) != port:  # 0A: LISTEN
                continue
            raw = bytes.fromhex(ip_hex)  # host byte order per 32-bit word
            words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
            ip = ipaddress.ip_address(words)
            found.add(getattr(ip, "ipv4_mapped", None) or ip)  # gRPC binds 127.0.0.1 as ::ffff:127.0.0.1
    return found


# -- a document that tries to make the browser load something (nothing remote from content: issue 22) -------------
HOSTILE_KEYWORD = "HOSTILE_KW"
HOSTILE_PATH = "knowledge_base/api/hostile.md"


def hostile_fields(beacon: str) -> dict:
    """Frontmatter whose title, keywords, summary and section names each carry an image of `beacon` (a base URL
    such as http://127.0.0.1:PORT) and a backtick or `]` that would break out of a code span or a badge."""
    return {
        "title": f"Hostile ![title]({beacon}/title.png) `tick` ]end $x$",
        "keywords": [HOSTILE_KEYWORD, f"k`![kw]({beacon}/keyword.png)`]", f"![kw2]({beacon}/keyword2.png)",
                     f"<img src=x onerror=\"fetch('{beacon}/onerror-keyword')\">"],
        "summary": f"Summary ![summary]({beacon}/summary.png) :red[red] <b>bold</b>",
        "sections": {f"![section]({beacon}/section.png) `s`]": "Setup"},
    }


def hostile_body(beacon: str) -> str:
    """A body with every way Markdown, HTML, Streamlit's directives and KaTeX could load `beacon` or run script."""
    return (
        f"# Hostile\n\n![body]({beacon}/body.png)\n\n"
        f"![reference][logo] and ![logo]\n\n[logo]: {beacon}/reference.png\n\n"
        f"<img src=\"{beacon}/html.png\" onerror=\"fetch('{beacon}/onerror-body'); window.__pwned = 1\">\n\n"
        f"<script>fetch('{beacon}/script'); window.__pwned = 1</script>\n\n"
        f":color[styled]{{background=\"red; background-image: url({beacon}/css.png)\"}}\n\n"
        f"$\\includegraphics{{{beacon}/katex.png}}$ and $\\href{{javascript:window.__pwned=1}}{{x}}$\n\n"
        f"[![badge]({beacon}/badge.svg)](https://example.invalid/)\n\n"
        f"| a | b |\n|---|---|\n| ![cell]({beacon}/cell.png) | x |\n\n"
        f"## Setup\n\nSetup text ![inline]({beacon}/setup.png) about {HOSTILE_KEYWORD}.\n\n"
        f"## ![heading]({beacon}/heading.png) Details\n\nDetails text.\n"
    )


def hostile_document(beacon: str) -> str:
    import yaml

    front = yaml.safe_dump(hostile_fields(beacon), allow_unicode=True, sort_keys=False, width=1000)
    return f"---\n{front}---\n\n{hostile_body(beacon)}"


def hostile_queries(beacon: str) -> tuple[str, str]:
    """Two `?q=` values: one that finds the hostile document by its keyword, one that no keyword answers (at most
    an L1 passage, so it is listed under "Needs attention" on the Tool calls page); both with a backtick, an
    image and a `]`."""
    return (f"{HOSTILE_KEYWORD} `![query]({beacon}/query.png)` ]",
            f"`![nothing]({beacon}/nothing.png)` ] :red[x]")


def _backtick_run(text: str, at: int) -> int:
    return len(text[at:]) - len(text[at:].lstrip("`"))


def outside_code(markdown: str) -> str:
    """`markdown` without its code spans (CommonMark: a backtick run up to the next run of the same length;
    backslash escapes outside them), where `![` is text and starts no image."""
    out, i = [], 0
    while i < len(markdown):
        char = markdown[i]
        if char == "\\":
            out.append(markdown[i:i + 2])
            i += 2
            continue
        if char != "`":
            out.append(char)
            i += 1
            continue
        run, j, close = _backtick_run(markdown, i), i + _backtick_run(markdown, i), None
        while j < len(markdown) and close is None:
            if markdown[j] == "`":
                close = j if _backtick_run(markdown, j) == run else None
                j += _backtick_run(markdown, j)
            else:
                j += 1
        if close is None:  # no closing run: literal backticks
            out.append("`" * run)
            i += run
        else:
            i = close + run
    return "".join(out)
