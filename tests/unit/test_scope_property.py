"""No caller ever receives what it may not read, as a property: a tree of pages with random
audiences, folders and languages (translations whose versions have different audiences among them), opened on
real stores; random callers (audiences, allowed folders) asking random questions through both tools, with and
without category and language filters. Every source, title and page text an answer carries must belong to a
page the caller may read and, for lookup_knowledge, one inside the question's filters.

The oracle below is written apart from `documents.scope`: it decides from the generated pages alone."""

from __future__ import annotations

import json
import random
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kb_core.documents.scope import Scope

GROUPS = ("support", "sre", "sales")
PRODUCTS = ("gateway", "registry", "billing")
SHARED = ("rate-limit", "retry-policy", "tls-setup", "audit-log")  # keywords several pages claim
WORDS = ("connection", "upstream", "timeout", "quota", "consumer", "certificate", "rotation", "webhook",
         "replica", "snapshot", "throttle", "backoff", "ledger", "invoice", "namespace", "heartbeat")


def _tree(seed: int) -> list[dict]:
    rnd = random.Random(seed)
    pages = []
    for n in range(36):
        product = rnd.choice(PRODUCTS)
        sub = rnd.choice(("", "/guides", "/reference"))
        audience = sorted(rnd.sample(GROUPS, rnd.choice((0, 0, 1, 1, 2))))
        words = rnd.sample(WORDS, 5)
        shared = rnd.sample(SHARED, rnd.choice((0, 1, 2)))
        langs = ("en", "zh") if n % 4 == 0 else (rnd.choice(("en", "zh")),)
        for lang in langs:
            # a translation may have another audience than its original: neither may leak through the other
            own = audience if lang == langs[0] else sorted(rnd.sample(GROUPS, rnd.choice((0, 1))))
            pages.append({"n": n, "lang": lang, "category": f"{product}{sub}/{lang}", "audience": own,
                          "marker": f"marker{n:03d}{lang}", "title": f"Page {n:03d} {lang} {words[0]} guide",
                          "keywords": [f"PAGE-{n:03d}", *shared], "words": words})
    return pages


def _text(page: dict) -> str:
    audience = f"audience: [{', '.join(page['audience'])}]\n" if page["audience"] else ""
    body = " ".join(page["words"])
    return (f"---\ntitle: {page['title']}\nkeywords: [{', '.join(page['keywords'])}]\nsummary: {body}\n"
            f"{audience}---\n\n# {page['title']}\n\nThe {page['marker']} notes on {body}.\n\n"
            f"## Details\n\nMore about {page['words'][1]} and {page['words'][2]} for {page['marker']}.\n")


def _source(page: dict) -> str:
    return f"knowledge_base/{page['category']}/page{page['n']:03d}.md"


@pytest.fixture(scope="module")
def tree_kb(tmp_path_factory):
    from support.stores import make_settings

    from kb_core.bootstrap import open_knowledge_base

    root = tmp_path_factory.mktemp("scoped")
    pages = _tree(20261203)
    for page in pages:
        path = root / _source(page)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_text(page), encoding="utf-8")
    kb = open_knowledge_base(make_settings(root))
    kb.documents.reconcile()
    assert len(kb.documents.list()) == len(pages)
    yield kb, pages
    kb.close()
    shutil.rmtree(root, ignore_errors=True)


def _may_read(page: dict, audiences: frozenset[str] | None, folders: tuple[str, ...]) -> bool:
    top = page["category"].split("/")[0]
    if folders and top not in folders:
        return False
    return audiences is None or not page["audience"] or bool(audiences & set(page["audience"]))


def _in_filters(page: dict, category: str | None, language: str | None) -> bool:
    ok_category = category is None or page["category"] == category or page["category"].startswith(category + "/")
    return ok_category and (language is None or page["lang"] == language)


callers = st.tuples(st.one_of(st.none(), st.frozensets(st.sampled_from(GROUPS))),
                    st.lists(st.sampled_from(PRODUCTS), max_size=2, unique=True).map(tuple))
questions = st.one_of(
    st.integers(0, 35).map(lambda n: f"PAGE-{n:03d}"),  # a page's own keyword
    st.sampled_from(SHARED),  # a keyword several pages claim
    st.integers(0, 35).map(lambda n: f"what are the marker{n:03d}en notes"),  # a page's text, through L1
    st.lists(st.sampled_from(WORDS), min_size=2, max_size=4).map(lambda w: "how do I configure " + " ".join(w)),
    st.integers(0, 35).map(lambda n: f"PAGE-{n:03d}X"),  # a typing slip: suggestions
    st.sampled_from(SHARED).map(lambda k: k.replace("-", "")),
)
filters = st.tuples(st.one_of(st.none(), st.sampled_from(["gateway", "registry/guides", "billing/reference/zh"])),
                    st.one_of(st.none(), st.sampled_from(["en", "zh"])))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(caller=callers, question=questions, narrowed=filters, section=st.sampled_from([None, "Details"]))
def test_no_caller_receives_a_page_outside_its_audiences_and_categories(tree_kb, caller, question, narrowed,
                                                                         section):
    kb, pages = tree_kb
    audiences, folders = caller
    category, language = narrowed
    scope = Scope(audiences=audiences, allowed_categories=folders)
    answer = kb.lookup_knowledge(question, section, category=category, language=language, scope=scope)
    assert "error" not in answer, answer
    shown = json.dumps(answer, ensure_ascii=False)
    for page in pages:
        if _may_read(page, audiences, folders) and _in_filters(page, category, language):
            continue
        for leak in (_source(page), page["marker"], page["title"]):
            assert leak not in shown, (leak, caller, question, narrowed, answer)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(caller=callers, which=st.integers(0, 40), language=st.sampled_from([None, "en", "zh"]))
def test_read_document_serves_only_what_the_caller_may_read(tree_kb, caller, which, language):
    kb, pages = tree_kb
    audiences, folders = caller
    page = pages[which % len(pages)]
    answer = kb.read_document_tool(_source(page), language=language,
                                   scope=Scope(audiences=audiences, allowed_categories=folders))
    shown = json.dumps(answer, ensure_ascii=False)
    if not _may_read(page, audiences, folders):
        assert answer["found"] is False and "no indexed document" in answer["error"]
    for other in pages:
        if not _may_read(other, audiences, folders):
            # the error names the source the caller asked for, which it knew already: never another
            for leak in (() if other is page else (_source(other),)) + (other["marker"], other["title"]):
                assert leak not in shown, (leak, caller, page["n"], answer)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(caller=callers, question=questions, category=st.one_of(st.none(), st.sampled_from(["gateway", "registry"])))
def test_every_claimed_by_count_a_caller_is_shown_counts_pages_it_may_read(tree_kb, caller, question, category):
    """A count is as much a leak as a title: "claimed by N" counts the pages (a page's translations once) the
    caller may read, whatever the question is narrowed to."""
    kb, pages = tree_kb
    audiences, folders = caller
    result = kb.lookup(question, scope=Scope(audiences=audiences, allowed_categories=folders,
                                             categories=(category,) if category else ()))
    for match in result.trace.l0_matches:
        keyword = match.rarest_keyword.casefold()
        readable = {p["n"] for p in pages if keyword in {k.casefold() for k in p["keywords"]}
                    and _may_read(p, audiences, folders)}
        assert match.claimed_by == len(readable), (question, caller, match.rarest_keyword)
