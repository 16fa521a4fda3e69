"""BM25 full-text search over chunks in SQLite FTS5 (C), for the embedded mode (Milvus Lite).

Milvus Lite's BM25 is pure Python (per-query posting walks and per-row validity loops), so its latency
grows with the chunk count. Here the same text is tokenised once with jieba (the Milvus analyzer's
`cut_for_search` mode, lower-cased, `STOP_WORDS` dropped), stored as space-separated tokens, and indexed by
FTS5's `unicode61` tokenizer; a query is tokenised the same way and ranked with FTS5's `bm25()`.

Layout: a plain table `chunks` (one row per chunk, unique `(doc_id, chunk_no)`) is the external content of
the FTS5 table `chunks_fts`; triggers keep the two in step. Threads: one connection per thread (WAL), so
one writer and many readers run concurrently; writes are serialised by a lock.
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from kb_core import terms as _terms
from kb_core.storage.ports import ChunkRow, ScoredChunk
from kb_core.terms import STOP_WORDS

__all__ = ["SqliteFullTextIndex", "fts5_available", "tokenize"]

_WORD = re.compile(r"[^\W_]", re.UNICODE)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY,
    doc_id INTEGER NOT NULL,
    chunk_no INTEGER NOT NULL,
    source TEXT NOT NULL,
    category TEXT NOT NULL,
    heading TEXT NOT NULL,
    text TEXT NOT NULL,
    tokens TEXT NOT NULL,
    UNIQUE (doc_id, chunk_no)
);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
    tokens, content='chunks', content_rowid='id', tokenize='unicode61 remove_diacritics 0'
);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_vocab USING fts5vocab(chunks_fts, row);
CREATE TRIGGER IF NOT EXISTS chunks_ai AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts(rowid, tokens) VALUES (new.id, new.tokens);
END;
CREATE TRIGGER IF NOT EXISTS chunks_ad AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts(chunks_fts, rowid, tokens) VALUES ('delete', old.id, old.tokens);
END;
CREATE TRIGGER IF NOT EXISTS chunks_au AFTER UPDATE OF tokens ON chunks BEGIN
    INSERT INTO chunks_fts(chunks_fts, rowid, tokens) VALUES ('delete', old.id, old.tokens);
    INSERT INTO chunks_fts(rowid, tokens) VALUES (new.id, new.tokens);
END;
"""

_UPSERT = """
INSERT INTO chunks (doc_id, chunk_no, source, category, heading, text, tokens) VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (doc_id, chunk_no) DO UPDATE SET
    source = excluded.source, category = excluded.category, heading = excluded.heading,
    text = excluded.text, tokens = excluded.tokens
"""

_COLUMNS = "c.doc_id, c.source, c.category, c.chunk_no, c.heading, c.text"


def fts5_available() -> bool:
    try:
        con = sqlite3.connect(":memory:")
        try:
            con.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
        finally:
            con.close()
        return True
    except sqlite3.OperationalError:
        return False


def tokenize(text: str, *, mode: str = "search") -> list[str]:
    """jieba tokens as the Milvus analyzer makes them (`cut_for_search` by default), lower-cased, without
    stop words, and without tokens that have no letter or digit (FTS5's unicode61 would drop them)."""
    _terms.warm_up()
    import jieba

    raw = jieba.cut_for_search(text) if mode == "search" else jieba.cut(text)
    out = []
    for token in raw:
        token = token.strip().lower()
        if token and token not in STOP_WORDS and _WORD.search(token):
            out.append(token)
    return out


