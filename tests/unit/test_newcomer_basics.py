"""What a newcomer hit first: a process started in the wrong folder answered "not found" in silence,
documents were private whatever the umask, secrets were not git-ignored, Streamlit's watcher flooded the log."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from support.documents import doc
from support.paths import REPO
from support.stores import NO_MODEL


def _env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KB_") or k == "KB_L0_SNAPSHOT_KEY_FILE"}
    return {**env, "KB_EMBEDDING_MODEL": NO_MODEL, "KB_EMBEDDING_FALLBACK": "none", "KB_WATCH": "false"}


@pytest.mark.processes
def test_kb_lookup_in_a_folder_without_documents_says_where_it_looked(tmp_path):
    """Run twice: the first run finds no folder (and makes it), the second an empty one (answered from the
    snapshot of the empty folder the first run saved, which must load)."""
    warnings = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-m", "kb_core.cli", "lookup", "ERR_TIMEOUT"], cwd=tmp_path,
                              env=_env(tmp_path), capture_output=True, text=True, timeout=120)
        assert '"found": false' in done.stdout
        warnings.append([line for line in done.stderr.splitlines() if "knowledge base folder" in line])
        assert "snapshot" not in done.stderr or "not usable" not in done.stderr, done.stderr
    assert len(warnings[0]) == 1 and "did not exist (created empty)" in warnings[0][0]
    assert len(warnings[1]) == 1 and "holds no Markdown documents" in warnings[1][0]
    assert all(str(tmp_path) in w[0] and "KB_APP_ROOT" in w[0] for w in warnings)


@pytest.mark.processes
def test_lookup_knowledge_s_first_call_warns_of_an_empty_folder(tmp_path):
    code = "from kb_core import lookup_knowledge; print(lookup_knowledge('ERR_TIMEOUT')['found'])"
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=_env(tmp_path), capture_output=True,
                          text=True, timeout=120)
    assert done.stdout.strip() == "False"
    assert f"the knowledge base folder {tmp_path / 'knowledge_base'} did not exist" in done.stderr


def test_status_names_an_empty_folder_first_and_forgets_it_once_there_are_documents(open_kb, tmp_path):
    kb = open_kb()
    problems = kb.status(max_age=0).problems
    assert problems and str(tmp_path / "knowledge_base") in problems[0] and str(tmp_path) in problems[0]
    kb.documents.upload("timeouts.md", doc("Timeouts", ["ERR_TIMEOUT"]).encode(), "api")
    assert not any("knowledge base folder" in p for p in kb.status(max_age=0).problems)


@pytest.mark.parametrize("mask", [0o022, 0o027, 0o077])
def test_documents_are_written_with_the_process_umask(open_kb, tmp_path, mask):
    kb = open_kb()
    old = os.umask(mask)
    try:
        kb.documents.upload("timeouts.md", doc("Timeouts", ["ERR_TIMEOUT"]).encode(), "api")
    finally:
        os.umask(old)
    path = tmp_path / "knowledge_base" / "api" / "timeouts.md"
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask


def test_a_replaced_document_keeps_its_own_mode(open_kb, tmp_path):
    kb = open_kb()
    kb.documents.upload("timeouts.md", doc("Timeouts", ["ERR_TIMEOUT"]).encode(), "api")
    path = tmp_path / "knowledge_base" / "api" / "timeouts.md"
    path.chmod(0o664)  # a team's shared checkout
    kb.documents.upload("timeouts.md", doc("Timeouts", ["ERR_TIMEOUT", "E504"]).encode(), "api")
    assert stat.S_IMODE(path.stat().st_mode) == 0o664 and "E504" in path.read_text()


def test_secrets_and_local_settings_are_git_ignored_and_the_example_loads(tmp_path):
    done = subprocess.run(["git", "-C", str(REPO), "check-ignore", "--no-index", ".streamlit/secrets.toml",
                           "kb.yaml"], capture_output=True, text=True)
    assert done.stdout.split() == [".streamlit/secrets.toml", "kb.yaml"]
    assert subprocess.run(["git", "-C", str(REPO), "check-ignore", "--no-index", "kb.example.yaml"]).returncode == 1
    from kb_core import load_settings

    settings = load_settings(app_root=tmp_path, config_file=REPO / "kb.example.yaml")
    assert settings.base_path == "knowledge_base/" and settings.trash_days == 30
    assert settings.resolved_database_url == f"sqlite:///{tmp_path}/kb.sqlite3"


def test_streamlit_watches_the_source_files_only():
    """The default watcher puts a recursive inotify watch on app.py's folder, where the stores write all the
    time; polling watches each source file."""
    config = tomllib.loads((REPO / ".streamlit" / "config.toml").read_text())
    assert config["server"]["fileWatcherType"] == "poll"


def test_a_flood_of_one_message_is_counted_not_repeated():
    import logging

    from kb_core.ops.logs import RepeatFilter

    now = [100.0]
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record):
            lines.append(record.getMessage())

    handler = Collect()
    handler.addFilter(RepeatFilter(60.0, clock=lambda: now[0]))
    log = logging.getLogger("kb_core.test_repeat")
    log.addHandler(handler)
    log.propagate = False
    try:
        for i in range(5):
            log.warning("queue overflowed below %s", f"/srv/kb/{i}")
        log.warning("another message")  # another kind: never held back
        now[0] += 61
        log.warning("queue overflowed below %s", "/srv/kb/5")
    finally:
        log.removeHandler(handler)
    assert lines == ["queue overflowed below /srv/kb/0", "another message",
                     "queue overflowed below /srv/kb/5 (and 4 more like it in the last 60 s)"]


def test_every_file_the_embedded_defaults_write_beside_app_py_is_git_ignored(open_kb, tmp_path):
    """A newcomer's `git status` after using the console shows nothing of the stores (a Milvus Lite lock file,
    kb_milvus.db.writes, was not ignored): every name an open, a reconcile, an upload, a delete and a close
    leave in the application root is."""
    kb = open_kb(files={"knowledge_base/ops/a.md": doc("Runbook A", ["RUNBOOK_A"])}, reconcile=True)
    kb.documents.upload("b.md", doc("Runbook B", ["RUNBOOK_B"]).encode(), "ops")
    kb.documents.delete(next(d.id for d in kb.documents.list() if d.file_path.endswith("/b.md")))
    kb.close()
    left = sorted(p.name + ("/" if p.is_dir() else "") for p in tmp_path.iterdir() if p.name != "knowledge_base")
    assert "kb_milvus.db/" in left and "kb.sqlite3" in left  # the stores wrote here: this test checks something
    done = subprocess.run(["git", "-C", str(REPO), "check-ignore", "--no-index", *left], capture_output=True,
                          text=True)
    assert sorted(done.stdout.split()) == left
