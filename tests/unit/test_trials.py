"""The playground's retrieval test bench in kb_core, with the playground's category and language filters: the options
and their errors, each retriever, the category (with sub-folders) and language filters, the minimum score, the
query's terms in each row, the link parameters, the history per user, and console replays left out of the
"needs attention" counts. The agents' answer never changes."""

from __future__ import annotations

import json
import math
from datetime import timedelta

import pytest
from support.documents import doc, write_doc

from kb_core import Actor, KnowledgeBaseError, Role
from kb_core.console import MAX_TOP_K, REPLAY_CALLER, Retriever, TrialOptions, parse_trial_link, trial_link_params
from kb_core.errors import InvalidInputError
from kb_core.terms import coverage, term_spans

GATEWAY = "knowledge_base/gateway/limit-req.md"
PLUGINS = "knowledge_base/gateway/plugins/limit-count.md"
OLD = "knowledge_base/gateway-old/limit-legacy.md"
ZH = "knowledge_base/docs/zh/limit-req.md"
NOTES = "knowledge_base/ops/notes.md"

DOCS = {
    GATEWAY: doc("Limit requests", ["LIMIT_REQ_DOC"], "rate limiting by requests",
                 "# Limit requests\n\nRate limiting with limit-req: requests over the rate wait in a burst queue.\n\n"
                 "## Burst\n\nThe burst lets rate limiting absorb short peaks of requests.\n"),
    PLUGINS: doc("Limit count", ["LIMIT_COUNT_DOC"], "rate limiting by count",
                 "# Limit count\n\nRate limiting by count: each consumer has a quota of requests per window.\n"),
    OLD: doc("Legacy limits", ["LEGACY_DOC"], "old rate limiting",
             "# Legacy limits\n\nThe legacy rate limiting module counted requests in memory.\n"),
    ZH: doc("请求限流", ["ZH_LIMIT_DOC"], "按请求限流",
            "# 请求限流\n\n限流插件 limit-req 按请求速率限流，超出的请求进入突发队列。\n"),
    NOTES: "Rate limiting runbook\n\nWhen rate limiting rejects requests, check the quota of each consumer first.\n",
}


@pytest.fixture
def trial_kb(open_kb, tmp_path):
    """Nested categories, two languages and a document without frontmatter (L1 only), BM25 only."""
    for path, text in DOCS.items():
        write_doc(tmp_path, path, text)
    kb = open_kb()
    kb.documents.reconcile()
    return kb


def _sources(run) -> set[str]:
    return {row.source for row in run.rows}


# -- the options ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("top_k", [0, 21, -1, True, 2.5, "3", None])
def test_top_k_outside_1_to_20_is_refused(top_k):
    with pytest.raises(InvalidInputError, match="top-k must be a whole number from 1 to 20"):
        TrialOptions(retriever="bm25", top_k=top_k)


@pytest.mark.parametrize(("options", "message"), [
    ({"retriever": "bm42"}, "unknown retriever 'bm42': use one of agent, hybrid, bm25, dense"),
    ({"retriever": "bm25", "min_score": -0.1}, "the minimum score must be a number of at least 0"),
    ({"retriever": "bm25", "min_score": math.nan}, "the minimum score must be a number of at least 0"),
    ({"retriever": "bm25", "min_score": math.inf}, "the minimum score must be a number of at least 0"),
    ({"retriever": "bm25", "min_score": True}, "the minimum score must be a number of at least 0"),
    ({"retriever": "bm25", "categories": ["my plugins"]}, "invalid category 'my plugins'"),
    ({"retriever": "bm25", "categories": ["../etc"]}, "invalid category '../etc'"),
    ({"retriever": "bm25", "categories": [3]}, "categories must be a list of strings"),
    ({"retriever": "bm25", "languages": ["klingon"]}, "unknown language 'klingon'"),
    ({"top_k": 10}, "top-k cannot apply to 'as agents get it'"),
    ({"categories": ["gateway"], "min_score": 1}, "category, minimum score cannot apply to 'as agents get it'"),
])
def test_bad_options_raise_a_clear_error_from_the_root(options, message):
    with pytest.raises(InvalidInputError, match=message.replace("(", r"\(").replace(")", r"\)")) as raised:
        TrialOptions(**options)
    assert isinstance(raised.value, KnowledgeBaseError)


def test_options_are_normalised_and_frozen():
    options = TrialOptions(retriever="BM25", top_k=MAX_TOP_K, categories=["gateway/", "api", "api"],
                           languages=["zh-CN", "en", "und"], min_score=1)
    assert options == TrialOptions(Retriever.BM25, 20, ("api", "gateway"), ("en", "und", "zh"), 1.0)
    assert options.describe() == "BM25 only · top 20 · in api, gateway · lang en, und, zh · BM25 score ≥ 1"
    assert TrialOptions.from_dict(json.loads(json.dumps(options.to_dict()))) == options
    with pytest.raises(AttributeError):
        options.top_k = 3  # type: ignore[misc]
    assert TrialOptions(retriever="bm25", top_k=1).top_k == 1


