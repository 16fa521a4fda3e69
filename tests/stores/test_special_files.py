"""Special files, aliases and portable names: a FIFO, socket or folder where a document
should be is a clear error within milliseconds and never holds a lock; every MCP call has a deadline; one file
has one path (links and hard links are skipped, never indexed twice, never the reason a file is lost); names that
break a checkout on other systems are refused. Each test has a deadline, so a regression fails instead of hanging.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import socket
import threading
import time
from pathlib import Path

import pytest
from support.documents import doc
from support.stores import assert_consistent

from kb_core.bootstrap import parts_of
from kb_core.documents.folder import KnowledgeFolder, checked_sha256, read_regular
from kb_core.documents.path_rule import validate_category, validate_file_name
from kb_core.errors import FileTooLarge, InvalidInputError, UploadRejected

pytestmark = pytest.mark.timeout(60)

SECTIONED = doc("Alpha", ["ALPHA_KEY"], body="# Alpha\n\nIntro.\n\n## Setup\n\nStep one.\n\n## Usage\n\nCall it.\n")


@pytest.fixture
def kb(open_kb):
    return open_kb()


def _base(kb) -> Path:
    return parts_of(kb).folder.base_dir


def _quick(action, limit: float = 3.0):
    """Run `action`, return (result or exception, seconds), and fail if it took longer than `limit`."""
    started = time.perf_counter()
    try:
        result = action()
    except Exception as exc:  # noqa: BLE001 - the caller looks at what came back
        result = exc
    elapsed = time.perf_counter() - started
    assert elapsed < limit, f"took {elapsed:.1f} s"
    return result


def _special(path: Path, kind: str) -> object:
    """Something at `path` that is not a regular file; returns what keeps it alive (a bound socket)."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    else:
        holder = socket.socket(socket.AF_UNIX)
        try:
            holder.bind(str(path))
        except OSError:  # a long tmp path exceeds the socket path limit
            holder.close()
            pytest.skip("socket path too long here")
        return holder
    return None


# -- 1. regular files only -------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["fifo", "socket", "folder"])
def test_an_upload_onto_a_special_file_is_refused_at_once_and_holds_no_lock(kb, kind):
    (_base(kb) / "api").mkdir(parents=True)
    keep = _special(_base(kb) / "api" / "p.md", kind)
    try:
        refused = _quick(lambda: kb.documents.upload("p.md", doc("P", ["P_KEY"]).encode(), "api"), 1.0)
        assert isinstance(refused, UploadRejected) and "not a regular file" in str(refused)
        preview = _quick(lambda: kb.documents.preview_upload("p.md", doc("P", ["P_KEY"]).encode(), "api"))
        assert not preview.can_upload and any("not a regular file" in f.message for f in preview.findings)
        # no lock is held: a write from another thread goes through at once
        done: list[str] = []
        writer = threading.Thread(target=lambda: done.append(
            kb.documents.upload("q.md", doc("Q", ["Q_KEY"]).encode(), "api").action))
        writer.start()
        writer.join(timeout=10)
        assert done == ["indexed"]
        assert [d.file_name for d in kb.documents.list()] == ["q.md"]
        assert os.path.lexists(_base(kb) / "api" / "p.md")  # what the user put there is left alone
    finally:
        if keep is not None:
            keep.close()


