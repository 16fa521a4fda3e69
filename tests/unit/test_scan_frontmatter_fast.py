"""The YAML-free reading of the common frontmatter shape (`frontmatter._load_simple`) returns exactly what the
YAML loader returns, or None (YAML reads the block then): golden cases and generated blocks, tricky ones
included (colons, quotes, comments, `null`/`true`/numbers/dates, CRLF, tabs, unicode, indents, duplicates).
Self-contained (no conftest)."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kb_core.documents import frontmatter as fm_module
from kb_core.documents.frontmatter import _LOADER, _load_simple, parse_frontmatter, parse_frontmatter_strict


def _yaml(block: str):
    return yaml.load(block, Loader=_LOADER)  # noqa: S506 - the module's own SafeLoader subclass


def _check(block: str) -> object:
    """The fast result, asserted equal (value and types) to the loader's whenever it is not None."""
    fast = _load_simple(block)
    if fast is not None:
        slow = _yaml(block)
        assert fast == slow, block
        assert type(slow) is dict and [type(v) for v in fast.values()] == [type(v) for v in slow.values()]
        assert list(fast) == list(slow)  # the key order (the `extra` dict keeps it)
        for value in fast.values():
            if isinstance(value, list):
                assert all(type(item) is str for item in value)
            else:
                assert type(value) is str
    return fast


COMMON = [
    "title: Plugin 排查手册 636\nkeywords: [ERR_SMS_00636, Plugin, 用户失败, 支付失败]\nsummary: 关于 x 的说明\n",
    "title: x\nkeywords:\n- a\n- b c\n",
    "title: x\nkeywords:\n  - a\n  - 'b: c'\n  - \"d\"\nsummary: s\n",
    "title: 'It''s here'\nsummary: \"quoted: with colon\"\n",
    "title: a, b [c] {d}\nupdated: 2026-01-31\nversion: 1.10\ndraft: true\nn: null\nt: ~\nnum: 0x1F\n",
    "title: http://example.com/x?y=1\nurl: a:b\n",
    "title: x\r\nkeywords: [a, b]\r\n",
    "keywords: []\n", "keywords: [ ]\n", "a:\n", "a:   \nb: x\n", "a: ...\n", "a: x  y \n", "k:\n\n- a\n\n- b\n",
    "lang: zh\ntranslationKey: page-1\naudience: [ops, dev]\n",
    "title: 中文标题\nkeywords: [API 网关, 2.0, AI]\n", "title: \U0001f600 emoji\n", "title: nbsp\xa0inside\xa0\n",
    "a: x\n\n\nb: y\n", "title: a :b\n", "title: a -\n", "title: it's \"fine\"\n",
]

FALLBACK = [
    "title: x # a comment\n", "# comment\ntitle: x\n", "title: &a x\nb: *a\n", "title: !!str x\n",
    "sections:\n  Timeouts: '## 1. Timeouts'\n", "title: x\n  continued\n", "title: |\n  block\n", "title: >\n  f\n",
    "title: 'multi\n  line'\n", "title: \"esc\\n\"\n", "title: x\ntitle: y\n", "title: a: b\n", "title: a:\n",
    "keywords: [a, b,]\n", "keywords: [a, [b]]\n", "keywords: [a, 'b']\n", "keywords: [a\n", "keywords: {a: b}\n",
    "keywords:\n- a\n  - b\n", "keywords:\n-\n", "keywords:\n- - a\n", "keywords:\n- a: b\n", "title: x\n- a\n",
    "title:\tx\n", "title: x\ry\n", "title: -x\n", "title: ?x\n", "title: %x\n", "title: @x\n", "title: `x\n",
    "title: x\u2028y\n", "title: x\x85y\n", "title: \ufeffx\n", "title: x\x7f\n", "key:value\n", "key : v\n",
    "\n\n", "", "just a string\n", "- a\n- b\n", " title: x\n", "title: 'a''\n", "title: 'a' b\n",
    "a" * 300 + ": x\n",
]


@pytest.mark.parametrize("block", COMMON)
def test_common_shapes_take_the_fast_path(block):
    assert _check(block) is not None


@pytest.mark.parametrize("block", FALLBACK)
def test_other_shapes_go_to_yaml(block):
    assert _load_simple(block) is None


def test_the_scan_corpus_shape_is_common():
    block = ("title: ERR_X_00001 排查手册 1\nkeywords: [ERR_X_00001, PaymentService.create1, Apache Lumen, 2.0]\n"
             "summary: 关于 ERR_X_00001 的说明与处理步骤\n")
    assert _check(block) == {"title": "ERR_X_00001 排查手册 1", "summary": "关于 ERR_X_00001 的说明与处理步骤",
                             "keywords": ["ERR_X_00001", "PaymentService.create1", "Apache Lumen", "2.0"]}


# -- generated blocks ------------------------------------------------------------------------------------
_TRICKY = list("aZ09 :-?,[]{}#&*!|>'\"%@`\\~._/=+()支é\xa0\t\r\x85\u2028\ufeff\x7f\U0001f600")
_WORDS = ["null", "true", "False", "yes", "~", "2026-01-31", "1e3", "0x1F", "1.10", ".inf", "...", "---", "- a",
          "a: b", "a:b", "a #b", "a#b", "C#", "'q'", '"q"', "it's", "<<", "=", "http://x.y/z", " lead", "trail "]
