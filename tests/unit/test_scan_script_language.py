"""The script count behind a document's language (`language._script_language`) equals the regex count it
replaced: `len(_CJK.findall(sample))` and `len(_LATIN.findall(sample))` over the first 4,000 characters.
Self-contained (no conftest)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from kb_core.documents import language
from kb_core.documents.language import _script_counts, _script_language

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_LATIN = re.compile(r"[A-Za-z]")


def _reference(text: str) -> str:
    sample = text[:4000]
    cjk, latin = len(_CJK.findall(sample)), len(_LATIN.findall(sample))
    if cjk and cjk * 4 >= latin:
        return "zh"
    return "en" if latin else "und"


def test_the_module_patterns_are_the_reference_patterns():
    assert language._CJK.pattern == _CJK.pattern and language._LATIN.pattern == _LATIN.pattern


_EDGES = "\u303f\u3040\u30ff\u3100\u33ff\u3400\u4dbf\u4dc0\u4dff\u4e00\u9fff\ua000\uabff\uac00\ud7af\ud7b0" \
         "\uf8ff\uf900\ufaff\ufb00\uffff\U00020000\U0001f600@[`{AZazé\u00c0\u0100\ufeff\x00\n\t "


def test_edges_of_every_range():
    for ch in _EDGES:
        sample = ch * 3
        assert _script_counts(sample) == (len(_CJK.findall(sample)), len(_LATIN.findall(sample))), repr(ch)
    assert _script_counts("\ud800a\udfff") == (0, 1)  # lone surrogates count as neither


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.sampled_from(_EDGES) | st.characters(), max_size=200))
def test_counts_equal_the_regex_counts(text):
    assert _script_counts(text) == (len(_CJK.findall(text)), len(_LATIN.findall(text)))
    assert _script_language(text) == _reference(text)


@settings(max_examples=50, deadline=None)
@given(st.text(alphabet="ab 支付\u3042", min_size=3990, max_size=4100))
def test_only_the_first_4000_characters_count(text):
    assert _script_language(text) == _reference(text)