def test_a_document_replaced_by_a_fifo_never_hangs_a_reader(kb):
    kb.documents.upload("a.md", SECTIONED.encode(), "api")
    row = kb.documents.list()[0]
    path = _base(kb) / "api" / "a.md"
    path.unlink()
    os.mkfifo(path)
    for section in (None, "Setup"):
        answer = _quick(lambda section=section: kb.lookup_knowledge("ALPHA_KEY", section_title=section))
        assert isinstance(answer, dict) and answer["primary"] is None  # the file is not served: it is no file
    read = _quick(lambda: kb.read_document_tool(row.file_path))
    assert read["found"] is False and "no longer a regular file" in read["error"]
    assert _quick(lambda: kb.read_document_tool(row.file_path, section_title="Setup"))["found"] is False
    assert _quick(lambda: kb.documents.text(row.file_path, -1)) is None  # the inspector and its download
    assert _quick(lambda: kb.documents.text(row.file_path)) is None
    assert isinstance(_quick(lambda: kb.documents.prepare_edit(row.file_path, keywords=["x1"])), UploadRejected)
    for reconcile in (lambda: kb.documents.reconcile(), lambda: kb.documents.reconcile(delete_missing=True),
                      lambda: kb.documents.reconcile([str(path)], delete_missing=True)):
        report = _quick(reconcile, 10.0)
        assert report.failed == () and row.file_path in report.missing_files
        assert any(p == row.file_path and "not a regular file (a FIFO)" in why for p, why in report.refused)
    assert _quick(lambda: parts_of(kb).index.load(), 10.0) == 0
    assert _quick(lambda: parts_of(kb).index.refresh(row.file_path)) in (True, False)
    assert _quick(lambda: kb.status(max_age=0), 10.0) is not None
    assert kb.documents.get(row.id) is not None and os.path.lexists(path)  # the row is reported, the FIFO left alone
    # and the next write works
    assert _quick(lambda: kb.documents.upload("b.md", doc("B", ["B_KEY"]).encode(), "api").action) == "indexed"


def test_read_regular_opens_no_link_and_nothing_special(tmp_path):
    real = tmp_path / "real.md"
    real.write_bytes(b"x" * 100)
    (tmp_path / "link.md").symlink_to(real)
    os.mkfifo(tmp_path / "pipe.md")
    assert read_regular(real) == b"x" * 100
    assert read_regular(tmp_path / "link.md", follow=True) == b"x" * 100
    for special, why in (("link.md", "is a link"), ("pipe.md", "not a regular file \\(a FIFO\\)")):
        started = time.perf_counter()
        with pytest.raises(OSError, match=why):
            read_regular(tmp_path / special)
        assert time.perf_counter() - started < 1
    with pytest.raises(FileTooLarge, match="KB_MAX_UPLOAD_BYTES"):
        read_regular(real, max_bytes=99)
    assert read_regular(real, 10, max_bytes=100) == b"x" * 10


def test_a_file_larger_than_the_largest_document_is_never_read_whole(open_kb):
    kb = open_kb(max_upload_bytes=64 * 1024)
    big = _base(kb) / "api" / "big.md"
    big.parent.mkdir(parents=True)
    big.write_text(doc("Big", ["BIG_KEY"], body="word " * 30_000), encoding="utf-8")
    kb.documents.upload("small.md", doc("Small", ["SMALL_KEY"]).encode(), "api")
    report = kb.documents.reconcile()
    assert report.failed == () and report.added == ()
    assert any("KB_MAX_UPLOAD_BYTES" in why for p, why in report.refused if p.endswith("api/big.md"))
    assert kb.documents.text("knowledge_base/api/big.md") is None
    assert not kb.lookup_knowledge("BIG_KEY")["found"]
    assert_consistent(kb)


# -- every MCP call has a deadline --------------------------------------------------------------------------
def _call_all(server, calls):
    from mcp import Client

    async def run():
        async with Client(server) as client:
            return await asyncio.gather(*(client.call_tool(name, arguments) for name, arguments in calls))

    return asyncio.run(run())


