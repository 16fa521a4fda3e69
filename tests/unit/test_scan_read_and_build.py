"""The scan's cheaper building blocks give what they replaced: `read_regular`'s `os.read` loop reads what a
buffered `read(cap)` reads, `read_head` of a string path what it read of a `Path`, a remembered
`normalize_language` what it computed, and `Heading`/`Section` made without their `__init__` the same values.
Self-contained (no conftest)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kb_core.documents import language, sections
from kb_core.documents.folder import HEAD_BYTES, KnowledgeFolder, read_regular
from kb_core.errors import FileTooLarge


@pytest.mark.parametrize("size", [0, 1, 100, 65535, 65536, 65537, HEAD_BYTES - 1, HEAD_BYTES, HEAD_BYTES + 5,
                                  300_000])
@pytest.mark.parametrize("limit", [None, -1, 0, 1, 100, 65536, HEAD_BYTES, 10**7])
def test_read_regular_reads_what_a_buffered_read_does(tmp_path, size, limit):
    path = tmp_path / "x.md"
    data = os.urandom(size)
    path.write_bytes(data)
    with open(path, "rb") as handle:
        expected = handle.read(-1 if limit is None or limit < 0 else limit)
    assert read_regular(path, limit) == expected
    assert read_regular(str(path), limit) == expected
    if size > 100:
        with pytest.raises(FileTooLarge) as refused:
            read_regular(path, limit, max_bytes=100)
        assert str(path) in str(refused.value)
    else:
        assert read_regular(path, limit, max_bytes=100) == expected


def test_read_head_of_a_string_path_is_the_head_of_the_path(tmp_path):
    folder = KnowledgeFolder("kb", app_root=tmp_path)
    (tmp_path / "kb" / "api").mkdir(parents=True)
    (tmp_path / "kb" / "api" / "x.md").write_text("\ufeff---\ntitle: x\n---\n" + "é" * HEAD_BYTES, encoding="utf-8")
    head, complete = folder.read_head("api/x.md")
    assert head.startswith("---\ntitle: x") and not complete
    with pytest.raises(FileNotFoundError) as missing:
        folder.read_head("api/none.md")
    assert str(tmp_path / "kb" / "api" / "none.md") in str(missing.value)
    os.mkfifo(tmp_path / "kb" / "api" / "fifo.md")
    with pytest.raises(OSError, match="not a regular file"):
        folder.read_head("api/fifo.md")


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["zh", "ZH-cn", "zh_CN", " cn ", "en-US", "jp", "xx", "docs", "zh-hant", "", "e"])
       | st.text(max_size=8) | st.text(min_size=60, max_size=70))
def test_normalize_language_remembered_is_computed(tag):
    assert language.normalize_language(tag) == language._normalize(tag)
    assert language.normalize_language(tag) == language.normalize_language(tag)


def test_headings_and_sections_without_init_are_the_same_values():
    made = sections._heading(3, 4, 2, "Raw *x*", "Raw x", 10, 20, False)
    real = sections.Heading(3, 4, 2, "Raw *x*", "Raw x", 10, 20, False)
    assert made == real and hash(made) == hash(real) and repr(made) == repr(real) and vars(made) == vars(real)
    with pytest.raises(AttributeError):
        made.line = 5  # still frozen
    section = sections._section(("A", "B"), made, 9, False, 30)
    assert section == sections.Section(("A", "B"), real, 9, listed=False, stop=30)
    assert vars(section) == vars(sections.Section(("A", "B"), real, 9, listed=False, stop=30))


_LINES = st.sampled_from(["# Title", "## A", "### B `code`", "#### deep", "text", "", "```", "~~~", "===", "---",
                          "Setext", "- item", "## A", "## [link](u) **b**", "    ## indented code", "#NoSpace"])


@settings(max_examples=300, deadline=None)
@given(st.lists(_LINES, max_size=30))
def test_outline_is_the_same_with_the_dataclass_constructors(monkeypatch_lines):
    text = "\n".join(monkeypatch_lines)
    fast = sections.outline(text, (("a", "## A"),))
    saved = sections._heading, sections._section
    try:
        sections._heading = sections.Heading
        sections._section = lambda path, heading, end, listed, stop: sections.Section(path, heading, end, listed, stop)
        slow = sections.outline(text, (("a", "## A"),))
    finally:
        sections._heading, sections._section = saved
    assert fast == slow


def test_display_path_of_a_folder_at_the_root(tmp_path):
    assert Path(KnowledgeFolder("/", app_root=tmp_path)._base_text) == Path("/")
