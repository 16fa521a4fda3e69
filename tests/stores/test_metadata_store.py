"""The metadata store on SQLite and on the real MariaDB server: migrations, round trips, the tool-call log."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import inspect, text

from kb_core.storage.db_models import DocumentStatus
from kb_core.storage.metadata_store import (
    DocumentValues,
    MetadataStore,
    MetadataStoreError,
    head_revision,
    redact_url,
)

VALUES = DocumentValues(
    file_name="支付-errors 🚀.md",
    category="api",
    file_path="knowledge_base/api/支付-errors 🚀.md",
    status=DocumentStatus.INDEXED,
    metadata_json=json.dumps({"title": "支付网关错误码定义 😀", "keywords": ["超时", "🔥"]}, ensure_ascii=False),
    content_sha256="ab" * 32,
    size_bytes=1234,
    chunk_count=3,
    embedding_model="BAAI/bge-m3",
)




def test_migration_creates_both_tables_and_is_idempotent(store):
    store.migrate()
    store.migrate()
    tables = set(inspect(store._engine).get_table_names())
    assert {"api_document", "tool_call", "tool_call_dropped", "query_history", "kb_job", "eval_query", "eval_run",
            "eval_outcome", "alembic_version"} <= tables
    assert store.current_revision() == head_revision() == "0011"


def test_query_history_is_per_actor_and_round_trips_on_both_databases(store):
    store.record_query(actor="alice@example.com", query="超时 🚀", section_title="1. 超时类错误",
                       options={"retriever": "bm25", "top_k": 7, "categories": ["api"], "languages": ["zh"],
                                "min_score": 1.5}, found=True, answer="exact_L0 + semantic_L1", latency_ms=3.25)
    store.record_query(actor="bob@example.com", query="ERR_TIMEOUT", section_title=None, options={}, found=False,
                       answer="", latency_ms=1.0)
    [alice] = store.query_history("alice@example.com")
    assert (alice.query, alice.section_title, alice.found, alice.answer, alice.latency_ms) == \
        ("超时 🚀", "1. 超时类错误", True, "exact_L0 + semantic_L1", 3.25)
    assert alice.options == {"retriever": "bm25", "top_k": 7, "categories": ["api"], "languages": ["zh"],
                             "min_score": 1.5}
    assert alice.created_at.tzinfo is not None
    assert [r.query for r in store.query_history("bob@example.com")] == ["ERR_TIMEOUT"]
    assert store.query_history("carol@example.com") == []


def test_migration_0009_goes_down_and_up_again(store):
    from alembic import command

    from kb_core.storage.metadata_store import _alembic_config

    with store._engine.connect() as connection:
        cfg = _alembic_config()
        cfg.attributes["connection"] = connection
        command.downgrade(cfg, "0008")
        connection.commit()
    assert store.current_revision() == "0008"
    assert "query_history" not in set(inspect(store._engine).get_table_names())
    store.migrate()
    assert "query_history" in set(inspect(store._engine).get_table_names())


def test_migration_0010_goes_down_and_up_again(store):
    from alembic import command

    from kb_core.storage.metadata_store import _alembic_config

    evaluation = {"eval_query", "eval_run", "eval_outcome"}
    with store._engine.connect() as connection:
        cfg = _alembic_config()
        cfg.attributes["connection"] = connection
        command.downgrade(cfg, "0009")
        connection.commit()
    assert store.current_revision() == "0009"
    assert not evaluation & set(inspect(store._engine).get_table_names())
    store.migrate()
    assert evaluation <= set(inspect(store._engine).get_table_names())


def test_migration_0011_goes_down_and_up_again_keeping_the_documents(store):
    """The content version is a new nullable column: rows written before it read as None (re-indexed at the
    next opening), and a round trip down and up keeps them."""
    from alembic import command

    from kb_core.storage.metadata_store import _alembic_config

    doc_id = store.save_document(DocumentValues(**{**VALUES.__dict__, "content_version": 2}))
    assert store.get(doc_id).content_version == 2
    with store._engine.connect() as connection:
        cfg = _alembic_config()
        cfg.attributes["connection"] = connection
        command.downgrade(cfg, "0010")
        connection.commit()
    columns = {c["name"] for c in inspect(store._engine).get_columns("api_document")}
    assert "content_version" not in columns
    store.migrate()
    assert store.get(doc_id).content_version is None
    assert store.get(doc_id).file_path == VALUES.file_path
    assert store.count_indexed_otherwise(VALUES.embedding_model) == 0
    assert store.count_indexed_otherwise(VALUES.embedding_model, 2) == 1


def test_status_is_stored_as_varchar(store):
    store.save_document(VALUES)
    with store._engine.connect() as connection:
        raw = connection.execute(text("SELECT status FROM api_document")).scalar()
    assert raw == "INDEXED"


def test_chinese_and_emoji_round_trip(store):
    doc_id = store.save_document(VALUES)
    record = store.get(doc_id)
    assert record.file_name == "支付-errors 🚀.md"
    assert record.frontmatter == {"title": "支付网关错误码定义 😀", "keywords": ["超时", "🔥"]}
    assert store.get_by_path("knowledge_base/api/支付-errors 🚀.md").id == doc_id


def test_times_are_utc(store):
    before = datetime.now(UTC) - timedelta(seconds=5)
    doc_id = store.save_document(VALUES)
    record = store.get(doc_id)
    assert record.created_at.tzinfo is UTC
    assert before <= record.created_at <= datetime.now(UTC) + timedelta(seconds=5)


def test_file_path_is_unique(store):
    store.save_document(VALUES)
    with pytest.raises(Exception):  # noqa: B017 - MetadataStoreError wrapping the driver's IntegrityError
        store.save_document(VALUES)
    assert store.count_documents() == 1


def test_the_intent_record_is_committed_and_settled(store):
    doc_id = store.save_document(VALUES, pending=("upload", "host:1:abc"))
    [pending] = store.pending_documents()
    assert (pending.id, pending.pending_operation, pending.pending_owner) == (doc_id, "upload", "host:1:abc")
    store.finish_write(doc_id)
    assert store.pending_documents() == [] and store.get(doc_id).status == "INDEXED"


def test_ids_are_never_reused(store):
    """SQLite re-issues the largest deleted rowid unless the table is AUTOINCREMENT (migration 0002)."""
    first = store.save_document(VALUES)
    store.delete_document(first)
    assert store.save_document(VALUES) > first


def test_large_metadata_fits(store):
    big = json.dumps({"extra": {"notes": "长" * 30000}}, ensure_ascii=False)  # ~90 KB in UTF-8
    doc_id = store.save_document(DocumentValues(**{**VALUES.__dict__, "metadata_json": big}))
    assert store.get(doc_id).metadata_json == big


def test_tool_calls_are_recorded(store):
    store.record_tool_call(tool_name="lookup_knowledge", arguments={"query": "超时"}, found=True,
                           match_types=("exact_L0", "semantic_L1"), sources=("a.md", "b.md"), latency_ms=3.5,
                           request_id="abcd1234", caller="python")
    [call] = store.recent_tool_calls()
    assert call.arguments == {"query": "超时"} and call.match_types == ("exact_L0", "semantic_L1")
    assert call.sources == ("a.md", "b.md") and call.found and call.caller == "python"


@pytest.mark.processes
def test_two_processes_migrating_at_once_both_succeed(db_url):
    code = ("import sys; from kb_core.storage.metadata_store import MetadataStore; "
            "MetadataStore(sys.argv[1]).migrate(); print('ok')")
    procs = [subprocess.Popen([sys.executable, "-c", code, db_url], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(3)]
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [err[-2000:] for _, err in results]
    assert MetadataStore(db_url).current_revision() == head_revision()


def test_operator_command_migrates(tmp_path, monkeypatch, capsys):
    from kb_core.storage.migrate import main

    monkeypatch.setenv("KB_DATABASE_URL", f"sqlite:///{tmp_path / 'ops.sqlite3'}")
    monkeypatch.setenv("KB_APP_ROOT", str(tmp_path))
    assert main([]) == 0
    assert f"revision {head_revision()}" in capsys.readouterr().out


def test_the_operator_command_brings_the_database_down_to_an_older_version(tmp_path, monkeypatch, capsys):
    """`kb migrate REVISION --downgrade`, before an older version runs on the database (what bench_cold does for
    the version it compares with): down to REVISION, nothing to do when there, refused above the current one."""
    from kb_core.storage.migrate import main

    url = f"sqlite:///{tmp_path / 'ops.sqlite3'}"
    monkeypatch.setenv("KB_DATABASE_URL", url)
    monkeypatch.setenv("KB_APP_ROOT", str(tmp_path))
    assert main([]) == 0
    assert main(["0009", "--downgrade"]) == 0 and "revision 0009" in capsys.readouterr().out
    store = MetadataStore(url)
    assert store.current_revision() == "0009"
    assert "eval_run" not in set(inspect(store._engine).get_table_names())
    assert main(["0009", "--downgrade"]) == 0 and store.current_revision() == "0009"
    capsys.readouterr()
    assert main(["0010", "--downgrade"]) == 1 and "cannot bring the database" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--downgrade"])  # down to what: head is no downgrade
    assert main([]) == 0 and store.current_revision() == head_revision()
    store.dispose()


def test_url_password_is_hidden():
    assert "s3cret" not in redact_url("mysql+pymysql://kb:s3cret@db:3306/kb?charset=utf8mb4")
    assert "***" in MetadataStore("mysql+pymysql://kb:s3cret@127.0.0.1:1/kb").url


def test_unreachable_database_gives_a_clear_error():
    store = MetadataStore("mysql+pymysql://root@127.0.0.1:1/nowhere?connect_timeout=2")
    with pytest.raises(MetadataStoreError, match="127.0.0.1:1"):
        store.migrate()


def test_mysql_connection_killed_by_the_server_is_survived(mysql_database):
    store = MetadataStore(mysql_database)
    store.migrate()
    with store._engine.connect() as connection:
        connection_id = connection.execute(text("SELECT CONNECTION_ID()")).scalar()
    with MetadataStore(mysql_database)._engine.connect() as admin:
        admin.execute(text(f"KILL {int(connection_id)}"))
    assert store.count_documents() >= 0  # pool_pre_ping replaced the dead pooled connection
    store.dispose()


def test_a_migration_statement_slower_than_the_backend_timeout_still_completes(mysql_database, monkeypatch):
    """MySQL runs DDL outside transactions: a statement the client gave up on at the backend timeout could finish
    on the server anyway and leave a half-applied migration the next try cannot redo ("Table ... already exists",
    seen on a busy machine). A migration's statements get MIGRATION_TIMEOUT instead of the backend timeout."""
    from alembic import command
    from support.stores import empty_mysql_tables

    empty_mysql_tables(mysql_database)
    MetadataStore(mysql_database).migrate("0009")  # 0010 and 0011 are left to run
    real_upgrade = command.upgrade

    def slow_upgrade(cfg, revision):  # the server takes longer than the 1 s backend timeout over one statement
        cfg.attributes["connection"].execute(text("SELECT SLEEP(2)"))
        real_upgrade(cfg, revision)

    monkeypatch.setattr(command, "upgrade", slow_upgrade)
    store = MetadataStore(mysql_database, timeout=1.0)
    store.migrate()
    assert store.current_revision() == head_revision()
    assert store.count_documents() >= 0  # the store's own calls keep the 1 s budget afterwards
    store.dispose()