_text = st.lists(st.sampled_from(_TRICKY) | st.sampled_from(_WORDS) | st.text(max_size=3), max_size=6).map("".join)
_key = st.sampled_from(["title", "keywords", "summary", "category", "lang", "audience", "updated", "x-y", "_k",
                        "k1", "true", "null", "T"]) | st.from_regex(r"[A-Za-z_][A-Za-z0-9_-]{0,8}", fullmatch=True)


@st.composite
def _scalar(draw) -> str:
    value = draw(_text)
    style = draw(st.sampled_from(["plain", "plain", "single", "double"]))
    if style == "single":
        return "'" + (value.replace("'", "''") if draw(st.booleans()) else value) + "'"
    if style == "double":
        return '"' + value + '"'
    return value


@st.composite
def _block(draw) -> str:
    lines = []
    eol = draw(st.sampled_from(["\n", "\n", "\r\n"]))
    for _ in range(draw(st.integers(1, 5))):
        key = draw(_key)
        shape = draw(st.sampled_from(["scalar", "scalar", "flow", "block", "empty"]))
        gap = draw(st.sampled_from([" ", " ", "  ", "\t", ""]))
        tail = draw(st.sampled_from(["", "", " ", "  # c", "\t"]))
        if shape == "scalar":
            lines.append(f"{key}:{gap}{draw(_scalar())}{tail}")
        elif shape == "flow":
            items = draw(st.lists(_scalar(), max_size=4))
            sep = draw(st.sampled_from([", ", ",", " , "]))
            lines.append(f"{key}:{gap}[{sep.join(items)}{draw(st.sampled_from(['', '', ',', ' ']))}]{tail}")
        elif shape == "block":
            lines.append(f"{key}:{tail}")
            indent = draw(st.sampled_from(["", "", "  ", "    "]))
            for item in draw(st.lists(_scalar(), min_size=1, max_size=4)):
                lines.append(f"{draw(st.sampled_from([indent, indent, indent, ' ']))}-{gap}{item}")
        else:
            lines.append(f"{key}:{tail}")
        if draw(st.integers(0, 9)) == 0:
            lines.append(draw(st.sampled_from(["", "  ", "# comment", "  continued"])))
    return eol.join(lines) + eol


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_block())
def test_fast_path_equals_the_loader(block):
    _check(block)


@st.composite
def _simple_block(draw) -> str:
    """Blocks of the common shape only (so the property is not met by falling back every time)."""
    safe = st.text(alphabet="abcXYZ019 ._/()+=支付é\U0001f600'\"?!-", min_size=1, max_size=12).map(str.strip).filter(
        lambda v: v and v[0] not in "-?'\"!" and v[-1] != ":")
    keys = draw(st.lists(_key, min_size=1, max_size=5, unique=True))
    lines = []
    for key in keys:
        shape = draw(st.sampled_from(["scalar", "single", "double", "flow", "block"]))
        if shape == "scalar":
            lines.append(f"{key}: {draw(safe)}")
        elif shape == "single":
            lines.append(f"{key}: '{draw(safe).replace(chr(39), chr(39) * 2)}'")
        elif shape == "double":
            lines.append(f"{key}: \"{draw(safe).replace(chr(34), '')}\"")
        elif shape == "flow":
            items = draw(st.lists(safe.map(lambda v: v.replace("'", "").replace('"', "")).filter(bool), max_size=4))
            lines.append(f"{key}: [{', '.join(items)}]")
        else:
            lines.append(f"{key}:")
            lines += [f"  - {item}" for item in draw(st.lists(safe, min_size=1, max_size=3))]
    return "\n".join(lines) + "\n"


@settings(max_examples=600, deadline=None)
@given(_simple_block())
def test_common_blocks_are_read_without_yaml(block):
    assert _check(block) is not None or _load_simple(block) is None and _yaml(block) is not None


# -- the whole parse: fast path or not, the same Frontmatter, warnings and refusals ---------------------------
def _strict_both(content: str, monkeypatch) -> tuple[object, object]:
    def outcome():
        try:
            return parse_frontmatter_strict(content)
        except Exception as exc:  # noqa: BLE001 - compared by type and message
            return (type(exc), str(exc))
    fast = outcome()
    with monkeypatch.context() as m:
        m.setattr(fm_module, "_load_simple", lambda block: None)
        slow = outcome()
    return fast, slow


@pytest.mark.parametrize("block", COMMON + FALLBACK)
def test_parse_is_the_same_with_or_without_the_fast_path(block, monkeypatch):
    fast, slow = _strict_both(f"---\n{block}---\n\n# Body\n", monkeypatch)
    assert fast == slow


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_block())
def test_parse_is_the_same_on_generated_blocks(monkeypatch, block):
    fast, slow = _strict_both(f"---\n{block}---\nbody\n", monkeypatch)
    assert fast == slow


def test_a_large_block_is_still_refused_before_anything():
    block = "title: " + "x" * (fm_module.MAX_BLOCK_BYTES + 10) + "\n"
    assert _load_simple(block) is not None  # the shape is simple: the size check must come first
    assert parse_frontmatter(f"---\n{block}---\n") is None