def test_a_link_holds_the_query_and_only_the_options_that_differ():
    assert trial_link_params("超时", TrialOptions()) == {"q": "超时"}
    options = TrialOptions(retriever="hybrid", top_k=10, categories=("api", "gateway/plugins"), languages=("zh",),
                           min_score=0.0125)
    params = trial_link_params("rate limiting", options, "Burst")
    assert params == {"q": "rate limiting", "section": "Burst", "retriever": "hybrid", "k": "10",
                      "category": ["api", "gateway/plugins"], "lang": ["zh"], "min_score": "0.0125"}
    assert parse_trial_link(params) == ("rate limiting", "Burst", options)
    # as a browser sends them: every value a list, a repeated key several
    assert parse_trial_link({k: v if isinstance(v, list) else [v] for k, v in params.items()}) == \
        ("rate limiting", "Burst", options)
    assert parse_trial_link({"q": "x", "utm_source": "mail"}) == ("x", None, TrialOptions())


@pytest.mark.parametrize(("params", "message"), [
    ({"q": "x", "retriever": "bm25", "k": "ten"}, "top-k (k) must be a whole number"),
    ({"q": "x", "retriever": "bm25", "k": "50"}, "top-k must be a whole number from 1 to 20"),
    ({"q": "x", "retriever": "bm25", "min_score": "high"}, "the minimum score (min_score) must be a number"),
    ({"q": "x", "k": "5"}, "cannot apply to 'as agents get it'"),
    ({"q": "x", "retriever": "sql"}, "unknown retriever"),
])
def test_a_bad_link_raises_a_clear_error(params, message):
    with pytest.raises(InvalidInputError) as raised:
        parse_trial_link(params)
    assert message in str(raised.value)


# -- the query's terms ----------------------------------------------------------------------------------------
def _marked(query: str, text: str) -> list[str]:
    return [text[a:b] for a, b in term_spans(query, text)]


def test_term_spans_are_what_the_relevance_check_counts():
    assert _marked("如何处理超时", "接口超时排查：超时类错误") == ["超时", "超时"]  # 如何 is filler, CJK by jieba
    assert _marked("ERR_TIMEOUT", "err_timeout, ERR_TIMEOUT_4071 and ERR_TIMEOUT.") == ["err_timeout", "ERR_TIMEOUT"]
    assert _marked("what is the burst", "The Burst lets bursts through") == ["Burst", "burst"]
    assert _marked("connections", "Connection pools hold connections") == ["Connection", "connections"]
    assert _marked("the of", "the end of it") == []  # stop words are no terms
    # a word's middle is no match, its start is ("demonst[rate]s" was marked, and counted by the relevance check)
    assert _marked("rate limit", "This demonstrates the rate limiter; rates vary") == ["rate", "limit", "rate"]
    assert coverage(["rate"], "it demonstrates a moderate change") == (0.0, [])
    assert _marked("", "anything") == [] and _marked("x", "") == []
    text = "İİ burst İ"  # "İ" lower-cases to two characters: offsets still point into the text
    assert _marked("burst", text) == ["burst"]


# -- runs -----------------------------------------------------------------------------------------------------
def test_the_agents_answer_is_the_tool_output_whatever_the_options(trial_kb):
    """Byte for byte the tool's answer to the call the bench shows: one category and one language go into that
    call, as an agent would send them; the other options narrow only the bench's rows."""
    for query in ("rate limiting", "LIMIT_REQ_DOC", "限流", "nothing like this exists XYZ42"):
        for options, filters in ((TrialOptions(), {}),
                                 (TrialOptions(retriever="bm25", top_k=20, categories=["gateway"], languages=["en"],
                                               min_score=0.5), {"category": "gateway", "language": "en"}),
                                 (TrialOptions(retriever="bm25", categories=["gateway", "ops"]), {})):
            expected = json.dumps(trial_kb.lookup_knowledge(query, **filters), ensure_ascii=False)
            run = trial_kb.playground.run(query, options)
            assert json.dumps(run.payload, ensure_ascii=False) == expected, (query, options)
            assert {k: v for k, v in run.arguments.items() if k in ("category", "language")} == filters


def test_as_agents_get_it_shows_the_lookups_own_l1_rows(trial_kb):
    run = trial_kb.playground.run("rate limiting requests")
    assert run.result.trace.l1_called
    assert [(r.source, r.fused_score) for r in run.rows] == [(h.source, h.score) for h in run.result.trace.l1_hits]
    assert all(r.score == r.fused_score for r in run.rows) and len(run.rows) <= 3
    unique = trial_kb.playground.run("LIMIT_REQ_DOC")  # one exact L0 hit: the agent got no L1 rows
    assert unique.rows == () and "did not run L1" in unique.note


