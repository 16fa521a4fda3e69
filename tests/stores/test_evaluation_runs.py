"""Evaluation in the console (kb_core/evaluation/service.py): labelled query sets imported from JSONL or labelled
one by one, evaluation runs as `evaluate` jobs scored by the same code as `kb evaluate`, two runs compared, and
who may do what. Real stores: SQLite and MariaDB, Milvus Lite, the realistic fixture knowledge base."""

from __future__ import annotations

import json

import pytest
from support.paths import FIXTURES

from kb_core.access import Actor, Role
from kb_core.errors import AccessDeniedError, InvalidInputError
from kb_core.evaluation.runs import compare_runs
from kb_core.evaluation.scoring import evaluate, load_queries
from kb_core.jobs.model import JobState
from kb_core.storage.evaluation_store import StoredOutcome, StoredRun

QUERIES = FIXTURES / "realistic_queries.jsonl"
VIEWER = Actor("vera@example.com", Role.VIEWER)
CURATOR = Actor("carl@example.com", Role.CURATOR)

PROXY = "How does the proxy-rewrite plugin change the upstream URI?"
STEADY = [{"query": "keepalive_pool_size", "kind": "identifier", "expected": ["gateway/upstream.md"]},
          {"query": "nacos.server_addr", "kind": "identifier", "expected": ["registry/overview.md"]},
          {"query": "LMN_UPSTREAM_TIMEOUT_4071", "kind": "unknown_code", "expected": []}]


def _jsonl(items) -> bytes:
    return "\n".join(json.dumps(i, ensure_ascii=False) for i in items).encode()


@pytest.fixture
def realistic(open_kb, db_url):
    kb = open_kb(tree=FIXTURES / "realistic_kb", db_url=db_url)
    assert kb.documents.reconcile().failed == ()
    return kb


def _run(kb, set_name: str):
    job = kb.evaluation.start(set_name)
    assert job.kind == "evaluate" and job.total > 0
    ended = kb.jobs.wait(job.id, 120)
    assert ended.state == JobState.SUCCEEDED, (ended.state, ended.errors, ended.summary)
    return kb.evaluation.run(ended.result["run_id"])


def test_import_stores_a_good_file_and_refuses_a_bad_one_whole(realistic):
    kb = realistic.as_user(CURATOR)
    good = [{"query": PROXY, "kind": "keyword_in_sentence", "expected": ["gateway/proxy-rewrite.md"]}, *STEADY]
    assert kb.evaluation.import_set("smoke", _jsonl(good) + b"\n\n") == 4
    [info] = kb.evaluation.sets()
    assert (info.name, info.queries) == ("smoke", 4) and info.updated_at.tzinfo is not None
    assert [(q.query, q.kind, q.expected) for q in kb.evaluation.set("smoke")] == \
        [(g["query"], g["kind"], tuple(g["expected"])) for g in good]

    bad = _jsonl(STEADY[:1]) + b'\n{"kind": "title"}\n' + _jsonl(STEADY[1:2]) + b"\nnot json\n" + \
        b'{"query": "x", "expected": "a.md"}\n'
    with pytest.raises(InvalidInputError) as refused:
        kb.evaluation.import_set("other", bad)
    message = str(refused.value)
    assert "line:2" in message and "line:4" in message and "line:5" in message
    assert "line:1" not in message and "line:3" not in message
    assert [s.name for s in kb.evaluation.sets()] == ["smoke"]  # nothing stored
    with pytest.raises(InvalidInputError, match="UTF-8"):
        kb.evaluation.import_set("other", b"\xff\xfe{")
    with pytest.raises(InvalidInputError, match="no labelled queries"):
        kb.evaluation.import_set("other", b"\n \n")

    # importing a query again replaces its label; the others stay
    assert kb.evaluation.import_set("smoke", _jsonl([{"query": PROXY, "kind": "title", "expected": []}])) == 1
    first = kb.evaluation.set("smoke")[0]
    assert (first.query, first.kind, first.expected) == (PROXY, "title", ())
    assert len(kb.evaluation.set("smoke")) == 4


