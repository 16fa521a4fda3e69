"""Rewriting frontmatter fields in place: golden files (tests/golden/keyword_edit: `x.in.md` + `x.edit.json` or
`x.keywords.json` -> exactly `x.out.md`, byte for byte; `python tests/support/golden_gen.py` regenerates them),
refusals, and property checks that editing any field to any value either round-trips exactly — the parser reads
the new value back, every byte outside the field's own lines is unchanged — or is refused with a clear error."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.golden_gen import GOLDEN_EDITS, edit_cases, edit_of, edited_for

from kb_core.documents.frontmatter import parse_frontmatter_strict, split_body
from kb_core.documents.frontmatter_edit import (
    FIELDS,
    FrontmatterFields,
    clean_keywords,
    clean_sections,
    clean_summary,
    clean_title,
    edit_frontmatter,
    parse_section_lines,
    replace_keywords,
    section_lines,
)
from kb_core.errors import FrontmatterError

CASES = edit_cases()
CLEAN = {"title": clean_title, "summary": clean_summary, "keywords": clean_keywords, "sections": clean_sections}


def _source(case: str) -> str:
    return (GOLDEN_EDITS / f"{case}.in.md").read_bytes().decode("utf-8")


@pytest.mark.parametrize("case", CASES)
def test_golden(case: str):
    source, edit = _source(case), edit_of(case)
    expected = (GOLDEN_EDITS / f"{case}.out.md").read_bytes().decode("utf-8")
    result = edited_for(case)
    assert result == expected
    before, after = parse_frontmatter_strict(source), parse_frontmatter_strict(result)
    _assert_only_edited_fields_changed(before, after, {f: CLEAN[f](v) for f, v in edit.items()})
    assert split_body(result) == split_body(source)


def test_there_are_golden_cases_for_each_style():
    assert len(CASES) >= 15
    names = " ".join(CASES)
    for style in ("block", "flow", "crlf", "bom", "cjk", "anchors-in-body", "no-frontmatter", "folded", "literal",
                  "comments", "missing", "sections"):
        assert style in names, style


def test_unchanged_keywords_give_the_same_bytes():
    source = _source("block-list")
    # same keywords, same style: the comment on the first item goes (it was inside the value), nothing else
    result = replace_keywords(source, ["Apache Lumen", "插件", "limit-req", "限流"])
    assert result == source.replace("  - Apache Lumen   # the product, on every page\n", "  - Apache Lumen\n")


@pytest.mark.parametrize("text, edit, reason", [
    ("---\ntitle: [unclosed\n---\nbody\n", {"keywords": ["a"]}, "invalid YAML"),
    ("---\n- a\n- b\n---\nbody\n", {"keywords": ["a"]}, "mapping"),
    ("---\ntitle: x\nkeywords: {a: b}\n---\nbody\n", {"keywords": ["a"]}, "mapping"),
    ("---\ntitle: x\n\nbody without a closing line\n", {"title": "y"}, "not closed"),
    ("---\ntitle: &a x\nsummary: *a\n---\nbody\n", {"title": "y"}, "anchors and aliases"),
    ("---\ntitle: x\n---\n", {"title": "two\nlines"}, "the title spans lines"),
    ("---\ntitle: x\n---\n", {"title": "bell\x07"}, r"control character U\+0007"),
    ("---\ntitle: x\n---\n", {"summary": "a\u2028b"}, r"line separator U\+2028"),
    ("---\ntitle: x\n---\n", {"sections": [["", "## A"]]}, "section name is empty"),
    ("---\ntitle: x\n---\n", {"sections": [["A", " "]]}, "needs a heading line"),
    ("---\ntitle: x\n---\n", {"sections": [["A", "## A"], ["a", "## B"]]}, "named twice"),
    ("---\ntitle: x\n---\n", {"keywords": ["two\nlines"]}, "spans lines"),
    ("---\ntitle: x\n---\n", {"keywords": "one, string"}, "a list of texts"),
    ("---\ntitle: x\n---\n", {"title": 42}, "must be text"),
])
def test_what_cannot_be_edited_in_place_is_refused_with_the_reason(text, edit, reason):
    with pytest.raises(FrontmatterError, match=reason):
        edit_frontmatter(text, **edit)


def test_a_document_without_frontmatter_gets_a_block_and_its_body_stays():
    text = "\ufeff# Runbook\r\n\r\nbody\r\n"
    result = edit_frontmatter(text, keywords=["runbook"])
    assert result == "\ufeff---\r\nkeywords: [runbook]\r\n---\r\n# Runbook\r\n\r\nbody\r\n"
    assert edit_frontmatter(text, keywords=[], title="", sections=[]) == text  # nothing to write: no block


def test_a_block_of_comments_only_is_an_empty_mapping_to_fill():
    result = edit_frontmatter("---\n# to do\n---\nbody\n", title="Filled", keywords=["k1"])
    assert result == "---\n# to do\ntitle: Filled\nkeywords: [k1]\n---\nbody\n"


def test_values_are_cleaned_as_the_parser_reads_them():
    assert clean_keywords([" AI ", "ai", "", "  ", "API 网关"]) == ("AI", "API 网关")
    assert clean_title("  Title\t") == "Title"
    assert clean_summary(" one\r\ntwo\rthree \n") == "one\ntwo\nthree"
    assert clean_sections({" A ": " ## A "}) == (("A", "## A"),)
    assert parse_section_lines("Timeouts: ## 1. Timeouts: read\n\nEscalation: Escalation\n") == (
        ("Timeouts", "## 1. Timeouts: read"), ("Escalation", "Escalation"))
    assert parse_section_lines(section_lines((("a", "## A"), ("b", "B > C")))) == (("a", "## A"), ("b", "B > C"))
    with pytest.raises(FrontmatterError, match="line 2"):
        parse_section_lines("a: b\nno separator\n")


def test_several_fields_at_once_and_the_rest_stays():
    source = _source("literal-summary-sections-block")
    result = edit_frontmatter(source, title="T", keywords=["k1", "k2"], summary="S", sections=[])
    after = parse_frontmatter_strict(result)
    assert (after.title, after.keywords, after.summary, after.sections) == ("T", ("k1", "k2"), "S", ())
    assert after.extra == {"tags": ["payments"]} and split_body(result) == split_body(source)


# -- property checks -----------------------------------------------------------------------------------------------
# Any text, control characters and YAML's own line breaks included (a lone surrogate cannot be in a file at all)
_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)
_typical = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), min_size=1, max_size=30)
_values = {
    "title": st.one_of(_text, _typical),
    "summary": st.one_of(_text, _typical, st.lists(_typical, min_size=1, max_size=4).map("\n".join)),
    "keywords": st.lists(st.one_of(_text, _typical), max_size=5),
    "sections": st.lists(st.tuples(st.one_of(_text, _typical), st.one_of(_text, _typical)), max_size=4),
}


def _assert_only_edited_fields_changed(before, after, edited: dict) -> None:
    """The parser reads each edited field back as its new value and every other field as it was."""
    current, got = FrontmatterFields.of(before), FrontmatterFields.of(after)
    for field in FIELDS:
        want = edited.get(field, getattr(current, field))
        if field == "summary" and field in edited and not want and before is not None:
            description = before.extra.get("description")
            want = description.strip() if isinstance(description, str) else ""  # the fallback the parser applies
        assert getattr(got, field) == want, field
    extra_before = dict(before.extra) if before is not None else {}
    extra_after = dict(after.extra)
    if "sections" in edited:
        extra_before.pop("sections", None)
        written = extra_after.pop("sections", None)
        assert list((written or {}).items()) == list(edited["sections"])  # in the order given
    assert extra_after == extra_before
    assert after.category == (before.category if before is not None else None)


def _region(text: str, field: str) -> tuple[int, int] | None:
    """(start, stop) of a field's lines in the original text: from its key's line to the line break after its value
    (None: the field is not there)."""
    from kb_core.documents.frontmatter_edit import _content_end, _line_end, _line_start, _locate_block

    located = _locate_block(text)
    if located is None:
        return None
    offset, _end, block = located
    root = yaml.compose(block, Loader=yaml.SafeLoader) if block.strip() else None
    pairs = {k.value: (k, v) for k, v in (root.value if root is not None else ())}
    if field not in pairs:
        return None
    key, value = pairs[field]
    stop = _line_end(block, max(_content_end(block, value), key.end_mark.index))
    stop += 2 if block.startswith("\r\n", stop) else 1 if stop < len(block) else 0
    return offset + _line_start(block, key.start_mark.index), offset + stop


def _check_round_trip(source: str, edit: dict) -> None:
    try:
        cleaned = {f: CLEAN[f](v) for f, v in edit.items()}
    except FrontmatterError:
        with pytest.raises(FrontmatterError):  # refused for the value itself: the same reason, before any rewrite
            edit_frontmatter(source, **edit)
        return
    result = edit_frontmatter(source, **edit)  # a value that is fine is never refused for the rewrite
    before, after = parse_frontmatter_strict(source), parse_frontmatter_strict(result)
    if result == source:
        return
    assert after is not None
    _assert_only_edited_fields_changed(before, after, cleaned)
    assert split_body(result) == split_body(source)
    # every byte outside the edited fields' own lines is unchanged
    regions = [r for r in (_region(source, f) for f in edit) if r is not None]
    if len(edit) == 1 and regions:
        (start, stop), = regions
        assert result[:start] == source[:start] and result.endswith(source[stop:])
    elif not regions:  # only insertions: the source is the result with one run of new text taken out
        prefix = len(os.path.commonprefix([source, result]))
        suffix = len(os.path.commonprefix([source[::-1], result[::-1]]))
        assert prefix + suffix >= len(source) or len(edit) > 1


def _value(data, case: str, field: str):
    """Any value, or for a list one that keeps some of the case's own items (written as they were)."""
    current = FrontmatterFields.of(parse_frontmatter_strict(_source(case)))
    if field == "keywords" and current.keywords:
        return data.draw(st.lists(st.one_of(st.sampled_from(current.keywords), _typical, _text), max_size=6))
    if field == "sections" and current.sections:
        pair = st.tuples(st.one_of(_text, _typical), st.one_of(_text, _typical))
        return data.draw(st.lists(st.one_of(st.sampled_from(current.sections), pair), max_size=5))
    return data.draw(_values[field])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(CASES), st.sampled_from(FIELDS), st.data())
def test_any_value_of_any_field_round_trips_or_is_refused_for_the_value(case, field, data):
    _check_round_trip(_source(case), {field: _value(data, case, field)})


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(CASES), st.data())
def test_several_fields_at_once_round_trip(case, data):
    fields = data.draw(st.lists(st.sampled_from(FIELDS), min_size=2, max_size=4, unique=True))
    _check_round_trip(_source(case), {f: _value(data, case, f) for f in fields})


def test_the_golden_inputs_are_what_the_cases_say(tmp_path: Path):
    """The CRLF, BOM and CJK cases really are CRLF, BOM and CJK (an editor saving them would quietly undo it)."""
    assert "\r\n" in _source("flow-sections-crlf") and "\r\n" in _source("flow-crlf")
    assert _source("bom-cjk-all-fields").startswith("\ufeff") and _source("comma-string-bom").startswith("\ufeff")
    assert not _source("no-frontmatter").startswith("---")
