"""The Evaluation page under AppTest: import a JSONL set (a bad file refused, naming its lines), start runs as jobs,
the runs table, the chart of each metric across runs, two runs compared; a viewer looks without the controls."""

from __future__ import annotations

import json

from streamlit.testing.v1 import AppTest
from support.console import finish_jobs, look_up, run_page, signed_in_page

SET = [{"query": "ERR_TIMEOUT", "kind": "identifier", "expected": ["api/payment-errors.md"]},
       {"query": "如何优化缓存", "kind": "question", "expected": ["domain/cache-optimization.md"]},
       {"query": "ERR_NOTHING_OF_THE_KIND_4711", "kind": "unknown_code", "expected": []}]


def _jsonl(items) -> bytes:
    return "\n".join(json.dumps(i, ensure_ascii=False) for i in items).encode()


def _frames(at: AppTest, column: str) -> list:
    """The tables (as records) that have `column`."""
    return [f.value.to_dict("records") for f in at.dataframe if column in f.value.columns]


def _import(at: AppTest, name: str, data: bytes) -> AppTest:
    at.text_input(key="eval-import-name").set_value(name)
    at.file_uploader(key="eval-import-file").set_value([("set.jsonl", data, "application/json")]).run()
    at.button(key="eval-import").click().run()
    assert not at.exception, at.exception
    return at


def test_import_run_chart_and_compare(synced_sample):
    at = run_page("evaluation")
    assert not at.exception, at.exception
    assert at.title[0].value == "📏 Evaluation"
    assert any("No labelled query set yet" in i.value for i in at.info)

    _import(at, "smoke", _jsonl(SET[:1]) + b'\n{"kind": "title"}\nnope\n')
    assert "line:2" in at.error[0].value and "line:3" in at.error[0].value
    assert not _frames(at, "last changed (UTC)")  # nothing stored

    _import(at, "smoke", _jsonl(SET))
    assert "3 labelled queries stored" in at.success[0].value
    [[row]] = _frames(at, "last changed (UTC)")
    assert (row["set"], row["queries"]) == ("smoke", 3)

    for _ in range(2):
        at.button(key="eval-start").click().run()
        assert not at.exception, at.exception
        finish_jobs(at)
    [rows] = _frames(at, "L0 rule")
    assert [r["run"] for r in rows] == [2, 1] and {r["set"] for r in rows} == {"smoke"}
    assert rows[0]["answered"] == 100.0 and rows[0]["not found (no answer)"] == 100.0
    assert rows[0]["L0 rule"] == "words" and rows[0]["L1"] == "BM25 only"
    [chart] = at.get("vega_lite_chart")  # each picked metric across the set's runs (the data go as Arrow)
    assert b"answered" in chart.proto.SerializeToString() and b"run 2" in chart.proto.SerializeToString()

    [compared] = _frames(at, "change")
    by_name = {r["metric"]: r for r in compared}
    assert by_name["answered"]["run 1"] == by_name["answered"]["run 2"] == 100.0 and by_name["answered"]["change"] == 0
    [settings] = _frames(at, "setting")
    assert {r["setting"]: r["run 2"] for r in settings}["L0 rule"] == "words"
    assert any("0 queries answered differently" in m.value for m in at.markdown)


def test_a_viewer_sees_runs_but_not_the_controls(synced_sample, monkeypatch):
    curator = run_page("evaluation")
    _import(curator, "smoke", _jsonl(SET))
    curator.button(key="eval-start").click().run()
    finish_jobs(curator)

    viewer = signed_in_page("evaluation", monkeypatch, "vera@example.com", "viewer")
    assert not viewer.exception, viewer.exception
    assert _frames(viewer, "L0 rule")
    assert not [b for b in viewer.button if b.key in ("eval-import", "eval-start")]
    assert any("need the curator role" in c.value for c in viewer.caption)
    viewer.switch_page("../../pages/playground.py").run()
    look_up(viewer, "ERR_TIMEOUT")  # a viewer's answer has no labelling controls
    assert viewer.code and not [b for b in viewer.button if (b.key or "").startswith("label-")]