def test_labelling_right_wrong_and_no_answer(realistic):
    kb = realistic.as_user(CURATOR)
    kb.evaluation.label("picked", PROXY, ["gateway/proxy-rewrite.md"], kind="playground")  # "right"
    kb.evaluation.label("picked", "ERR_NOTHING_LIKE_IT", [], kind="playground")  # "wrong: no answer"
    kb.evaluation.label("picked", PROXY, ["gateway-zh/proxy-rewrite.md", " ", "gateway-zh/proxy-rewrite.md"],
                   kind="tool_call")  # "wrong: this one", replacing the label
    assert [(q.query, q.kind, q.expected) for q in kb.evaluation.set("picked")] == [
        (PROXY, "tool_call", ("gateway-zh/proxy-rewrite.md",)), ("ERR_NOTHING_LIKE_IT", "playground", ())]
    for bad in ("", "   "):
        with pytest.raises(InvalidInputError):
            kb.evaluation.label("picked", bad, [])
        with pytest.raises(InvalidInputError):
            kb.evaluation.label(bad, "q", [])
    assert kb.evaluation.unlabel("picked", "ERR_NOTHING_LIKE_IT") is True
    assert [q.query for q in kb.evaluation.set("picked")] == [PROXY]


def test_viewers_look_curators_import_label_and_run(realistic):
    realistic.as_user(CURATOR).evaluation.import_set("s", _jsonl(STEADY))
    viewer = realistic.as_user(VIEWER)
    with pytest.raises(AccessDeniedError):
        viewer.evaluation.import_set("s", _jsonl(STEADY))
    with pytest.raises(AccessDeniedError):
        viewer.evaluation.label("s", "q", [])
    with pytest.raises(AccessDeniedError):
        viewer.evaluation.unlabel("s", "keepalive_pool_size")
    with pytest.raises(AccessDeniedError):
        viewer.evaluation.start("s")
    with pytest.raises(InvalidInputError, match="start_evaluation"):
        realistic.jobs.start("evaluate")
    assert [s.name for s in viewer.evaluation.sets()] == ["s"] and len(viewer.evaluation.set("s")) == 3
    run = _run(realistic.as_user(CURATOR), "s")
    assert [r.id for r in viewer.evaluation.runs()] == [run.id] and viewer.evaluation.run(run.id).queries == 3
    assert run.actor == CURATOR.name
    with pytest.raises(InvalidInputError):
        realistic.evaluation.start("no such set")


def _without_latency(metrics: dict) -> list[dict]:
    return [{k: v for k, v in row.items() if k not in ("p50_ms", "p99_ms")}
            for row in (*metrics["kinds"], metrics["overall"])]


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_run_stores_what_kb_evaluate_reports_on_the_same_set(realistic):
    kb = realistic.as_user(CURATOR)
    assert kb.evaluation.import_set("realistic", QUERIES.read_bytes()) == len(load_queries(QUERIES))
    run = _run(kb, "realistic")
    report = evaluate(realistic, load_queries(QUERIES))
    cli = report.to_dict()
    assert _without_latency(run.metrics) == _without_latency(cli)
    # what L1 ran on: BM25 alone, the configured model (not on this machine) kept apart
    assert run.settings == {"l0_matching": "words", "l1_mode": "BM25 only", "retrievers": ["bm25"],
                            "model": "none (BM25 only)", "configured_model": "no-such-org/no-such-model",
                            "base_path": "knowledge_base/"}
    assert run.queries == len(run.outcomes) == len(report.outcomes) and run.set_name == "realistic"
    assert [(o.query, o.kind, o.expected, o.found, o.primary, o.confidence, o.supplement, o.named,
             o.in_query_language) for o in run.outcomes] == \
        [(o.query.query, o.query.kind, o.query.expected, o.found, o.primary, o.confidence, o.supplement, o.named,
          o.in_query_language) for o in report.outcomes]
    assert kb.jobs.get(run.job_id).counts["queries"] == len(report.outcomes)


