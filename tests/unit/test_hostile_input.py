"""Hostile input is refused early and cheaply, and nothing is ever written outside the base."""

from __future__ import annotations

import os
import time
import tracemalloc

import pytest
from support.documents import doc

from kb_core.bootstrap import parts_of
from kb_core.documents.frontmatter import parse_frontmatter, parse_frontmatter_strict
from kb_core.documents.lint import preview_upload
from kb_core.errors import FrontmatterError, UploadRejected
from kb_core.keywords.index import KnowledgeIndex
from kb_core.keywords.map import keyword_map


def _scalar_alias_bomb() -> str:
    pad = "x" * 30_000
    return f'---\ntitle: bomb\npad: &a "{pad}"\nbomb: [{", ".join(["*a"] * 700)}]\n---\nbody\n'


def test_a_scalar_alias_bomb_is_refused_fast_and_small():
    text = _scalar_alias_bomb()
    assert len(text.encode()) > 30_000
    tracemalloc.start()
    started = time.perf_counter()
    with pytest.raises(FrontmatterError, match="anchors and aliases are not allowed"):
        parse_frontmatter_strict(text)
    elapsed = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert elapsed < 0.1 and peak < 50 * 1024 * 1024  # bounds from the issue, far from the measured values
    assert parse_frontmatter(text, source="bomb.md") is None


@pytest.mark.parametrize("heading", [
    "a" + " " * 100_000 + "b",  # a lazy `(.*?)[ \t]*$` retried at every space: minutes
    "a" + " " * 100_000 + "b#",  # so did a searched closing `[ \t]+#+$`
    "a" + " " * 100_000 + "{#x",  # and a searched attribute list
    " " * 50_000 + "{" + " " * 50_000 + "#x",
    "{#a " * 25_000,
])
def test_a_hostile_heading_is_read_and_cleaned_in_linear_time(heading):
    from kb_core.documents.chunking import chunk_markdown
    from kb_core.documents.sections import outline

    text = f"---\ntitle: t\n---\n## {heading}\n\ntext\n"
    started = time.perf_counter()
    outline(text)
    chunk_markdown(text)
    assert time.perf_counter() - started < 0.5


@pytest.mark.parametrize("block", ["title: &t x\nkeywords: [a]", "keywords: [*x]", "k: !!str &a v"])
def test_any_anchor_or_alias_is_refused(block):
    with pytest.raises(FrontmatterError):
        parse_frontmatter_strict(f"---\n{block}\n---\n")


def test_stars_and_ampersands_inside_text_are_fine():
    fm = parse_frontmatter_strict("---\ntitle: 'a * b & c'\nkeywords: ['*', 'R&D']\n---\n")
    assert fm.title == "a * b & c" and fm.keywords == ("*", "R&D")


def test_weak_keywords_are_ignored_by_l0_and_reported(tmp_path):
    base = tmp_path / "knowledge_base" / "api"
    base.mkdir(parents=True)
    many = [f"KW_{i}" for i in range(70)]
    (base / "weak.md").write_text(doc("Weak", ["e", "的", "1", "2.0", "ERR_TIMEOUT", "the", *many]))
    index = KnowledgeIndex("knowledge_base", app_root=tmp_path)
    index.load()
    [entry] = index.entries()
    assert entry.keywords[0] == "ERR_TIMEOUT" and len(entry.keywords) == 64
    reasons = dict(entry.ignored_keywords)
    assert reasons["e"] == "shorter than 2 characters" and reasons["的"] == "shorter than 2 characters"
    assert reasons["1"] == "shorter than 2 characters" and reasons["2.0"] == "only digits or punctuation"
    assert reasons["the"] == "a stop word" and reasons["KW_69"] == "more than 64 keywords"
    # one careless document no longer downgrades every answer: "e" matches nothing
    assert index.exact_match("ERR_TIMEOUT e") == [entry] and index.exact_match("e") == []
    rows = keyword_map(index.snapshot).rows
    weak = {r.keyword: r.weak for r in rows if r.weak}
    assert weak["e"] == "shorter than 2 characters" and not any(r.ambiguous for r in rows if r.weak)
    preview = preview_upload(index, "new.md", doc("New", ["a", "ok-keyword"]).encode(), "api")
    assert any("“a” is ignored by L0: shorter than 2 characters" in f.message for f in preview.findings)


@pytest.mark.parametrize("name", ["CON.md", "nul.md", "com1.md", "LPT9.notes.md", "a／b.md", "a∕b.md", "a⁄b.md"])
def test_reserved_and_look_alike_names_are_refused(kb_fulltext, name):
    with pytest.raises(UploadRejected):
        kb_fulltext.documents.upload(name, doc("x", ["k1"]).encode(), "api")


@pytest.fixture
def kb_fulltext(open_kb):
    return open_kb()


def test_a_category_folder_linking_outside_is_refused(kb_fulltext, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (parts_of(kb_fulltext).folder.base_dir / "evil").symlink_to(outside, target_is_directory=True)
    with pytest.raises(UploadRejected, match="link leading outside"):
        kb_fulltext.documents.upload("x.md", doc("x", ["k1"]).encode(), "evil")
    assert list(outside.iterdir()) == []
    assert kb_fulltext.documents.list() == []


def test_links_leading_out_and_fifos_are_skipped_by_the_scan(tmp_path, caplog):
    base = tmp_path / "knowledge_base"
    (base / "api").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text(doc("Secret", ["SECRET_KEY"]))
    (base / "api" / "ok.md").write_text(doc("Ok", ["OK_KEY"]))
    (base / "api" / "link.md").symlink_to(outside / "secret.md")
    (base / "linked-folder").symlink_to(outside, target_is_directory=True)
    os.mkfifo(base / "api" / "pipe.md")
    index = KnowledgeIndex("knowledge_base", app_root=tmp_path)
    started = time.perf_counter()
    index.load()  # a FIFO would block an open() forever
    assert time.perf_counter() - started < 10
    assert [e.file_path for e in index.entries()] == ["knowledge_base/api/ok.md"]
    assert index.exact_match("SECRET_KEY") == []
    assert index.excerpt("knowledge_base/api/link.md") is None
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "not a regular file" in messages and "outside the knowledge base" in messages


def test_a_link_inside_the_base_is_deleted_as_a_link(kb_fulltext):
    kb = kb_fulltext
    real = kb.documents.upload("real.md", doc("Real", ["REAL_KEY"]).encode(), "api").document
    link = parts_of(kb).folder.base_dir / "api" / "alias.md"
    link.symlink_to(parts_of(kb).folder.base_dir / "api" / "real.md")
    with pytest.raises(UploadRejected, match="is a link"):
        kb.documents.upload("alias.md", doc("Alias", ["ALIAS"]).encode(), "api")
    assert (parts_of(kb).folder.base_dir / "api" / "real.md").read_text().startswith("---\ntitle: Real")
    assert real.file_path.endswith("api/real.md")