def test_hanging_mcp_calls_time_out_and_later_calls_are_served(kb):
    from kb_core.mcp import build_server

    kb.documents.upload("a.md", SECTIONED.encode(), "api")
    release = threading.Event()
    real_call = kb.call_tool

    def call_tool(arguments, **kwargs):
        if arguments.get("query") == "hang":
            release.wait(60)  # what a read blocked on a FIFO looked like
        return real_call(arguments, **kwargs)

    kb.call_tool = call_tool
    server = build_server(kb, call_timeout=3.0, workers=4)
    try:
        started = time.perf_counter()
        hung = _call_all(server, [("lookup_knowledge", {"query": "hang"})] * 45)
        assert time.perf_counter() - started < 10
        assert all(r.is_error and "did not answer within 3 s" in r.content[0].text for r in hung)
        # the calls that had started run on in the background (counted); those still waiting never start
        assert 4 <= server.call_deadline.abandoned <= 45
        # the 45 still run in the background, but every worker place is free again
        started = time.perf_counter()
        served = _call_all(server, [("lookup_knowledge", {"query": "ALPHA_KEY"}),
                                    ("read_document", {"source": "api/a.md"})] * 4)
        assert time.perf_counter() - started < 5
        assert all(not r.is_error for r in served), [r.content[0].text[:200] for r in served if r.is_error]
        assert json.loads(served[0].content[0].text)["primary"]["source"] == "knowledge_base/api/a.md"
    finally:
        release.set()
    deadline = time.monotonic() + 20
    while server.call_deadline.abandoned:
        assert time.monotonic() < deadline, "abandoned calls never finished"
        time.sleep(0.05)


def test_mcp_calls_on_a_document_replaced_by_a_fifo_answer_in_time(kb):
    from kb_core.mcp import build_server

    kb.documents.upload("a.md", SECTIONED.encode(), "api")
    kb.documents.upload("b.md", doc("Beta", ["BETA_KEY"]).encode(), "api")
    path = _base(kb) / "api" / "a.md"
    path.unlink()
    os.mkfifo(path)
    server = build_server(kb, call_timeout=3.0)
    started = time.perf_counter()
    results = _call_all(server, [("read_document", {"source": "api/a.md", "section_title": "Setup"}),
                                 ("lookup_knowledge", {"query": "ALPHA_KEY", "section_title": "Setup"})] * 23
                        + [("lookup_knowledge", {"query": "BETA_KEY"})])
    assert time.perf_counter() - started < 10
    assert all(r.is_error and "no longer a regular file" in r.content[0].text for r in results[:-1:2])
    assert not any("did not answer" in r.content[0].text for r in results)
    assert json.loads(results[-1].content[0].text)["primary"]["source"] == "knowledge_base/api/b.md"
    assert server.call_deadline.abandoned == 0


# -- 2. one canonical path per file -----------------------------------------------------------------------
def test_a_linked_category_folder_is_refused_for_writes_and_skipped_once(kb, caplog):
    kb.documents.upload("a.md", doc("Alpha", ["ALPHA_KEY"]).encode(), "api")
    (_base(kb) / "alias").symlink_to(_base(kb) / "api", target_is_directory=True)
    (_base(kb) / "api" / "loop.md").symlink_to(_base(kb) / "api" / "loop.md")  # a link loop is no document either
    with pytest.raises(UploadRejected, match="is a link"):
        kb.documents.upload("b.md", doc("B", ["B_KEY"]).encode(), "alias")
    assert not (_base(kb) / "api" / "b.md").exists()
    caplog.set_level(logging.WARNING, logger="kb_core.documents.folder")
    for _ in range(3):
        report = kb.documents.reconcile(delete_missing=True)
        assert report.added == () and report.failed == ()
        assert ("knowledge_base/alias", "knowledge_base/api/loop.md") == tuple(p for p, _why in report.refused)
    assert sum("alias" in r.getMessage() and "a link to" in r.getMessage() for r in caplog.records) == 1
    assert [d.file_path for d in kb.documents.list()] == ["knowledge_base/api/a.md"]
    assert "alias" not in kb.documents.categories()
    assert_consistent(kb)


