"""An applied change costs time in the change, not in the index: each add, replace or remove makes
a delta over the last full snapshot (`keyword_delta.DeltaSnapshot`), and a background rebuild folds it in.
Whatever the changes, the index answers every query exactly as an index built in full over the same entries:
the ranked hits and their order, ties, the pages counted, the generic decision, synonyms, claimants,
versions, `len` and the order of `entries()`."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kb_core.keywords.delta import DeltaSnapshot
from kb_core.keywords.entry import KnowledgeEntry
from kb_core.keywords.index import KnowledgeIndex
from kb_core.terms import normalize_term

# keywords that contain each other (AI, AI Security), CJK inside CJK, short words, a generic one, synonyms
KEYWORDS = ["AI", "AI Security", "ai-gateway", "CLI", "Plugin", "Lumen Plugin", "超时", "支付超时", "支付网关",
            "限流", "rate limiting", "limit-req", "ERR_TIMEOUT", "err_timeout_4071", "2.0 upgrade", "cors",
            "跨域", "gateway", "ab", "a b"]
SYNONYMS = (("限流", "rate limiting", "limit-req"), ("cors", "跨域", "cross-origin"), ("gateway", "网关"))
QUERIES = ["AI", "ai security", "Where can I read about AI Security", "explain the client", "CLI", "plugin",
           "Lumen Plugin 怎么配置", "支付网关超时问题", "支付", "超时", "how does rate limiting work", "limit",
           "cross-origin requests", "跨域", "ERR_TIMEOUT", "查询ERR_TIMEOUT的含义", "err_timeout_4071", "2.0",
           "upgrade to 2.0 upgrade", "网关", "gateway", "a", "ab", "a b", "timeout", "", "   "]
PATHS = [f"knowledge_base/{c}/{n}.md" for c in ("api", "ops") for n in ("a", "b", "c", "d", "e")]
GROUPS = ["", "", "", "page-1", "page-2"]  # most documents are pages of their own


def _entry(path: str, keywords: list[str], group: str, variant: int) -> KnowledgeEntry:
    lang = "zh" if variant % 2 else "en"
    return KnowledgeEntry(path, f"{path} v{variant}", tuple(keywords), "summary", category="api", lang=lang,
                          group=group)


def _index(matching: str, generic_docs: int | None, **limits: float) -> KnowledgeIndex:
    index = KnowledgeIndex("knowledge_base", app_root=Path.cwd(), matching=matching, generic_docs=generic_docs,
                           synonyms=SYNONYMS)
    for name, value in limits.items():
        setattr(index, name, value)
    return index


def _answers(index: KnowledgeIndex) -> dict:
    """Everything a lookup, the keyword map's callers or the console may ask of L0."""
    found = {}
    for query in QUERIES:
        matches = index.match(query)
        ranked = list(matches)
        first = ranked[0] if ranked else None
        found[query] = (
            ranked, len(matches), matches.tied_count(), matches.tied_with_first(), matches.group_count(),
            matches.group_count(frozenset(PATHS[:3])), matches.matched_terms, matches.generic_limit,
            first is not None and matches.is_generic(first.claimed_by),
            [matches.tied_index(p) for p in PATHS], [matches.find(p) for p in PATHS],
            index.exact_match(query),
        )
    for keyword in KEYWORDS:
        found[f"claimants {keyword}"] = (index.claimants(keyword), index.claimants(keyword, page="page-1"))
    for path in PATHS:
        found[f"get {path}"] = (index.get(path), index.versions(path), path in index)
    found["len"] = len(index)
    found["entries"] = index.entries()
    return found


change = st.tuples(st.sampled_from(["add", "add", "remove", "compact", "bulk"]), st.integers(0, len(PATHS) - 1),
                   st.lists(st.sampled_from(KEYWORDS), max_size=4), st.sampled_from(GROUPS), st.integers(0, 3))