def test_comparing_two_runs_lists_exactly_the_queries_whose_answer_changed(realistic):
    kb = realistic.as_user(CURATOR)
    kb.evaluation.import_set("cmp", _jsonl([{"query": PROXY, "kind": "keyword_in_sentence",
                                        "expected": ["gateway/proxy-rewrite.md"]}, *STEADY]))
    before = _run(kb, "cmp")
    assert before.outcomes[0].primary == "gateway/proxy-rewrite.md"
    [doc] = [d for d in kb.documents.list() if d.file_path.endswith("gateway/proxy-rewrite.md")]
    kb.documents.delete(doc.id)
    kb.evaluation.label("cmp", "nacos 注册中心", ["registry/overview.md"])  # only the second run asks it
    after = _run(kb, "cmp")
    comparison = kb.evaluation.compare(before.id, after.id)
    assert [c.query for c in comparison.changed] == [PROXY]
    [changed] = comparison.changed
    assert changed.before.primary == "gateway/proxy-rewrite.md" and changed.after.primary != changed.before.primary
    assert changed.verdict == "worse"
    assert comparison.only_before == () and comparison.only_after == ("nacos 注册中心",)
    rows = {r["metric"]: r for r in comparison.metric_rows()}
    assert rows["answered"][f"run {before.id}"] == before.metrics["overall"]["answered_pct"]
    assert [r.id for r in kb.evaluation.runs()] == [after.id, before.id]
    with pytest.raises(InvalidInputError, match="no evaluation run 999"):
        kb.evaluation.compare(before.id, 999)


def _outcome(query: str, primary: str | None, confidence: str | None = "high", supplement: str | None = None,
             expected: tuple[str, ...] = ("a.md",), latency: float = 1.0) -> StoredOutcome:
    return StoredOutcome(query, "k", expected, primary is not None or supplement is not None, primary, confidence,
                         supplement, (), latency, None)


def test_compare_runs_counts_answers_not_latency():
    from datetime import UTC, datetime

    def run(run_id, *outcomes):
        return StoredRun(run_id, "s", None, "x", {}, {}, len(outcomes), datetime.now(UTC), outcomes)

    a = run(1, _outcome("same", "a.md"), _outcome("slower", "a.md"), _outcome("conf", "a.md"),
            _outcome("fixed", None, None, "b.md"), _outcome("sup", "a.md", "medium", "b.md"), _outcome("gone", None))
    b = run(2, _outcome("same", "a.md"), _outcome("slower", "a.md", latency=99.0), _outcome("conf", "a.md", "medium"),
            _outcome("fixed", "a.md"), _outcome("sup", "a.md", "medium", "c.md"), _outcome("new", None))
    comparison = compare_runs(a, b)
    assert [(c.query, c.verdict) for c in comparison.changed] == [("conf", "different"), ("fixed", "better"),
                                                                   ("sup", "different")]
    assert comparison.only_before == ("gone",) and comparison.only_after == ("new",)


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_cancelled_run_stores_nothing_and_runs_leave_the_lookup_metrics_alone(realistic):
    kb = realistic.as_user(CURATOR)
    kb.evaluation.import_set("realistic", QUERIES.read_bytes())
    def lookups_counted() -> float:  # the served-lookup metrics of this knowledge base (kb_lookup_duration_seconds)
        registry = realistic.metrics_registry
        return sum(registry.get_sample_value("kb_lookup_duration_seconds_count", {"path": path}) or 0.0
                   for path in ("l0_unique", "l0_l1", "l1_only"))

    realistic.lookup("proxy-rewrite")
    counted = lookups_counted()
    assert counted >= 1
    first, second = kb.evaluation.start("realistic"), kb.evaluation.start("realistic")
    kb.jobs.cancel(second.id)  # queued behind the first, or at its next query
    assert kb.jobs.wait(first.id, 120).state == JobState.SUCCEEDED
    ended = kb.jobs.wait(second.id, 120)
    assert ended.state == JobState.CANCELLED and not (ended.result or {}).get("run_id")
    assert [r.job_id for r in kb.evaluation.runs()] == [first.id]
    assert lookups_counted() == counted  # a run's lookups are a measurement, not traffic