def _labelled(root) -> list[tuple[str, str, tuple[str, ...]]]:
    from kb_core.storage.metadata_store import MetadataStore

    store = MetadataStore(f"sqlite:///{root / 'kb.sqlite3'}")
    try:
        return [(q.query, q.kind, q.expected) for q in store.labelled_queries("console")]
    finally:
        store.dispose()


def test_answers_marked_right_or_wrong_in_the_playground_and_on_tool_calls(synced_sample):
    at = look_up(run_page("playground"), "ERR_TIMEOUT")
    at.button(key="label-right-0-playground").click().run()  # "right": the primary served
    assert not at.exception, at.exception
    assert any("is labelled in the set “console”: api/payment-errors.md" in s.value for s in at.success)

    look_up(at, "如何优化缓存")
    at.toggle(key="label-wrong-open-playground").set_value(True).run()
    at.selectbox(key="label-pick-playground").set_value("domain/cache-optimization.md").run()
    at.button(key="label-wrong-playground").click().run()  # "wrong": this document answers it
    assert not at.exception, at.exception

    at.switch_page("../../pages/tool_calls.py").run()
    at.selectbox(key="attention_query").set_value("如何优化缓存").run()  # answered by L1 only: needs attention
    at.toggle(key="label-wrong-open-attention").set_value(True).run()
    at.selectbox(key="label-pick-attention").set_value("(no answer: the knowledge base has none)").run()
    at.button(key="label-wrong-attention").click().run()  # relabelled from Tool calls: no answer
    assert not at.exception, at.exception
    assert _labelled(synced_sample) == [("ERR_TIMEOUT", "playground", ("api/payment-errors.md",)),
                                        ("如何优化缓存", "tool_call", ())]

    at.switch_page("../../pages/evaluation.py").run()
    [[row]] = _frames(at, "last changed (UTC)")
    assert (row["set"], row["queries"]) == ("console", 2)


def test_a_run_s_answers_wrong_first_with_playground_links_and_a_one_run_chart(synced_sample):
    """One run is enough: its answers are listed (those that are not right first, each a link that runs the query
    in the playground), the chart draws its single point on a run axis, and the run names what L1 ran on."""
    # labelled wrong: the set's own ERR_TIMEOUT line gives way to it (a query is in a set once)
    wrong = {"query": "ERR_TIMEOUT", "kind": "identifier", "expected": ["domain/cache-optimization.md"]}
    at = run_page("evaluation")
    _import(at, "one", _jsonl([*SET, wrong]))
    at.button(key="eval-start").click().run()
    finish_jobs(at)
    assert not at.exception, at.exception
    [rows] = _frames(at, "verdict")  # the answers that are not right, by default
    assert [(r["query"], r["verdict"], r["try"]) for r in rows] == [("ERR_TIMEOUT", "high but wrong",
                                                                     "./?q=ERR_TIMEOUT")]
    at.toggle(key="eval-outcomes-wrong").set_value(False).run()
    [rows] = _frames(at, "verdict")
    assert len(rows) == 3 and rows[0]["query"] == "ERR_TIMEOUT"  # all of them, the wrong one first
    assert {r["verdict"] for r in rows[1:]} <= {"right primary", "right: no answer", "right first (supplement)"}
    [chart] = at.get("vega_lite_chart")
    spec = json.loads(chart.proto.spec)
    assert spec["mark"]["point"] is True and spec["encoding"]["x"]["type"] == "ordinal"
    assert b"run 1" in chart.proto.SerializeToString()
    [runs] = _frames(at, "L0 rule")
    assert runs[0]["model"] == "none (BM25 only)" and runs[0]["L1"] == "BM25 only"
