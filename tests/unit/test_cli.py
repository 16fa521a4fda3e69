"""The `kb` command (`kb_core.cli`), run in-process against a temporary knowledge base on real stores (SQLite,
Milvus Lite, BM25 without a model). Settings come from env `KB_*`, as for a user's shell."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
from support.documents import doc, write_doc
from support.paths import REPO
from support.stores import NO_MODEL, make_settings

from kb_core.cli import command_names, main

PAYMENT = doc("支付网关错误码定义", ["ERR_TIMEOUT", "支付网关"], "支付网关错误码",
              body="# 支付网关错误码定义\n\n## 超时排查\n\nERR_TIMEOUT: the gateway waited 30 s for the bank.\n\n"
                   "## Escalation\n\nPage the on-call engineer.\n")
CACHE = doc("Cache tuning", ["cache eviction"], "How the cache evicts entries",
            body="# Cache tuning\n\nThe eviction sweeper wakes every ninety seconds and drops the coldest "
                 "entries of the shard.\n")


@pytest.fixture
def kb_env(tmp_path, monkeypatch):
    """An application root whose settings come from the environment only (no kb.yaml, no outer KB_*)."""
    for name in list(os.environ):
        if name.startswith("KB_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("KB_APP_ROOT", str(tmp_path))
    monkeypatch.setenv("KB_DATABASE_URL", f"sqlite:///{tmp_path / 'kb.sqlite3'}")
    monkeypatch.setenv("KB_MILVUS_URI", str(tmp_path / "kb_milvus.db"))
    monkeypatch.setenv("KB_EMBEDDING_MODEL", NO_MODEL)
    monkeypatch.setenv("KB_WATCH", "0")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _indexed(root: Path) -> None:
    """Index what is on disk through the library (the same settings as the env above), then close."""
    from kb_core.bootstrap import open_knowledge_base

    kb = open_knowledge_base(make_settings(root))
    try:
        report = kb.documents.reconcile()
        assert report.failed == ()
    finally:
        kb.close()


def _documents(root: Path) -> list[str]:
    from kb_core.bootstrap import open_knowledge_base

    kb = open_knowledge_base(make_settings(root))
    try:
        return sorted(d.file_path for d in kb.documents.list())
    finally:
        kb.close()


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


# -- lookup ------------------------------------------------------------------------------------------------
def test_lookup_prints_the_agent_json(kb_env, capsys):
    write_doc(kb_env, "knowledge_base/api/payment-errors.md", PAYMENT)
    write_doc(kb_env, "knowledge_base/ops/cache.md", CACHE)
    _indexed(kb_env)

    status, out, _ = _run(capsys, "lookup", "ERR_TIMEOUT")
    answer = json.loads(out)
    assert status == 0
    assert set(answer) >= {"found", "primary", "supplement"}
    assert answer["found"] is True and answer["supplement"] is None
    assert answer["primary"]["source"] == "knowledge_base/api/payment-errors.md"
    assert answer["primary"]["matchType"] == "exact_L0" and answer["primary"]["confidence"] == "high"
    assert "超时排查" in answer["primary"]["availableSections"]
    assert "支付网关错误码定义" in out, "JSON is printed with ensure_ascii=False"

    status, out, _ = _run(capsys, "lookup", "why does the eviction sweeper wake every ninety seconds")
    answer = json.loads(out)
    assert status == 0 and answer["found"] is True
    passages = [p for p in (answer["primary"], answer["supplement"]) if p]
    assert any(p["source"] == "knowledge_base/ops/cache.md" for p in passages), answer

    status, out, _ = _run(capsys, "lookup", "E99999_NOWHERE")
    assert status == 0 and json.loads(out)["found"] is False


def test_lookup_serves_a_section_and_logs_the_call_as_cli(kb_env, capsys):
    write_doc(kb_env, "knowledge_base/api/payment-errors.md", PAYMENT)

    status, out, _ = _run(capsys, "lookup", "ERR_TIMEOUT", "--section", "Escalation")
    answer = json.loads(out)
    assert status == 0 and answer["primary"]["section"] == "Escalation"
    assert answer["primary"]["content"].startswith("## Escalation")

    from kb_core.bootstrap import open_knowledge_base

    kb = open_knowledge_base(make_settings(kb_env))
    try:
        calls = kb.calls.recent()
    finally:
        kb.close()
    assert [c.caller for c in calls] == ["cli"]
    assert calls[0].arguments["query"] == "ERR_TIMEOUT"


def test_lookup_narrows_by_category_and_language(kb_env, capsys):
    """`--category` and `--language` are lookup_knowledge's filters: the keyword of a page outside
    them answers nothing, on the L0 fast path and on the opened knowledge base alike."""
    write_doc(kb_env, "knowledge_base/api/payment-errors.md", PAYMENT)
    write_doc(kb_env, "knowledge_base/ops/cache.md", CACHE)
    _indexed(kb_env)
    status, out, _ = _run(capsys, "lookup", "ERR_TIMEOUT", "--category", "api", "--language", "zh")
    assert status == 0 and json.loads(out)["primary"]["source"] == "knowledge_base/api/payment-errors.md"
    status, out, _ = _run(capsys, "lookup", "ERR_TIMEOUT", "--category", "ops")
    assert status == 0 and json.loads(out)["found"] is False
    status, out, _ = _run(capsys, "lookup", "why does the eviction sweeper wake every ninety seconds",
                          "--category", "api")
    assert status == 0 and "ops/cache.md" not in out
    status, out, _ = _run(capsys, "lookup", "ERR_TIMEOUT", "--category", "../x")
    assert status == 2 and "invalid category" in json.loads(out)["error"]


def test_lookup_with_a_refused_argument_exits_2_with_the_error_in_the_json(kb_env, capsys):
    status, out, _ = _run(capsys, "lookup", "   ")
    answer = json.loads(out)
    assert status == 2 and answer["found"] is False and answer["error"]


def test_a_bad_setting_is_an_error_message_not_a_traceback(kb_env, monkeypatch, capsys):
    monkeypatch.setenv("KB_MAX_UPLOAD_BYTES", "-1")
    status, out, err = _run(capsys, "lookup", "ERR_TIMEOUT")
    assert status == 1 and out == "" and "KB_MAX_UPLOAD_BYTES" in err


# -- help -------------------------------------------------------------------------------------------------
def test_every_command_is_listed_in_the_top_level_help(capsys):
    status, out, _ = _run(capsys, "--help")
    assert status == 0
    assert set(command_names()) == {"lookup", "reconcile", "reindex", "model", "jobs", "evaluate", "mcp", "migrate",
                                   "bench"}
    for name in command_names():
        assert f"\n    {name}" in out


@pytest.mark.parametrize("name", command_names())
def test_every_command_has_a_help(name, capsys):
    status, out, _ = _run(capsys, name, "--help")
    assert status == 0
    assert "usage:" in out and len(out) > 200, out
    if name != "bench":  # the benchmarks, once moved in, print their own usage
        assert f"usage: kb {name}" in out


def test_no_command_or_an_unknown_one_is_a_usage_error(capsys):
    assert main([]) == 2
    assert "COMMAND" in capsys.readouterr().err
    assert main(["nope"]) == 2
    assert "invalid choice" in capsys.readouterr().err


def test_python_dash_m_kb_core_is_kb():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO),
                                                        os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "kb_core", "migrate", "--help"], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "usage: kb migrate" in done.stdout


# -- delegated commands -----------------------------------------------------------------------------------
def test_migrate(kb_env, capsys):
    status, out, _ = _run(capsys, "migrate")
    assert status == 0 and "revision" in out
    revision = out.split("revision")[-1].strip()
    status, out, _ = _run(capsys, "migrate", "--current")
    assert status == 0 and out.split("revision")[-1].strip() == revision
    from kb_core.storage.metadata_store import MetadataStore

    store = MetadataStore(f"sqlite:///{kb_env / 'kb.sqlite3'}")
    try:
        assert store.current_revision() == revision
    finally:
        store.dispose()


def test_migrate_alias_still_works(kb_env, capsys):
    from kb_core.storage.migrate import main as migrate_main

    assert migrate_main([]) == 0
    assert "revision" in capsys.readouterr().out


def test_evaluate_keeps_its_options(kb_env, capsys):
    write_doc(kb_env, "knowledge_base/api/payment-errors.md", PAYMENT)
    queries = kb_env / "queries.jsonl"
    queries.write_text(json.dumps({"query": "ERR_TIMEOUT", "kind": "keyword", "expected": ["api/payment-errors.md"]})
                       + "\n", encoding="utf-8")
    status, out, _ = _run(capsys, "evaluate", str(queries), "--sync", "--json", str(kb_env / "report.json"))
    assert status == 0 and "| keyword | 1 | 100.0 %" in out
    report = json.loads((kb_env / "report.json").read_text(encoding="utf-8"))
    assert report["overall"]["answered_pct"] == 100.0


def test_bench_runs_the_benchmarks_main_with_the_arguments(monkeypatch):
    seen = []
    fake = types.ModuleType("benchmarks.bench")
    fake.main = lambda argv: seen.append(argv) or 0
    monkeypatch.setitem(sys.modules, "benchmarks", types.ModuleType("benchmarks"))
    monkeypatch.setitem(sys.modules, "benchmarks.bench", fake)
    assert main(["bench", "--quick", "--skip", "pages"]) == 0
    assert seen == [["--quick", "--skip", "pages"]]


def test_bench_without_the_source_checkout_says_where_the_benchmarks_are(monkeypatch, capsys):
    for name in ("benchmarks", "benchmarks.bench", "benchmarks.__main__"):  # as in an installed kb_core: no
        monkeypatch.setitem(sys.modules, name, None)  # benchmarks package (even if a test imported it already)
    status, out, err = _run(capsys, "bench", "--quick")
    assert status == 2 and "python -m benchmarks" in err and "clone" in err
    status, out, _ = _run(capsys, "bench", "--help")
    assert status == 0 and "usage: kb bench" in out and "source checkout" in out


# -- reconcile --------------------------------------------------------------------------------------------
def test_reconcile_indexes_reports_and_deletes_missing(kb_env, capsys):
    write_doc(kb_env, "knowledge_base/api/payment-errors.md", PAYMENT)
    _indexed(kb_env)
    write_doc(kb_env, "knowledge_base/ops/cache.md", CACHE)  # put there by hand: not indexed yet
    (kb_env / "knowledge_base/api/payment-errors.md").unlink()  # gone by hand: its row stays until asked

    status, out, _ = _run(capsys, "reconcile")
    assert status == 0, out
    assert "now:" in out
    assert _documents(kb_env) == ["knowledge_base/api/payment-errors.md", "knowledge_base/ops/cache.md"]

    status, out, _ = _run(capsys, "reconcile", "--delete-missing")
    assert status == 0, out
    assert _documents(kb_env) == ["knowledge_base/ops/cache.md"]

    write_doc(kb_env, "knowledge_base/ops/one.md", doc("One", ["one-keyword"]))
    write_doc(kb_env, "knowledge_base/api/two.md", doc("Two", ["two-keyword"]))
    status, out, _ = _run(capsys, "reconcile", "knowledge_base/ops")  # relative to the current directory
    assert status == 0, out
    assert _documents(kb_env) == ["knowledge_base/ops/cache.md", "knowledge_base/ops/one.md"]

    (kb_env / "knowledge_base/ops/broken.md").write_bytes(b"---\ntitle: x\n---\n\xff\xfe not UTF-8")
    status, out, _ = _run(capsys, "reconcile")
    assert status == 1
    assert "failed: knowledge_base/ops/broken.md" in out


def test_reconcile_without_arguments_reconciles_everything(kb_env, capsys):
    """(Was the test of `python -m kb_core.repair`, an alias of `kb reconcile` that is gone: CHANGELOG.md.)"""
    write_doc(kb_env, "knowledge_base/ops/cache.md", CACHE)
    assert main(["reconcile"]) == 0
    assert _documents(kb_env) == ["knowledge_base/ops/cache.md"]


# -- jobs -------------------------------------------------------------------------------------------------
def test_reconcile_and_reindex_are_recorded_as_jobs_and_kb_jobs_lists_them(kb_env, capsys):
    status, out, _ = _run(capsys, "jobs")
    assert status == 0 and out.strip() == "no jobs yet"
    write_doc(kb_env, "knowledge_base/ops/cache.md", CACHE)
    status, out, _ = _run(capsys, "reconcile")
    assert status == 0 and out.startswith("job 1 (Reconcile) succeeded: 1 files added")
    status, out, _ = _run(capsys, "reindex")
    assert status == 0 and out.startswith("job 2 (Re-index all) succeeded: 1 re-indexed")
    assert "now: 1 files, L0 1, database 1, Milvus 1 documents (consistent)" in out

    status, out, _ = _run(capsys, "jobs")
    lines = out.splitlines()
    assert status == 0 and lines[0].split()[:4] == ["id", "kind", "state", "progress"]
    assert lines[1].split()[:5] == ["2", "Re-index", "all", "succeeded", "1/1"]
    assert lines[1].endswith("cli: 1 re-indexed") and lines[2].split()[:3] == ["1", "Reconcile", "succeeded"]
    status, out, _ = _run(capsys, "jobs", "--json", "--limit", "1")
    [job] = [json.loads(line) for line in out.splitlines()]
    assert job["id"] == 2 and job["kind"] == "reindex_all" and job["state"] == "succeeded"
    assert job["actor"] == "cli" and job["done"] == job["total"] == 1 and job["process"].startswith("pid ")