def _match_expression(tokens: Iterable[str]) -> str:
    """OR of quoted tokens (a quoted string is an FTS5 phrase: no operator or syntax leaks in)."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in dict.fromkeys(tokens))


class SqliteFullTextIndex:
    """Chunks + FTS5 BM25 in one SQLite file. Scores: `-bm25()`, higher is better."""

    def __init__(self, path: str | Path, *, mode: str = "search"):
        self._path = str(path)
        self._mode = mode
        self._local = threading.local()
        self._write_lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        self._writes = 0  # bumped by every write of this process: cached term counts are stale then
        self._df_lock = threading.Lock()
        self._df_cache: dict[str, int] = {}
        self._df_version: tuple[int, int] | None = None
        self._df_total: int | None = None
        if self._path != ":memory:":
            Path(self._path).parent.mkdir(parents=True, exist_ok=True)
        with self._write_lock:
            con = self._connection()
            con.executescript(_SCHEMA)

    @property
    def path(self) -> str:
        return self._path

    # -- connections -------------------------------------------------------------------------------
    def _connection(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is None:
            # check_same_thread=False only so close() can close every thread's connection; each thread
            # uses its own.
            con = sqlite3.connect(self._path, timeout=30, isolation_level=None, check_same_thread=False)
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=NORMAL")
            con.execute("PRAGMA cache_size=-65536")
            con.execute("PRAGMA mmap_size=268435456")
            self._local.con = con
            with self._connections_lock:
                self._connections.append(con)
        return con

    def close(self) -> None:
        with self._connections_lock:
            connections, self._connections = self._connections, []
        for con in connections:
            try:
                con.close()
            except sqlite3.Error:
                pass
        self._local = threading.local()

    # -- writes ------------------------------------------------------------------------------------
    def upsert(self, rows: Sequence[ChunkRow]) -> None:
        """Write chunks keyed by (doc_id, chunk_no), replacing existing ones; one transaction."""
        if not rows:
            return
        params = [(r.doc_id, r.chunk_no, r.source, r.category, r.heading, r.text,
                   " ".join(tokenize(r.text, mode=self._mode))) for r in rows]  # tokenise outside the lock
        with self._transaction() as con:
            con.executemany(_UPSERT, params)

    def delete_document(self, doc_id: int) -> None:
        self._write("DELETE FROM chunks WHERE doc_id = ?", (int(doc_id),))

    def delete_chunks_from(self, doc_id: int, first_chunk_no: int) -> None:
        self._write("DELETE FROM chunks WHERE doc_id = ? AND chunk_no >= ?", (int(doc_id), int(first_chunk_no)))

    def _write(self, sql: str, args: tuple) -> None:
        with self._transaction() as con:
            con.execute(sql, args)

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction at a time; rolled back on any exception, interrupts included."""
        with self._write_lock:
            con = self._connection()
            con.execute("BEGIN IMMEDIATE")
            try:
                yield con
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
            finally:
                self._writes += 1

    # -- reads -------------------------------------------------------------------------------------
    def search(self, query: str, limit: int, category: str | None = None) -> list[ScoredChunk]:
        tokens = tokenize(query, mode=self._mode)
        if not tokens or limit <= 0:
            return []
        sql = (f"SELECT {_COLUMNS}, bm25(chunks_fts) AS r FROM chunks_fts JOIN chunks c ON c.id = chunks_fts.rowid "
               "WHERE chunks_fts MATCH ?")
        args: list = [_match_expression(tokens)]
        if category:
            sql += " AND c.category = ?"
            args.append(category)
        sql += " ORDER BY r LIMIT ?"
        args.append(int(limit))
        rows = self._connection().execute(sql, args).fetchall()
        return [ScoredChunk(ChunkRow(int(d), s, c, int(n), h, t), -float(r)) for d, s, c, n, h, t, r in rows]

    def chunks_of(self, doc_id: int) -> list[ChunkRow]:
        rows = self._connection().execute(
            f"SELECT {_COLUMNS} FROM chunks c WHERE c.doc_id = ? ORDER BY c.chunk_no", (int(doc_id),)).fetchall()
        return [ChunkRow(int(d), s, c, int(n), h, t) for d, s, c, n, h, t in rows]

    def chunk_keys(self) -> list[tuple[int, int]]:
        return [(int(d), int(n)) for d, n in self._connection().execute("SELECT doc_id, chunk_no FROM chunks")]

    def count_chunks(self) -> int:
        return int(self._connection().execute("SELECT count(*) FROM chunks").fetchone()[0])

    def document_frequencies(self, tokens: Sequence[str]) -> tuple[dict[str, int], int]:
        """How many chunks hold each token (as FTS5 indexed it: one lower-case token, no punctuation) and how
        many chunks there are: the rarity of a query's terms, read from FTS5's own vocabulary.

        fts5vocab counts a term by walking its posting list (40 ms for a token in all of 20,000 chunks), so
        counts are cached until the index changes: a write of this process, or a commit by any other
        connection (`PRAGMA data_version`)."""
        con = self._connection()
        version = (con.execute("PRAGMA data_version").fetchone()[0], self._writes)
        with self._df_lock:
            if self._df_version != version:
                self._df_cache, self._df_version, self._df_total = {}, version, None
            cache = self._df_cache
            total = self._df_total
        found: dict[str, int] = {}
        for term in dict.fromkeys(t for t in tokens if t):
            count = cache.get(term)
            if count is None:
                row = con.execute("SELECT doc FROM chunks_vocab WHERE term = ?", (term,)).fetchone()
                count = int(row[0]) if row is not None else 0
                if len(cache) < 100_000:
                    cache[term] = count
            if count:
                found[term] = count
        if total is None:
            total = self._df_total = self.count_chunks()
        return found, total
