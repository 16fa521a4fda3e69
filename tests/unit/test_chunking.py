"""Chunking: headings, size, overlap, fenced code, HTML comments."""

from __future__ import annotations

from kb_core.documents.chunking import chunk_markdown

DOC = """---
title: T
keywords: [k]
---
<!-- Licensed under the Apache License, Version 2.0 -->
# Guide

Intro paragraph.

## Install

Run the installer.

```bash
# not a heading
pip install thing
```

### Linux

Use apt.

## Usage

Call it.
"""


def test_frontmatter_and_html_comments_are_removed():
    text = "\n".join(c.text for c in chunk_markdown(DOC))
    assert "keywords" not in text and "Licensed" not in text


def test_chunks_keep_their_heading_path():
    chunks = chunk_markdown(DOC)
    assert [(c.heading_path, c.text.splitlines()[0]) for c in chunks] == [
        (("Guide",), "Intro paragraph."),
        (("Guide", "Install"), "Run the installer."),
        (("Guide", "Install", "Linux"), "Use apt."),
        (("Guide", "Usage"), "Call it."),
    ]
    assert [c.chunk_no for c in chunks] == [0, 1, 2, 3]


def test_hash_lines_inside_code_fences_are_not_headings():
    install = chunk_markdown(DOC)[1]
    assert "# not a heading" in install.text and "pip install thing" in install.text


def test_long_sections_are_split_by_size_with_overlap():
    paragraphs = [f"Paragraph {i}: " + "alpha beta gamma delta " * 12 for i in range(12)]
    chunks = chunk_markdown("# Big\n\n" + "\n\n".join(paragraphs))
    assert len(chunks) > 3
    assert all(len(c.text) <= 800 for c in chunks)
    for previous, current in zip(chunks, chunks[1:], strict=False):
        assert previous.text[-30:].split()[-1] in current.text  # some overlap carries over
    joined = " ".join(c.text for c in chunks)
    assert all(f"Paragraph {i}:" in joined for i in range(12))


def test_code_blocks_are_not_split_when_they_fit():
    code = "```python\n" + "\n".join(f"x{i} = {i}" for i in range(60)) + "\n```"
    prose = "\n\n".join("word " * 100 for _ in range(3))
    chunks = chunk_markdown(f"# Code\n\n{prose}\n\n{code}\n\nAfter.")
    holding = [c for c in chunks if "x0 = 0" in c.text]
    assert len(holding) == 1 and "x59 = 59" in holding[0].text


def test_chinese_text_without_spaces_is_split_at_sentences():
    body = "# 缓存\n\n" + "缓存穿透需要布隆过滤器。" * 150
    chunks = chunk_markdown(body)
    assert len(chunks) >= 2 and all(len(c.text) <= 800 for c in chunks)
    assert chunks[0].text.endswith("。")


def test_embedding_text_has_title_and_heading_path():
    chunk = chunk_markdown(DOC)[2]
    assert chunk.embedding_text("T").startswith("T > Guide > Install > Linux\n\nUse apt.")


def test_empty_body_gives_no_chunks():
    assert chunk_markdown("---\ntitle: x\n---\n\n<!-- nothing -->\n") == []


def test_embedding_text_does_not_repeat_a_title_that_is_also_the_h1():
    chunk = chunk_markdown("# Guide\n\n## Install\n\nRun it.\n")[0]
    assert chunk.embedding_text("Guide") == "Guide > Install\n\nRun it."
