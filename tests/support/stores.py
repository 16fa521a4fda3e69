"""Real stores for a test: settings on SQLite (or a given database), two knowledge bases over one folder, a
bare Milvus Lite holder, and the check that every store agrees with the files."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

MYSQL_SERVER = os.environ.get("KB_TEST_MYSQL_URL", "mysql+pymysql://root@127.0.0.1:3306")
NO_MODEL = "no-such-org/no-such-model"  # not a folder, not in the hub cache: BM25 only


def empty_mysql_tables(url: str) -> None:
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    with engine.begin() as connection:
        for table in ("tool_call", "tool_call_dropped", "query_history", "api_document", "kb_change", "kb_job",
                      "eval_query", "eval_run", "eval_outcome", "alembic_version"):
            connection.execute(text(f"DROP TABLE IF EXISTS {table}"))
    engine.dispose()


def make_settings(root: Path, *, db_url: str | None = None, model: str = NO_MODEL, **extra):
    from kb_core import load_settings

    return load_settings(
        app_root=root,
        database_url=db_url or f"sqlite:///{root / 'kb.sqlite3'}",
        milvus_uri=str(root / "kb_milvus.db"),
        embedding_model=model,
        **extra,
    )


@contextlib.contextmanager
def bare_lite_holder(directory: Path):
    """Another process holding a Milvus Lite directory the way a notebook would (a bare MilvusClient), without
    sharing it."""
    import subprocess
    import sys

    holder = subprocess.Popen(
        [sys.executable, "-c", "import time\nfrom pymilvus import MilvusClient\n"
         f"MilvusClient({str(directory)!r})\nprint('open', flush=True)\ntime.sleep(60)\n"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        yield holder
    finally:
        holder.kill()
        holder.wait()


@contextlib.contextmanager
def two_knowledge_bases(root: Path, db_url: str, *, refresh_interval: float):
    """A and B on one database and one knowledge-base folder, each with its own Milvus Lite directory: L0 is
    per process, the change feed lives in the database. `refresh_interval=0`: they follow only when polled."""
    from kb_core.bootstrap import open_knowledge_base

    opened = []
    try:
        for name in ("a", "b"):
            settings = make_settings(root, db_url=db_url, refresh_interval=refresh_interval).model_copy(
                update={"milvus_uri": str(root / f"{name}_milvus.db")})
            opened.append(open_knowledge_base(settings))
        yield opened
    finally:
        for kb in opened:
            kb.close()


def assert_consistent(kb) -> None:
    """Disk, database, Milvus and L0 agree, checked by looking at each store itself."""
    import hashlib
    import json as _json

    from kb_core.bootstrap import parts_of
    from kb_core.keywords.index import split_keywords

    rows = parts_of(kb).metadata.list_documents()
    by_path = {r.file_path: r for r in rows}
    disk = {parts_of(kb).folder.display_path(rel) for rel in parts_of(kb).folder.markdown_files()}
    assert disk == set(by_path), f"disk {sorted(disk)} != database {sorted(by_path)}"
    leftovers = [p.name for p in parts_of(kb).folder.base_dir.rglob(".*.tmp")]
    assert leftovers == [], f"temporary files left behind: {leftovers}"
    for row in rows:
        data = parts_of(kb).folder.resolve(row.file_path).read_bytes()
        assert hashlib.sha256(data).hexdigest() == row.content_sha256, f"{row.file_path} differs from its row"
        chunks = parts_of(kb).vectors.chunks_of(row.id)
        assert len(chunks) == row.chunk_count, f"{row.file_path}: {len(chunks)} in Milvus, {row.chunk_count} in row"
        assert all(c.source == row.file_path for c in chunks)
    assert parts_of(kb).vectors.document_ids() == {r.id for r in rows}
    l0 = {e.file_path: e for e in parts_of(kb).index.entries()}
    with_frontmatter = {r.file_path: _json.loads(r.metadata_json) for r in rows if r.metadata_json}
    assert set(l0) == set(with_frontmatter), f"L0 {sorted(l0)} != rows with frontmatter {sorted(with_frontmatter)}"
    for path, meta in with_frontmatter.items():
        kept, _ignored = split_keywords(tuple(meta["keywords"]))
        assert l0[path].keywords == kept
    pending = [(r.file_path, r.pending_operation) for r in rows if r.pending_operation or r.status != "INDEXED"]
    assert pending == [], f"rows still pending or failed: {pending}"
    counts = {r.id: r.chunk_count for r in rows}
    beyond = [(d, c) for d, c in parts_of(kb).vectors.chunk_keys() if d not in counts or c >= counts[d]]
    assert beyond == [], f"vectors without a row or beyond the row's chunk count: {beyond[:10]}"


def summaries_of(kb):
    """The facade's summary cache (the catalogue's and the status's), which `Parts` does not hold: for the few
    tests that age or peek at it."""
    return kb._shared.summaries  # noqa: SLF001