@pytest.mark.parametrize("first", ["delete", "reconcile", "watcher-sync"])
def test_a_row_left_under_a_linked_folder_never_costs_the_real_file(kb, first):
    """The issue's case: a row for `alias/b.md` where `alias` became a link to `api` (holding b.md). Deleting
    that row, or reconciling, keeps api/b.md: one row for it, under its own path."""
    base = _base(kb)
    kb.documents.upload("a.md", doc("Alpha", ["ALPHA_KEY"]).encode(), "api")
    alias_row = kb.documents.upload("b.md", doc("Beta", ["BETA_KEY"]).encode(), "alias").document
    os.replace(base / "alias" / "b.md", base / "api" / "b.md")
    (base / "alias").rmdir()
    (base / "alias").symlink_to(base / "api", target_is_directory=True)
    if first == "delete":
        assert kb.documents.delete(alias_row.id).deleted
    elif first == "reconcile":
        report = kb.documents.reconcile()
        assert report.aliases == (alias_row.file_path,) and report.added == ("knowledge_base/api/b.md",)
    else:
        report = kb.documents.reconcile([str(base / "alias"), str(base / "api" / "b.md")], delete_missing=True)
        assert report.aliases == (alias_row.file_path,)
    assert (base / "api" / "b.md").read_text(encoding="utf-8").startswith("---\ntitle: Beta")
    kb.documents.reconcile(delete_missing=True)
    assert sorted(d.file_path for d in kb.documents.list()) == ["knowledge_base/api/a.md", "knowledge_base/api/b.md"]
    assert kb.lookup_knowledge("BETA_KEY")["primary"]["source"] == "knowledge_base/api/b.md"
    assert (base / "alias").is_symlink()  # the user's link is left alone
    assert_consistent(kb)


def test_a_linked_file_is_skipped_and_a_row_left_under_it_is_dropped(kb):
    base = _base(kb)
    kb.documents.upload("a.md", doc("Alpha", ["ALPHA_KEY"]).encode(), "api")
    old = kb.documents.upload("l.md", doc("Ell", ["ELL_KEY"]).encode(), "api").document
    (base / "api" / "tmp-link").symlink_to(base / "api" / "a.md")
    os.replace(base / "api" / "tmp-link", base / "api" / "l.md")  # l.md is now a link to a.md
    with pytest.raises(UploadRejected, match="is a link"):
        kb.documents.upload("l.md", doc("Ell", ["ELL_KEY"]).encode(), "api")
    report = kb.documents.reconcile()
    assert report.aliases == (old.file_path,) and report.added == () and report.failed == ()
    assert [d.file_path for d in kb.documents.list()] == ["knowledge_base/api/a.md"]
    assert not kb.lookup_knowledge("ELL_KEY")["found"]
    assert (base / "api" / "l.md").is_symlink() and (base / "api" / "a.md").is_file()
    assert_consistent(kb)


def test_hard_links_are_one_document(kb):
    base = _base(kb)
    kb.documents.upload("a.md", doc("Alpha", ["ALPHA_KEY"]).encode(), "api")
    old = kb.documents.upload("z.md", doc("Zed", ["ZED_KEY"]).encode(), "guides").document
    os.link(base / "api" / "a.md", base / "guides" / "tmp.md")
    os.replace(base / "guides" / "tmp.md", base / "guides" / "z.md")  # z.md is now a second name of a.md
    report = kb.documents.reconcile()
    assert report.aliases == (old.file_path,)
    assert any("hard link to knowledge_base/api/a.md" in why for _p, why in report.refused)
    assert [d.file_path for d in kb.documents.list()] == ["knowledge_base/api/a.md"]
    assert_consistent(kb)
    # replacing one name writes a new file: the names part, and each is a document of its own
    kb.documents.upload("a.md", doc("Alpha 2", ["ALPHA_KEY"]).encode(), "api")
    assert kb.documents.reconcile().added == ("knowledge_base/guides/z.md",)
    assert (base / "guides" / "z.md").read_text(encoding="utf-8").startswith("---\ntitle: Alpha\n")
    assert_consistent(kb)