def test_top_k_bounds_the_l1_rows(trial_kb):
    one = trial_kb.playground.run("rate limiting requests", TrialOptions(retriever="hybrid", top_k=1))
    many = trial_kb.playground.run("rate limiting requests", TrialOptions(retriever="hybrid", top_k=20))
    assert len(one.rows) == 1
    assert len(many.rows) > 3  # more than the agents' three
    assert many.rows[0].source == one.rows[0].source
    assert [r.rank for r in many.rows] == list(range(1, len(many.rows) + 1))


def test_bm25_only_scores_rows_with_the_bm25_score_and_hybrid_with_the_fused_one(trial_kb):
    bm25 = trial_kb.playground.run("rate limiting requests", TrialOptions(retriever="bm25", top_k=10))
    hybrid = trial_kb.playground.run("rate limiting requests", TrialOptions(retriever="hybrid", top_k=10))
    assert bm25.rows and all(r.retrievers == ("bm25",) for r in bm25.rows)
    assert all(r.score == dict(r.retriever_scores)["bm25"] for r in bm25.rows)
    assert all(r.score == r.fused_score for r in hybrid.rows)
    assert bm25.score_name == "BM25 score" and hybrid.score_name == "fused score"
    assert [r.source for r in bm25.rows] == [r.source for r in hybrid.rows]  # no model: hybrid is BM25 alone


def test_dense_only_needs_the_model(trial_kb):
    with pytest.raises(InvalidInputError, match="dense only needs the embedding model"):
        trial_kb.playground.run("rate limiting", TrialOptions(retriever="dense"))
    assert trial_kb.calls.recent() == []  # refused before anything ran


def test_dense_only_runs_the_dense_retriever_alone(open_kb, tmp_path, tiny_model):
    for path, text in DOCS.items():
        write_doc(tmp_path, path, text)
    kb = open_kb(model=str(tiny_model), min_dense_score=-1.0)  # random weights: let every cosine count
    kb.documents.reconcile()
    run = kb.playground.run("rate limiting requests", TrialOptions(retriever="dense", top_k=5, languages=["zh"]))
    assert run.rows and all(r.retrievers == ("dense",) for r in run.rows)
    assert all(r.score == dict(r.retriever_scores)["dense"] for r in run.rows)
    assert _sources(run) == {ZH}  # the language filter reaches Milvus' dense search too
    hybrid = kb.playground.run("rate limiting requests", TrialOptions(retriever="hybrid", top_k=20))
    assert any(r.retrievers == ("dense", "bm25") for r in hybrid.rows)


def test_a_category_takes_its_sub_folders_and_not_its_siblings(trial_kb):
    wide = TrialOptions(retriever="bm25", top_k=20)
    assert {GATEWAY, PLUGINS, OLD} <= _sources(trial_kb.playground.run("rate limiting requests", wide))
    run = trial_kb.playground.run("rate limiting requests", TrialOptions(retriever="bm25", top_k=20,
                                                                    categories=["gateway"]))
    assert _sources(run) == {GATEWAY, PLUGINS} and run.searched == 2
    sub = trial_kb.playground.run("rate limiting requests", TrialOptions(retriever="bm25", top_k=20,
                                                                    categories=["gateway/plugins", "ops"]))
    assert _sources(sub) == {PLUGINS, NOTES}
    with pytest.raises(InvalidInputError, match="there is no category 'gate'"):
        trial_kb.playground.run("rate limiting", TrialOptions(retriever="bm25", categories=["gate"]))


def test_a_language_filter_serves_documents_in_that_language_only(trial_kb):
    assert sorted(set(trial_kb.documents.languages().values())) == ["en", "zh"]
    zh = trial_kb.playground.run("limit-req 限流", TrialOptions(retriever="bm25", top_k=20, languages=["zh"]))
    assert _sources(zh) == {ZH} and all(r.lang == "zh" for r in zh.rows)
    en = trial_kb.playground.run("rate limiting requests", TrialOptions(retriever="bm25", top_k=20, languages=["en"]))
    assert ZH not in _sources(en) and NOTES in _sources(en)  # without frontmatter: the language of its text
    nothing = trial_kb.playground.run("rate limiting", TrialOptions(retriever="bm25", languages=["fr"]))
    assert nothing.rows == () and nothing.searched == 0 and "No document is in the chosen" in nothing.note