@pytest.mark.parametrize("matching", ["words", "substring"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(change, max_size=25), st.sampled_from([None, 1, 2]))
def test_after_any_changes_the_index_answers_exactly_as_one_built_in_full(matching, changes, generic_docs):
    incremental = _index(matching, generic_docs, settle=3600.0)  # folded in only when the test says so
    full = _index(matching, generic_docs, delta_limit=0)  # every change rebuilds in full: the reference
    bulk: list = []
    for action, i, keywords, group, variant in changes:
        path = PATHS[i]
        if action == "compact":
            incremental.compact()
        elif action == "bulk":  # a few changes in one batch: applied as deltas at its end
            bulk.append((path, _entry(path, keywords, group, variant)))
            if len(bulk) == 3:
                with incremental.bulk(), full.bulk():
                    for index in (incremental, full):
                        index.add(bulk[0][1])
                        index.remove(bulk[1][0])
                        index.add(bulk[2][1])
                bulk = []
        else:
            for index in (incremental, full):
                if action == "add":
                    index.add(_entry(path, keywords, group, variant))
                else:
                    index.remove(path)
            assert action == "remove" or isinstance(incremental.view, DeltaSnapshot)
        assert _answers(incremental) == _answers(full)
    fresh = _index(matching, generic_docs)
    with fresh.bulk():
        for entry in full.entries():
            fresh.add(entry)
    assert _answers(incremental) == _answers(fresh)  # ... and as an index built from its entries at once
    assert incremental.suggest("ERR_TIMOUT") == fresh.suggest("ERR_TIMOUT")
    assert incremental.compact() == bool(incremental.view.delta_size) or not incremental.view.delta_size
    assert _answers(incremental) == _answers(fresh)


def test_a_change_swaps_in_a_delta_and_the_background_rebuild_folds_it_in():
    index = _index("words", None, settle=0.05)
    index.add(_entry(PATHS[0], ["AI"], "", 0))
    assert isinstance(index.view, DeltaSnapshot)
    deadline = time.monotonic() + 10
    while isinstance(index.view, DeltaSnapshot) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not isinstance(index.view, DeltaSnapshot) and [e.file_path for e in index.exact_match("AI")] == [PATHS[0]]


def test_a_full_delta_is_folded_at_once_and_changes_meanwhile_are_kept():
    index = _index("words", None, settle=3600.0, delta_limit=4)
    for i in range(12):
        index.add(_entry(PATHS[i % len(PATHS)], ["Plugin", f"kw{i}"], "", i))
    deadline = time.monotonic() + 10
    while index.view.delta_size >= 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert index.view.delta_size < 4
    reference = _index("words", None, delta_limit=0)
    for i in range(12):
        reference.add(_entry(PATHS[i % len(PATHS)], ["Plugin", f"kw{i}"], "", i))
    assert _answers(index) == _answers(reference)


def test_a_fold_replays_the_changes_made_while_it_built():
    index = _index("words", None, settle=3600.0)
    index.add(_entry(PATHS[0], ["AI", "Plugin"], "", 0))
    view = index.view
    real = view.consolidated

    def slow_build():  # a writer gets in while the full snapshot is being built
        index.add(_entry(PATHS[1], ["AI"], "", 1))
        index.remove(PATHS[0])
        return real()

    view.consolidated = slow_build
    assert index.compact()
    assert isinstance(index.view, DeltaSnapshot) and index.view.base.count == 1 and index.view.delta_size == 2
    assert [e.file_path for e in index.exact_match("AI")] == [PATHS[1]]


def test_a_synonym_reload_during_a_batch_rebuilds_at_its_end(tmp_path):
    index = KnowledgeIndex("knowledge_base", app_root=tmp_path)
    index.add(_entry(PATHS[0], ["限流"], "", 0))
    with index.bulk():
        index.add(_entry(PATHS[1], ["cors"], "", 0))
        index.use_synonyms((("限流", "rate limiting"),))
    assert [m.entry.file_path for m in index.match("rate limiting")] == [PATHS[0]]
    assert not isinstance(index.view, DeltaSnapshot)
    with index.bulk():  # a batch without changes: the groups apply at once
        index.use_synonyms((("cors", "跨域"),))
    assert [m.entry.file_path for m in index.match("跨域")] == [PATHS[1]] and not index.match("rate limiting")


def test_term_order_follows_the_first_claimant_as_a_full_build_numbers_terms():
    index = _index("words", None, settle=3600.0)
    index.add(_entry(PATHS[0], ["AI Security"], "", 0))
    index.add(_entry(PATHS[1], ["AI", "Plugin"], "", 0))
    index.compact()
    index.remove(PATHS[0])
    index.add(_entry(PATHS[0], ["AI Security"], "", 0))  # now after "AI" in index order
    assert index.match("ai").matched_terms == ("ai", normalize_term("AI Security"))


def _lookups(index: KnowledgeIndex, hits: list) -> list:
    """The agent JSON and the trace's decision of every query, as `HybridLookup` answers them."""
    from support.fakes import RecordingL1

    from kb_core import HybridLookup

    lookup = HybridLookup(index, RecordingL1(hits))
    found = []
    for query in QUERIES:
        result = lookup.lookup(query)
        trace = {k: v for k, v in result.trace.to_dict().items() if k not in ("requestId", "timingsMs")}
        found.append((result.to_dict(), trace))
    return found


@pytest.mark.parametrize("seed", range(3))
def test_lookups_after_refreshed_files_answer_as_with_an_index_built_in_full(tmp_path, seed):
    """The same through files and `refresh()` (as the change feed applies them), compared on whole lookups:
    primary, confidence, the generic decision, alternatives, translations, the trace."""
    import random

    from kb_core import L1Hit

    rng = random.Random(seed)
    incremental = KnowledgeIndex("knowledge_base", app_root=tmp_path, synonyms=SYNONYMS)
    incremental.settle = 3600.0
    full = KnowledgeIndex("knowledge_base", app_root=tmp_path, synonyms=SYNONYMS)
    full.delta_limit = 0
    hits = [L1Hit(content=f"passage {i}", source=PATHS[i], score=0.03) for i in (2, 5, 7)]
    for step in range(40):
        path = PATHS[rng.randrange(len(PATHS))]
        if rng.random() < 0.25:
            (tmp_path / path).unlink(missing_ok=True)
        else:
            group = rng.choice(GROUPS)
            keywords = rng.sample(KEYWORDS, rng.randint(1, 4))
            extra = f"translationKey: {group}\n" if group else ""
            (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / path).write_text(f"---\ntitle: T{step}\nkeywords: [{', '.join(keywords)}]\n{extra}"
                                         f"summary: s\n---\n\n# Body {step}\n\nText.\n", encoding="utf-8")
        for index in (incremental, full):
            index.refresh(path)
        if step % 10 == 9:
            incremental.compact()
        assert _lookups(incremental, hits) == _lookups(full, hits)
