"""Frontmatter parsing as the spec asks, golden files and a property test."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.paths import TESTS

from kb_core import Frontmatter, has_frontmatter, parse_frontmatter
from kb_core.documents.frontmatter import FrontmatterError, parse_frontmatter_strict, split_body

GOLDEN = TESTS / "golden" / "frontmatter"
GOLDEN_CASES = sorted(GOLDEN.glob("*.md"))

SPEC_1_1 = """---
title: 支付网关错误码定义
keywords: [ERR_TIMEOUT, 超时, 支付网关]
summary: 记录了支付网关所有核心错误码的含义及排查方向
---

# 正文内容
"""


def test_req_1_1_standard_frontmatter_parses_title_keywords_summary():
    fm = parse_frontmatter(SPEC_1_1)
    assert fm == Frontmatter(
        title="支付网关错误码定义",
        keywords=("ERR_TIMEOUT", "超时", "支付网关"),
        summary="记录了支付网关所有核心错误码的含义及排查方向",
        category=None,
        extra={},
    )


def test_req_1_1_reserved_fields_are_kept_aside_not_failing():
    fm = parse_frontmatter(SPEC_1_1.replace("---\n\n#", "category: api\nsections:\n  超时排查: '## 1'\n---\n\n#"))
    assert fm is not None
    assert fm.category == "api"
    assert fm.extra == {"sections": {"超时排查": "## 1"}}


def test_req_1_2_no_frontmatter_returns_none_without_raising(caplog):
    content = "# 普通文档\n\n这是正文内容。\n"
    assert has_frontmatter(content) is False
    with caplog.at_level(logging.WARNING):
        assert parse_frontmatter(content, source="knowledge_base/api/order.md") is None
    assert "knowledge_base/api/order.md" in caplog.text


def test_req_1_3_malformed_frontmatter_logs_one_warn_and_returns_none(caplog):
    content = "---\ntitle: 缺少结束标记\nkeywords: [ERR_TIMEOUT\n# 正文\n"
    with caplog.at_level(logging.WARNING, logger="kb_core.documents.frontmatter"):
        assert parse_frontmatter(content, source="bad.md") is None
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "bad.md" in warnings[0].getMessage()
    assert "not closed" in warnings[0].getMessage()


def test_strict_parser_explains_invalid_yaml_with_a_line_number():
    with pytest.raises(FrontmatterError, match=r"invalid YAML at line \d"):
        parse_frontmatter_strict("---\ntitle: [unbalanced\nkeywords: x\n---\n")


def test_block_over_64_kib_is_refused(caplog):
    content = "---\ntitle: big\nkeywords: [a]\nsummary: " + "x" * (64 * 1024) + "\n---\n"
    with caplog.at_level(logging.WARNING):
        assert parse_frontmatter(content, source="big.md") is None
    assert "64 KiB" in caplog.text


@pytest.mark.timeout(20)  # expanding the bomb would take minutes and gigabytes; refusing it is instant
def test_alias_bomb_is_refused():
    levels = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 10):
        prev, cur = chr(ord("a") + i - 1), chr(ord("a") + i)
        levels.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    content = "---\n" + "\n".join(levels) + "\ntitle: bomb\n---\n"
    with pytest.raises(FrontmatterError, match="aliases"):
        parse_frontmatter_strict(content)
    assert parse_frontmatter(content) is None


def test_has_frontmatter_is_structural():
    assert has_frontmatter("---\ntitle: x\n---\n")
    assert has_frontmatter("\ufeff---\r\ntitle: x\r\n---\r\n")
    assert not has_frontmatter("---\ntitle: x\n")  # unclosed
    assert not has_frontmatter("\n---\ntitle: x\n---\n")  # must be the first line
    assert not has_frontmatter("# Title\n\n---\n\ntext\n---\n")  # horizontal rules


def test_split_body_removes_only_the_frontmatter_block():
    assert split_body("---\ntitle: x\n---\n# Body\n---\nmore\n") == "# Body\n---\nmore\n"
    assert split_body("\ufeff# No frontmatter\n") == "# No frontmatter\n"


@pytest.mark.parametrize("case", GOLDEN_CASES, ids=[p.stem for p in GOLDEN_CASES])
def test_golden_files(case: Path):
    expected = json.loads(case.with_name(case.stem + ".expected.json").read_text(encoding="utf-8"))
    parsed = parse_frontmatter(case.read_bytes().decode("utf-8"), source=case.name)
    assert (None if parsed is None else parsed.to_dict()) == expected


def test_there_are_at_least_15_golden_cases():
    assert len(GOLDEN_CASES) >= 15
    for case in GOLDEN_CASES:
        assert case.with_name(case.stem + ".expected.json").is_file(), case


def test_keywords_as_one_string_split_on_every_separator():
    fm = parse_frontmatter("---\nkeywords: 'a, b，c、d;e；f'\n---\n")
    assert fm is not None and fm.keywords == ("a", "b", "c", "d", "e", "f")


def test_keywords_dedupe_case_insensitively_keeping_first_spelling():
    fm = parse_frontmatter("---\nkeywords: [Redis, REDIS, redis, ' Redis ', ＲＥＤＩＳ, Cache]\n---\n")
    assert fm is not None and fm.keywords == ("Redis", "Cache")


def test_scalars_keep_their_source_text():
    fm = parse_frontmatter("---\ntitle: 2024\nkeywords: [Nacos, 2.0, 1.10, yes, ~]\nsummary: 3.14\n---\n")
    assert fm is not None
    assert fm.title == "2024" and fm.summary == "3.14"
    assert fm.keywords == ("Nacos", "2.0", "1.10", "yes", "~")


frontmatter_like = st.one_of(
    st.text(),
    st.builds(
        lambda a, b, c: f"---\n{a}\n---\n{b}{c}",
        st.text(alphabet=st.characters(blacklist_categories=("Cs",)) | st.sampled_from(list(":[]{}&*!|>-'\"\n#,"))),
        st.text(),
        st.sampled_from(["", "\n---\n", "```\n---\n```"]),
    ),
    st.builds(lambda s: "\ufeff---\r\n" + s, st.text()),
)


@settings(max_examples=300, deadline=None)
@given(frontmatter_like)
def test_property_parse_frontmatter_never_raises(content: str):
    result = parse_frontmatter(content, source="hypothesis.md")
    assert result is None or isinstance(result, Frontmatter)
    if result is not None:
        json.dumps(result.to_dict(), ensure_ascii=False)  # the metadata column must always serialise
        assert all(k.strip() == k and k for k in result.keywords)


@pytest.mark.parametrize(
    "content",
    ["---\ntitle: \ud800\n---\n", "---\ntitle: " + "[" * 5000 + "\n---\n", "---\n" + "- " * 3000 + "x\n---\n",
     "---\n? [a, b]\n: c\n---\n", "---\ntitle: !!python/name:os.system\n---\n", "", "---", "---\n---"],
    ids=["lone-surrogate", "deep-flow-nesting", "deep-block-nesting", "unhashable-key", "python-tag", "empty",
         "only-opening", "empty-block"],
)
def test_hostile_inputs_return_none_without_raising(content):
    assert parse_frontmatter(content, source="hostile.md") is None
