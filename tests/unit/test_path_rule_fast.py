"""The path rule's shortcuts give exactly the full rule's answers: a plain ASCII file name skips the full checks,
and a category's verdict is remembered (the scan asks both once per file: 100,000 files open in seconds)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kb_core.documents import path_rule
from kb_core.errors import UploadRejected

# Names near the shortcut's edge: dots, dashes, case, reserved device names, look-alike slashes, spaces, CJK.
PIECES = st.sampled_from(["a", "Z", "0", "_", "-", ".", "..", "md", "MD", ".md", ".markdown", "con", "NUL",
                          "com1", "lpt9", " ", "\u2215", "页", "\u00e9", "e\u0301", ":", "*", "\t", "x" * 60])


def _verdict(check, value):
    try:
        return "ok", check(value)
    except UploadRejected as exc:
        return "refused", str(exc)


@settings(max_examples=3000, deadline=None)
@given(st.lists(PIECES, min_size=1, max_size=8).map("".join))
def test_a_file_name_gets_the_full_rule_s_answer(name):
    assert _verdict(path_rule.validate_file_name, name) == _verdict(path_rule._validate_file_name_fully, name)


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.lists(PIECES, min_size=1, max_size=4).map("".join), min_size=1, max_size=4).map("/".join))
def test_a_category_s_remembered_verdict_is_the_rule_s(category):
    first = path_rule.category_problem(category)
    assert path_rule.category_problem(category) == first  # asked again: the remembered answer
    assert path_rule._category_string_problem.__wrapped__(category) == first  # the rule itself, not remembered
