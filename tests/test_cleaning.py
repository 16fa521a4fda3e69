"""Boilerplate out, code untouched: the cleaner's golden cases, and the terms the L1 relevance check uses."""

from __future__ import annotations

import pytest

from kb_core.documents.chunking import chunk_markdown
from kb_core.documents.cleaning import clean_body, clean_document
from kb_core.terms import analyse_query, coverage

LICENCE = """<!--
#
# Licensed to the Apache Software Foundation (ASF) under one
# or more contributor license agreements.  See the NOTICE file
#
-->
"""

DOC = f"""---
title: limit-req
keywords: [limit-req, Plugin]
---
{LICENCE}
<head>
  <link rel="canonical" href="https://docs.example.org/limit-req" />
</head>

import Tabs from '@theme/Tabs';
import TabItem from '@theme/TabItem';
export const meta = {{
  title: 'x',
}};

# limit-req

Limits the request rate <!-- TODO: link --> per key.

```yaml
<!-- a comment in a sample stays -->
import: this is YAML, not MDX
```

## Attributes
"""


def test_boilerplate_goes_and_code_stays():
    cleaned = clean_document(DOC)
    assert cleaned.startswith("---\ntitle: limit-req\nkeywords: [limit-req, Plugin]\n---\n\n# limit-req\n")
    for gone in ("Licensed", "<head>", "canonical", "import Tabs", "export const", "TODO"):
        assert gone not in cleaned
    assert "Limits the request rate  per key." in cleaned
    assert "<!-- a comment in a sample stays -->\nimport: this is YAML, not MDX" in cleaned
    assert cleaned.rstrip().endswith("## Attributes")


@pytest.mark.parametrize("body", ["", "\n\n", "plain text\n", "```\n<!-- open\n", "<!-- never closed\ntext\n"])
def test_degenerate_bodies_do_not_break(body):
    cleaned = clean_body(body)
    assert isinstance(cleaned, str)
    if body.startswith("```"):
        assert "<!-- open" in cleaned  # an unclosed fence keeps everything after it


def test_chunks_start_at_the_content_not_at_the_licence():
    chunks = chunk_markdown(DOC)
    assert chunks[0].heading_path == ("limit-req",)
    assert all("Licensed" not in c.text and "import Tabs" not in c.text for c in chunks)
    assert any("<!-- a comment in a sample stays -->" in c.text for c in chunks)


def test_a_document_without_frontmatter_is_cleaned_too():
    assert clean_document(f"{LICENCE}\n# Title\n\ntext\n") == "# Title\n\ntext\n"


@pytest.mark.parametrize("query, terms, required", [
    ("遇到和AI 网关有关的报错该如何排查", ["ai", "网关", "排查"], ["ai"]),
    ("What does key_claim_name do?", ["key_claim_name"], ["key_claim_name"]),
    ("完全不存在的内容XYZ", ["xyz", "完全", "存在", "内容"], ["xyz"]),
    ("KST-9999", ["kst-9999"], ["kst-9999"]),
    ("reject clients that exceed per-interface limits", ["per-interface", "reject", "clients", "exceed", "limits"],
     []),
])
def test_query_terms_drop_filler_and_keep_identifiers_whole(query, terms, required):
    analysed = analyse_query(query)
    assert list(analysed.terms) == terms and list(analysed.required) == required


def test_identifiers_count_only_whole():
    whole = frozenset({"err_timeout"})
    assert coverage(["err_timeout"], "see ERR_TIMEOUT_4071", whole)[0] == 0
    assert coverage(["err_timeout"], "see ERR_TIMEOUT.", whole)[0] == 1
    assert coverage(["ai"], "please explain", frozenset({"ai"}))[0] == 0


@pytest.mark.parametrize("body", [
    LICENCE + "# Big\n\n" + ("A paragraph about upstream retries and timeouts. " * 20 + "\n\n") * 3000,  # 3 MB
    "<!--\n" + "x\n" * 200_000 + "-->\n# After the long comment\n\ncontent\n",  # the head is all boilerplate
])
def test_an_answer_reads_and_cleans_only_the_head_of_a_large_file_yet_equals_the_full_clean(tmp_path, body):
    from kb_core.retrieval.keyword_index import KnowledgeIndex

    text = "---\ntitle: Big\nkeywords: [BIG]\n---\n" + body
    (tmp_path / "knowledge_base/api").mkdir(parents=True)
    (tmp_path / "knowledge_base/api/big.md").write_text(text, encoding="utf-8")
    full = clean_document(text)
    expected = full[:2000] + "..." if len(full) > 2000 else full
    index = KnowledgeIndex("knowledge_base", app_root=tmp_path)
    assert index.read_document("knowledge_base/api/big.md", 2000, clean=True) == expected
