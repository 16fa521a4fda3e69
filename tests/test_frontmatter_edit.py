"""Rewriting frontmatter keywords in place: golden files (tests/golden/keyword_edit: `x.in.md` + `x.keywords.json`
-> exactly `x.out.md`, byte for byte), refusals, and a property check that only the keywords change."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kb_core.documents.frontmatter import parse_frontmatter_strict, split_body
from kb_core.documents.frontmatter_edit import clean_keywords, replace_keywords
from kb_core.errors import FrontmatterError

GOLDEN = Path(__file__).parent / "golden" / "keyword_edit"
CASES = sorted(p.name.removesuffix(".in.md") for p in GOLDEN.glob("*.in.md"))


@pytest.mark.parametrize("case", CASES)
def test_golden(case: str):
    source = (GOLDEN / f"{case}.in.md").read_bytes().decode("utf-8")
    keywords = json.loads((GOLDEN / f"{case}.keywords.json").read_text(encoding="utf-8"))
    expected = (GOLDEN / f"{case}.out.md").read_bytes().decode("utf-8")
    result = replace_keywords(source, keywords)
    assert result == expected
    before, after = parse_frontmatter_strict(source), parse_frontmatter_strict(result)
    assert list(after.keywords) == keywords
    assert (after.title, after.summary, after.category, after.extra) == (
        before.title, before.summary, before.category, before.extra)
    assert split_body(result) == split_body(source)


def test_there_are_golden_cases_for_each_style():
    assert len(CASES) >= 6


def test_unchanged_keywords_give_the_same_bytes():
    source = (GOLDEN / "block-list.in.md").read_text(encoding="utf-8")
    # same keywords, same style: the comment on the first item goes (it was inside the value), nothing else
    result = replace_keywords(source, ["Apache Lumen", "插件", "limit-req", "限流"])
    assert result == source.replace("  - Apache Lumen   # the product, on every page\n", "  - Apache Lumen\n")


@pytest.mark.parametrize("text, reason", [
    ("# No frontmatter\n\nbody\n", "no frontmatter"),
    ("---\ntitle: [unclosed\n---\nbody\n", "invalid YAML"),
    ("---\n- a\n- b\n---\nbody\n", "mapping"),
    ("---\ntitle: x\nkeywords: {a: b}\n---\nbody\n", "mapping"),
])
def test_documents_that_cannot_hold_keywords_are_refused(text, reason):
    with pytest.raises(FrontmatterError, match=reason):
        replace_keywords(text, ["a"])


def test_keywords_are_cleaned_and_a_line_break_is_refused():
    assert clean_keywords([" AI ", "ai", "", "  ", "API 网关"]) == ("AI", "API 网关")
    with pytest.raises(FrontmatterError, match="spans lines"):
        clean_keywords(["two\nlines"])


_keyword = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp"), blacklist_characters="\x85\ufeff"),
                   min_size=1, max_size=12).filter(lambda k: k.strip())


@settings(max_examples=150, deadline=None)
@given(st.lists(_keyword, max_size=6), st.sampled_from(CASES))
def test_any_keywords_round_trip_and_only_the_keywords_change(keywords, case):
    source = (GOLDEN / f"{case}.in.md").read_bytes().decode("utf-8")
    try:
        result = replace_keywords(source, keywords)
    except FrontmatterError as exc:  # allowed only as the explicit refusal, never a silent change
        assert "without changing other fields" in str(exc)
        return
    after = parse_frontmatter_strict(result)
    assert after.keywords == clean_keywords(keywords)
    assert split_body(result) == split_body(source)