def test_a_minimum_score_keeps_rows_at_or_above_it_and_fills_top_k_from_the_rest(trial_kb):
    every = trial_kb.playground.run("rate limiting requests", TrialOptions(retriever="bm25", top_k=20))
    scores = sorted(r.score for r in every.rows)
    middle = scores[len(scores) // 2]
    kept = trial_kb.playground.run("rate limiting requests",
                              TrialOptions(retriever="bm25", top_k=20, min_score=middle))
    assert kept.rows and all(r.score >= middle for r in kept.rows)
    assert len(kept.rows) == sum(1 for s in scores if s >= middle)
    top = trial_kb.playground.run("rate limiting requests",
                             TrialOptions(retriever="bm25", top_k=1, min_score=scores[0]))
    assert len(top.rows) == 1
    above = trial_kb.playground.run("rate limiting requests",
                               TrialOptions(retriever="bm25", top_k=20, min_score=scores[-1] + 1))
    assert above.rows == ()


def test_each_row_says_where_the_querys_terms_are(trial_kb):
    run = trial_kb.playground.run("burst 限流", TrialOptions(retriever="bm25", top_k=20))
    assert run.rows
    for row in run.rows:
        marked = {row.content[a:b].lower() for a, b in row.highlights}
        assert marked and marked <= {"burst", "限流"}, (row.source, marked)


# -- history --------------------------------------------------------------------------------------------------
def test_each_user_sees_their_own_history_newest_first(trial_kb):
    alice = trial_kb.as_user(Actor("alice@example.com", Role.VIEWER))
    bob = trial_kb.as_user(Actor("bob@example.com", Role.CURATOR))
    alice.playground.run("rate limiting")
    bob.playground.run("限流", TrialOptions(retriever="bm25", top_k=7, languages=["zh"]), section_title="Burst")
    alice.playground.run("LIMIT_REQ_DOC", TrialOptions(retriever="hybrid", min_score=0.01))
    alice.playground.run("   ")  # a blank query is the tool's error, not a test worth keeping
    assert [e.query for e in alice.playground.history()] == ["LIMIT_REQ_DOC", "rate limiting"]
    assert alice.playground.history()[0].options == TrialOptions(retriever="hybrid", min_score=0.01)
    assert alice.playground.history()[0].answer == "exact_L0" and alice.playground.history()[0].found
    [entry] = bob.playground.history()
    assert (entry.query, entry.section_title, entry.options) == \
        ("限流", "Burst", TrialOptions(retriever="bm25", top_k=7, languages=["zh"]))
    assert trial_kb.playground.history() == []  # the service identity ran nothing
    assert [e.query for e in alice.playground.history(1)] == ["LIMIT_REQ_DOC"]


def test_the_history_keeps_each_users_newest_runs(trial_kb, monkeypatch):
    import kb_core.storage.query_history as history

    monkeypatch.setattr(history, "KEEP", 3)
    carol = trial_kb.as_user(Actor("carol@example.com", Role.VIEWER))
    dave = trial_kb.as_user(Actor("dave@example.com", Role.VIEWER))
    dave.playground.run("dave's only run")
    for i in range(5):
        carol.playground.run(f"run {i}")
    assert [e.query for e in carol.playground.history(10)] == ["run 4", "run 3", "run 2"]
    assert [e.query for e in dave.playground.history(10)] == ["dave's only run"]


def test_a_run_the_history_cannot_take_still_answers(trial_kb, monkeypatch):
    from kb_core.bootstrap import parts_of
    from kb_core.errors import MetadataStoreError

    def refuse(**_fields):
        raise MetadataStoreError("cannot record the query in the history: the database is read-only")

    monkeypatch.setattr(parts_of(trial_kb).metadata, "record_query", refuse)
    run = trial_kb.playground.run("rate limiting")
    assert run.payload["found"] and "read-only" in run.history_error


# -- replays and the attention counts ---------------------------------------------------------------------------
def test_a_console_replay_is_logged_but_never_needs_attention(trial_kb):
    console = trial_kb.as_user(Actor("console", Role.ADMIN))
    console.playground.run("quantum flux capacitor")  # nothing answers it: needs attention, once
    console.playground.run("quantum flux capacitor", replay=True)  # opened again from Tool calls
    console.playground.run("quantum flux capacitor", TrialOptions(retriever="bm25"), replay=True)  # the history
    trial_kb.calls.flush()
    callers = [c.caller for c in trial_kb.calls.recent()]
    assert callers == [REPLAY_CALLER, REPLAY_CALLER, "console"]
    [group] = trial_kb.calls.needing_attention(timedelta(days=1))
    assert (group.query, group.calls, group.not_found) == ("quantum flux capacitor", 1, 1)
    console.playground.run("another unknown thing", replay=True)  # only ever replayed: not listed at all
    assert [g.query for g in trial_kb.calls.needing_attention(timedelta(days=1))] == ["quantum flux capacitor"]
