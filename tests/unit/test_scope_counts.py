"""Counts a caller limited to some pages is shown: how many pages claim a keyword ("claimed by N" in
the trace, the why text and an alternative's `why`), which keyword of a hit is its rarest, and the generic
limit, count only the pages it may read - so the L0 decision is the one a knowledge base without the other
pages would make. Callers that read every page (narrowed by category or not) keep the whole tree's counts.

The lookup logic on an L0 index from files, with an L1 that finds nothing."""

from __future__ import annotations

import pytest
from support.documents import doc, write_doc

from kb_core import HybridLookup, KnowledgeIndex
from kb_core.documents.scope import Scope
from kb_core.retrieval.decision import DECIDED_GENERIC_MISS, DECIDED_TIE

SUPPORT = Scope(audiences=frozenset({"support"}))


class NoL1:
    def search(self, query, top_k=3, category=None, doc_ids=None):
        return []


def page(root, name: str, keywords: list[str], audience: str = "") -> None:
    text = doc(f"Page {name}", keywords, body=f"# Page {name}\n\nNotes on {name}.\n")
    if audience:
        text = text.replace("summary:", f"audience: [{audience}]\nsummary:")
    write_doc(root, f"knowledge_base/area/{name}.md", text)


def lookup_of(root) -> HybridLookup:
    index = KnowledgeIndex("knowledge_base", app_root=root)
    index.load()
    return HybridLookup(index, NoL1())


def without_time(payload: dict) -> dict:
    if payload.get("primary"):
        payload["primary"].pop("updated")
    return payload


@pytest.fixture
def claimed(tmp_path):
    """`shared-kw`: two public pages and one for `sre`. Page x: `alpha-one` (x and y claim it) and `beta-two`
    (x and two `sre` pages): its rarest keyword is `alpha-one` in the whole tree, `beta-two` for `support`."""
    page(tmp_path, "a", ["shared-kw", "page-a"])
    page(tmp_path, "b", ["shared-kw", "page-b"])
    page(tmp_path, "c", ["shared-kw", "page-c"], audience="sre")
    page(tmp_path, "x", ["alpha-one", "beta-two"])
    page(tmp_path, "y", ["alpha-one"])
    page(tmp_path, "h1", ["beta-two"], audience="sre")
    page(tmp_path, "h2", ["beta-two"], audience="sre")
    return lookup_of(tmp_path)


def test_claimed_by_counts_the_pages_the_caller_may_read(claimed):
    everyone = claimed.lookup("shared-kw")
    assert {m.claimed_by for m in everyone.trace.l0_matches} == {3}
    assert "(claimed by 3)" in everyone.trace.primary_reason

    scoped = claimed.lookup("shared-kw", scope=SUPPORT)
    assert len(scoped.trace.l0_matches) == 2
    assert {m.claimed_by for m in scoped.trace.l0_matches} == {2}
    assert {m["claimedBy"] for m in scoped.trace.to_dict()["l0Matches"]} == {2}
    assert "(claimed by 2)" in scoped.trace.primary_reason and "claimed by 3" not in scoped.trace.primary_reason
    why = [a["why"] for a in scoped.to_dict().get("alternatives", ())]
    assert why and all("claimed by 2 documents" in w for w in why), why
    # narrowed by a question's category, a caller reading every page keeps the whole tree's counts
    narrowed = claimed.lookup("shared-kw", scope=Scope(categories=("area",)))
    assert {m.claimed_by for m in narrowed.trace.l0_matches} == {3}


def test_a_hits_rarest_keyword_is_the_rarest_among_the_readable_pages(claimed):
    def rarest(scope):
        result = claimed.lookup("alpha-one", scope=scope) if scope else claimed.lookup("alpha-one")
        match = next(m for m in result.trace.l0_matches if m.entry.file_path.endswith("/x.md"))
        return match.rarest_keyword, match.claimed_by

    assert rarest(None) == ("alpha-one", 2)
    assert claimed.lookup("beta-two").trace.l0_matches[0].claimed_by == 3
    # the query equals `alpha-one`: that keyword ranked x and stays the one shown, counted for the caller
    assert rarest(SUPPORT) == ("alpha-one", 2)
    result = claimed.lookup("x alpha-one beta-two", scope=SUPPORT)
    match = next(m for m in result.trace.l0_matches if m.entry.file_path.endswith("/x.md"))
    assert (match.rarest_keyword, match.claimed_by) == ("beta-two", 1)
    everyone = claimed.lookup("x alpha-one beta-two")
    match = next(m for m in everyone.trace.l0_matches if m.entry.file_path.endswith("/x.md"))
    assert (match.rarest_keyword, match.claimed_by) == ("alpha-one", 2)


def test_a_keyword_generic_only_through_hidden_pages_decides_as_without_them(tmp_path):
    """Six pages claim `lumen-plugin`, two of them for `sre`: generic (more than five) in the whole tree, four
    specific ones for `support` - which gets the answer of a tree holding only its four."""
    for n in range(6):
        page(tmp_path / "full", f"p{n}", ["lumen-plugin", f"plugin-{n}"], audience="sre" if n >= 4 else "")
        if n < 4:
            page(tmp_path / "seen", f"p{n}", ["lumen-plugin", f"plugin-{n}"])
    full, seen = lookup_of(tmp_path / "full"), lookup_of(tmp_path / "seen")

    assert full.lookup("lumen-plugin").trace.decision == DECIDED_GENERIC_MISS
    scoped, alone = full.lookup("lumen-plugin", scope=SUPPORT), seen.lookup("lumen-plugin")
    assert scoped.trace.decision == alone.trace.decision == DECIDED_TIE
    assert scoped.trace.primary_reason == alone.trace.primary_reason
    assert without_time(scoped.to_dict()) == without_time(alone.to_dict())
    assert scoped.to_dict()["primary"]["source"].endswith("/p0.md")


def test_the_generic_limit_is_one_percent_of_the_pages_the_caller_may_read(tmp_path):
    """600 pages, 100 of them for `sre`: the limit is 6 for the whole tree and 5 (the floor) for `support`, so a
    keyword six readable pages claim is generic for it, as in a tree of its 500 pages."""
    for n in range(600):
        page(tmp_path, f"p{n:03d}", [f"page-{n:03d}"] + (["six-claim"] if n < 6 else []),
             audience="sre" if n >= 500 else "")
    lookup = lookup_of(tmp_path)
    everyone, scoped = lookup.lookup("six-claim"), lookup.lookup("six-claim", scope=SUPPORT)
    assert everyone.trace.generic_limit == 6 and everyone.trace.decision == DECIDED_TIE
    assert scoped.trace.generic_limit == 5 and scoped.trace.decision == DECIDED_GENERIC_MISS
    # a page for everyone still counts for everyone: the unlimited caller's limit is the whole tree's
    assert lookup.lookup("six-claim", scope=Scope(languages=("en",))).trace.generic_limit == 6
