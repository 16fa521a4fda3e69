"""`KnowledgeEntry`: a small frozen value (one per document in every process) that behaves like the dataclass
it replaced: equal and hashed by its fields, pickled, copied with changes, never changed in place."""

from __future__ import annotations

import pickle
from dataclasses import FrozenInstanceError

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kb_core.keywords.entry import KnowledgeEntry

text = st.text(max_size=30)
entries = st.builds(
    KnowledgeEntry, file_path=text, title=text, keywords=st.lists(text, max_size=5).map(tuple), summary=text,
    category=st.none() | text, ignored_keywords=st.lists(st.tuples(text, text), max_size=2).map(tuple),
    sections=st.none() | st.lists(text, max_size=4).map(tuple),
    section_names=st.lists(st.tuples(text, text), max_size=2).map(tuple), lang=st.sampled_from(["en", "zh", "und"]),
    group=text)


@given(entries)
def test_every_field_reads_back_and_survives_pickle_and_replace(entry):
    values = entry.as_dict()
    again = KnowledgeEntry(**values)
    assert again == entry and hash(again) == hash(entry) and again.as_dict() == values
    restored = pickle.loads(pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL))
    assert restored == entry and restored.as_dict() == values and hash(restored) == hash(entry)
    changed = entry.replace(title=entry.title + "!")
    assert changed != entry and changed.title == entry.title + "!" and changed.keywords == entry.keywords


def test_fields_compare_by_value_not_by_how_they_were_packed():
    title = "超时排查"
    a = KnowledgeEntry("kb/api/a.md", title, ("ERR_TIMEOUT",), "s", "api", sections=(title, title))
    shared = [title]  # the same string held elsewhere too (marshal may pack it with a back-reference)
    b = KnowledgeEntry("kb/api/a.md", "".join(["超时", "排查"]), ("".join(["ERR_", "TIMEOUT"]),), "s", "api",
                       sections=(shared[0], "超时排查"))
    assert a == b and hash(a) == hash(b) and {a, b} == {a}
    assert a != a.replace(sections=None) and a != a.replace(group="path:x")
    assert a.sections == (title, title) and a.replace(sections=None).sections is None


def test_an_entry_cannot_be_changed_in_place():
    entry = KnowledgeEntry("kb/api/a.md", "T", ("k",), "s")
    with pytest.raises(FrozenInstanceError):
        entry.title = "other"  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        entry.keywords = ()  # type: ignore[misc]
    with pytest.raises(TypeError):
        entry.replace(colour="red")
    assert not hasattr(entry, "__dict__")  # slots: no per-entry dict


def test_keywords_and_categories_are_shared_between_entries():
    a = KnowledgeEntry("kb/api/a.md", "A", ("Plugin", "ERR_A"), "", "api")
    b = KnowledgeEntry("kb/api/b.md", "B", ("".join(["Plug", "in"]),), "", "".join(["a", "pi"]))  # new strings
    assert a.keywords[0] is b.keywords[0] and a.category is b.category


def test_a_long_section_list_is_kept_deflated_and_reads_back_whole():
    headings = tuple(f"{i}. Configure the limit-req Plugin for route {i}" for i in range(40))
    entry = KnowledgeEntry("kb/api/a.md", "T", ("k",), "a summary " * 20, "api", sections=headings)
    short = KnowledgeEntry("kb/api/b.md", "T", ("k",), "s", "api", sections=("one",))
    assert entry.sections == headings and entry.summary == "a summary " * 20 and short.sections == ("one",)
    assert len(entry._cold) < len("".join(headings))  # deflated (a third of it here)
    assert entry == KnowledgeEntry(**entry.as_dict()) and pickle.loads(pickle.dumps(entry)) == entry
