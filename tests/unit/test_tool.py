"""The spec's lookup_knowledge tool for agents — schema, argument errors, the call log, the example."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from support.paths import REPO

from kb_core import TOOL_NAME, lookup_knowledge, openai_tool_schema, read_document
from kb_core.agent.call_stats import needs_attention, percentile
from kb_core.bootstrap import parts_of

PAYMENT = "knowledge_base/api/payment-errors.md"


@pytest.fixture
def sample_kb(open_kb, sample_root, db_url):
    kb = open_kb(sample_root, db_url=db_url)
    kb.documents.reconcile()
    return kb


def test_req_7_1_tool_metadata():
    schema = openai_tool_schema()
    assert schema["type"] == "function"
    function = schema["function"]
    assert function["name"] == TOOL_NAME == "lookup_knowledge"
    assert "error code" in function["description"] and "supplement" in function["description"]
    params = function["parameters"]
    assert params["required"] == ["query"]
    assert set(params["properties"]) == {"query", "section_title", "category", "language"}  # with the filters
    assert "availableSections" in function["description"] and "section_title" in function["description"]
    assert "availableSections" in params["properties"]["section_title"]["description"]
    json.dumps(schema)  # hand it to any framework as plain JSON


def test_req_7_2_1_error_code_returns_the_error_code_document(sample_kb):
    answer = sample_kb.lookup_knowledge("ERR_TIMEOUT")
    assert answer["found"] and answer["primary"]["source"] == PAYMENT
    assert answer["primary"]["matchType"] == "exact_L0" and answer["supplement"] is None
    assert set(answer) == {"found", "primary", "supplement"}


def test_req_7_2_2_open_question_returns_a_semantic_document(sample_kb):
    answer = sample_kb.lookup_knowledge("如何优化缓存")
    assert answer["primary"] is None
    assert answer["supplement"]["source"] == "knowledge_base/domain/cache-optimization.md"
    assert answer["supplement"]["matchType"] == "semantic_L1"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [({}, "missing required argument 'query'"), ({"query": ""}, "must not be empty"),
     ({"query": "   "}, "must not be empty"), ({"query": "x" * 2001}, "at most 2000"),
     ({"query": 42}, "must be a string"), ({"query": "ok", "section_title": 3}, "section_title"),
     ({"query": "ok", "top_k": 3}, "unknown argument"), ("ERR_TIMEOUT", "must be an object")],
    ids=["missing", "empty", "blank", "too-long", "wrong-type", "bad-section", "unknown", "not-a-dict"],
)
def test_bad_arguments_give_a_readable_error_result(sample_kb, arguments, message):
    response = sample_kb.call_tool(arguments)
    assert response.error is not None and message in response.error
    assert response.payload == {"found": False, "primary": None, "supplement": None, "error": response.error}


def test_req_7_2_every_call_is_recorded(sample_kb):
    sample_kb.lookup_knowledge("ERR_TIMEOUT", caller="python")
    sample_kb.lookup_knowledge("超时", caller="console")
    sample_kb.call_tool({"query": ""}, caller="mcp")
    calls = sample_kb.calls.recent()
    assert [(c.arguments.get("query"), c.caller) for c in calls] == [("", "mcp"), ("超时", "console"),
                                                                      ("ERR_TIMEOUT", "python")]
    bad, several, unique = calls
    assert unique.found and unique.match_types == ("exact_L0",) and unique.sources == (PAYMENT,)
    assert len(unique.request_id) == 8 and unique.latency_ms > 0 and unique.error is None
    assert several.match_types == ("exact_L0", "semantic_L1") and len(several.sources) == 2
    assert not bad.found and "must not be empty" in bad.error


def test_the_call_log_records_the_section_served(sample_kb):
    served = sample_kb.lookup_knowledge("ERR_TIMEOUT", "超时排查")
    missed = sample_kb.lookup_knowledge("ERR_TIMEOUT", "退款")
    sample_kb.lookup_knowledge("ERR_TIMEOUT")
    assert served["primary"]["section"] == "1. 超时类错误" and "note" not in served
    assert missed["primary"]["section"] is None and missed["note"] == "no section '退款'; available: 超时排查"
    sample_kb.calls.flush()
    plain, miss, hit = sample_kb.calls.recent()[:3]
    assert hit.arguments == {"query": "ERR_TIMEOUT", "section_title": "超时排查", "_section": "1. 超时类错误"}
    assert miss.arguments == {"query": "ERR_TIMEOUT", "section_title": "退款", "_section": None}
    assert "_section" not in plain.arguments


def test_a_database_outage_never_breaks_a_lookup(sample_kb, monkeypatch, caplog):
    from kb_core.storage.metadata_store import MetadataStoreError

    store = parts_of(sample_kb).metadata
    real = store.record_tool_calls
    attempts = []

    def down_for_a_while(records, **counts):
        attempts.append(len(records))
        if len(attempts) <= 2:
            time.sleep(0.5)  # a dying server is slow as well as failing
            raise MetadataStoreError("injected: cannot record tool calls: server has gone away")
        return real(records, **counts)

    monkeypatch.setattr(store, "record_tool_calls", down_for_a_while)
    with caplog.at_level("WARNING", logger="kb_core.agent.tool"):
        answers = [sample_kb.lookup_knowledge("ERR_TIMEOUT") for _ in range(3)]
        assert all(a["found"] for a in answers)
        assert sample_kb.calls.flush()
    assert len(attempts) >= 3  # recorded in the background, after the answers were returned ...
    assert [c.arguments["query"] for c in sample_kb.calls.recent()] == ["ERR_TIMEOUT"] * 3  # ... and none lost
    assert any("could not record" in r.getMessage() for r in caplog.records)


def test_module_level_helper_uses_the_default_knowledge_base(monkeypatch, sample_root):
    from support.stores import NO_MODEL

    import kb_core.bootstrap as bootstrap

    monkeypatch.setenv("KB_APP_ROOT", str(sample_root))
    monkeypatch.setenv("KB_EMBEDDING_MODEL", NO_MODEL)
    monkeypatch.setattr(bootstrap, "_default", None)
    try:
        assert lookup_knowledge("ERR_TIMEOUT")["primary"]["source"] == PAYMENT
        read = read_document("api/payment-errors.md", "超时排查")
        assert read["primary"]["source"] == PAYMENT and read["primary"]["section"] == "1. 超时类错误"
        assert read_document("api/nope.md")["error"].startswith("no indexed document")
        assert bootstrap.default_knowledge_base() is bootstrap.default_knowledge_base()
    finally:
        if bootstrap._default is not None:
            bootstrap._default.close()
        monkeypatch.setattr(bootstrap, "_default", None)


def test_misses_are_grouped_by_query(sample_kb):
    for query in ["如何优化缓存", "如何优化缓存 ", "完全不存在的内容XYZ", "ERR_TIMEOUT"]:
        sample_kb.lookup_knowledge(query)
    groups = needs_attention(sample_kb.calls.recent())
    assert [(g.query.strip(), g.calls, g.not_found, g.l1_only) for g in groups] == [
        ("完全不存在的内容XYZ", 1, 1, 0), ("如何优化缓存", 2, 0, 2)]
    assert groups[1].sources == ("knowledge_base/domain/cache-optimization.md",)


def test_percentile_is_nearest_rank():
    assert percentile([], 50) is None
    assert percentile([5.0], 95) == 5.0
    assert percentile([float(i) for i in range(1, 101)], 95) == 95.0
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0


@pytest.mark.processes
def test_example_script_runs(sample_root):
    import os

    from support.stores import NO_MODEL

    env = {**os.environ, "KB_APP_ROOT": str(sample_root), "KB_EMBEDDING_MODEL": NO_MODEL}
    done = subprocess.run([sys.executable, str(REPO / "examples/agent_lookup.py"), "ERR_TIMEOUT", "如何优化缓存"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"primary: {PAYMENT} (exact_L0, confidence high)" in done.stdout
    assert "supplement: knowledge_base/domain/cache-optimization.md (semantic_L1)" in done.stdout