def test_the_watcher_skips_links_and_fifos(tmp_path):
    from support.stores import make_settings

    from kb_core.bootstrap import open_knowledge_base

    kb = open_knowledge_base(make_settings(tmp_path, watch=True, refresh_interval=0.2))
    try:
        deadline = time.monotonic() + 15
        while not parts_of(kb).watcher.is_watching:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        base = _base(kb)
        kb.documents.upload("a.md", doc("Alpha", ["ALPHA_KEY"]).encode(), "api")
        (base / "alias").symlink_to(base / "api", target_is_directory=True)
        (base / "api" / "l.md").symlink_to(base / "api" / "a.md")
        os.mkfifo(base / "api" / "pipe.md")
        os.link(base / "api" / "a.md", base / "api" / "hard.md")
        (base / "api" / "sentinel.md").write_text(doc("Sentinel", ["SENTINEL_KEY"]), encoding="utf-8")
        deadline = time.monotonic() + 20
        sentinel = "knowledge_base/api/sentinel.md"
        while parts_of(kb).metadata.get_by_path(sentinel) is None or parts_of(kb).index.get(sentinel) is None:
            assert time.monotonic() < deadline, "the watcher did not sync"
            time.sleep(0.05)
        assert parts_of(kb).watcher.last_error is None
        assert sorted(d.file_name for d in kb.documents.list()) == ["a.md", "sentinel.md"]
        assert_consistent(kb)
    finally:
        kb.close()


def test_any_mix_of_aliases_keeps_every_file_and_the_stores_agree(kb):
    """A property over random steps: uploads (some through links, refused), folder links, file links, hard links,
    a folder with indexed files turned into a link (rows left under the alias), a document turned into a link
    or a hard link to another, deletes and reconciles. After each reconcile disk, database, Milvus and L0 agree,
    no file has two rows, and no file this test wrote and did not delete itself is gone or changed.
    KB_TEST_SEED and KB_TEST_STEPS explore further (seeds 1-10 at 60 steps passed)."""
    base = _base(kb)
    rng = random.Random(int(os.environ.get("KB_TEST_SEED", "23")))
    categories = ["api", "guides", "ops/runbooks"]
    files: dict[str, str] = {}  # relative path -> content we expect there
    aliases: list[str] = []
    for step in range(int(os.environ.get("KB_TEST_STEPS", "40"))):
        action = rng.choice(["upload", "upload", "folder-link", "file-link", "hard-link", "folder-to-link",
                             "document-to-link", "delete", "reconcile"])
        if action == "upload":
            relative = f"{rng.choice(categories + aliases)}/d{rng.randrange(6)}.md"
            text = doc(f"Doc {step}", [f"KEY_{step}"])
            try:
                kb.documents.upload(relative.rsplit("/", 1)[1], text.encode(), relative.rsplit("/", 1)[0])
            except UploadRejected:
                continue  # a link is in the way: refused, nothing written
            files[relative] = text
        elif action == "folder-link":
            link = base / f"alias{step}"
            aliases.append(link.name)
            link.symlink_to(base / rng.choice(categories).split("/")[0], target_is_directory=True)
        elif action in ("file-link", "hard-link") and files:
            source = base / rng.choice(sorted(files))
            link = source.parent / f"link{step}.md"
            link.symlink_to(source) if action == "file-link" else os.link(source, link)
        elif action == "folder-to-link":
            # a folder whose document is indexed becomes a link to the category its file moved to
            category = rng.choice(categories)
            text = doc(f"Moved {step}", [f"MOVED_{step}"])
            kb.documents.upload(f"m{step}.md", text.encode(), f"old{step}")
            (base / category).mkdir(parents=True, exist_ok=True)
            os.replace(base / f"old{step}" / f"m{step}.md", base / category / f"m{step}.md")
            (base / f"old{step}").rmdir()
            (base / f"old{step}").symlink_to(base / category, target_is_directory=True)
            files[f"{category}/m{step}.md"] = text
        elif action == "document-to-link" and len(files) > 1:
            # a document's file becomes a link, or a hard link, to another document's file
            name, other = rng.sample(sorted(files), 2)
            temporary = base / name.rsplit("/", 1)[0] / f".tmp{step}"
            temporary.symlink_to(base / other) if rng.random() < 0.5 else os.link(base / other, temporary)
            os.replace(temporary, base / name)
            files.pop(name)
        elif action == "delete":
            rows = kb.documents.list()
            if rows:
                row = rng.choice(rows)
                kb.documents.delete(row.id)
                files.pop(parts_of(kb).folder.relative_of(row.file_path), None)  # that name only
        elif action == "reconcile":
            kb.documents.reconcile(delete_missing=True)
            _check(kb, base, files)
    kb.documents.reconcile(delete_missing=True)
    _check(kb, base, files)


def _check(kb, base: Path, files: dict[str, str]) -> None:
    assert_consistent(kb)
    for relative, text in files.items():
        assert (base / relative).read_text(encoding="utf-8") == text, f"{relative} was lost or changed"
    inodes = [(base / parts_of(kb).folder.relative_of(d.file_path)).stat().st_ino for d in kb.documents.list()]
    assert len(inodes) == len(set(inodes)), "two rows for one file"


# -- 7. portable names ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["a:b.md", "a|b.md", "a*?.md", 'a<">.md', "con.md", "NUL.md", "Com1.md",
                                  "lpt9.notes.md", "aux .md", "prn.markdown"])
def test_file_names_other_systems_cannot_hold_are_refused(name):
    with pytest.raises(UploadRejected, match="reserved on Windows|other systems do not allow"):
        validate_file_name(name)


@pytest.mark.parametrize("category", ["con", "NUL", "Com1", "lpt9", "api/aux", "prn.d", "api/con/x", "api."])
def test_categories_other_systems_cannot_hold_are_refused(category):
    with pytest.raises(UploadRejected, match="reserved on Windows|ends with '.'"):
        validate_category(category)


@pytest.mark.parametrize("allowed", ["console", "com10", "lpt", "nullable", "con-docs", "v2.1"])
def test_names_near_the_reserved_ones_are_fine(allowed):
    assert validate_category(allowed) == allowed
    assert validate_file_name(f"{allowed}.md") == f"{allowed}.md"


def test_refused_names_leave_nothing_and_the_scan_skips_them_on_disk(kb):
    for name, category in [("a:b.md", "api"), ("x.md", "con"), ("x.md", "nul"), ('a"b.md', "api")]:
        with pytest.raises(UploadRejected):
            kb.documents.upload(name, doc("x", ["k1"]).encode(), category)
    assert kb.documents.list() == [] and list(_base(kb).rglob("*.md")) == []
    for relative in ("api/a:b.md", "nul/x.md", "api/a|b.md"):
        (_base(kb) / relative).parent.mkdir(parents=True, exist_ok=True)
        (_base(kb) / relative).write_text(doc("x", ["k1"]), encoding="utf-8")
    report = kb.documents.reconcile()
    assert report.added == () and len(report.refused) == 3
    assert_consistent(kb)


@pytest.mark.parametrize("value", [123, b"0" * 64, ["x"], 1.5])
def test_an_if_match_of_the_wrong_type_is_bad_input(kb, value):
    with pytest.raises(InvalidInputError, match="if_match must be a document's sha256 as a string"):
        kb.documents.upload("a.md", doc("A", ["A_KEY"]).encode(), "api", if_match=value)
    assert kb.documents.list() == []


def test_an_upper_case_if_match_is_the_same_hash(kb):
    first = kb.documents.upload("a.md", doc("A", ["A_KEY"]).encode(), "api").document
    outcome = kb.documents.upload("a.md", doc("A2", ["A_KEY"]).encode(), "api",
                                  if_match=f" {first.content_sha256.upper()} ")
    assert outcome.action == "replaced"
    assert checked_sha256("AB" * 32) == "ab" * 32


def test_a_knowledge_folder_without_settings_caps_reads_at_the_default(tmp_path):
    from kb_core.settings import Settings

    folder = KnowledgeFolder("knowledge_base", app_root=tmp_path)
    assert folder.max_bytes == Settings.model_fields["max_upload_bytes"].default
