"""BM25 full-text search over chunks in SQLite FTS5 (C), for the embedded mode (Milvus Lite).

Milvus Lite's BM25 is pure Python (per-query posting walks and per-row validity loops), so its latency
grows with the chunk count. Here the same text is tokenised once with jieba's segmentation (`cut_for_search`
mode, by jieba-rs: `tokenize`), lower-cased, `STOP_WORDS` dropped, stored as space-separated tokens, and indexed
by FTS5's `unicode61` tokenizer; a query is tokenised the same way and ranked with FTS5's `bm25()`.

Layout: a plain table `chunks` (one row per chunk, unique `(doc_id, chunk_no)`) is the external content of
the FTS5 table `chunks_fts`; triggers keep the two in step. Threads: one connection per thread (WAL), so
one writer and many readers run concurrently; writes are serialised by a lock.

Long queries over a large index. FTS5 scores every row that matches any of the query's tokens,
and a long Chinese query holds tokens that occur in most chunks ("需要", "配置", the product's name in every
chunk's title line): a 90-character summary matched ~17,000 of 20,000 chunks and took 150-250 ms, almost
all of it in `bm25()`. When the query's postings (the sum of its tokens' document frequencies) exceed
`POSTINGS_BUDGET`, the search runs in two steps instead: FTS5 ranks the chunks on the query's rarest tokens
only (those whose postings add up to `RARE_POSTINGS`), and the best `CANDIDATES` of them are scored again
here with every token, by FTS5's own BM25 formula and inputs (row count, average length, document
frequencies, the row's length and each token's frequency in it; see `_Bm25`): the same score FTS5 gives,
to the last bit (tests/stores/test_fulltext_sqlite.py compares them). A chunk that none of the rare tokens rank
among the candidates can be missed: that is the approximation, and only long queries over large indexes
take this path (a smaller query is one FTS5 query, as before). Document frequencies come from FTS5's
vocabulary (`fts5vocab`) and are cached per connection until the index changes (`document_frequency`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import re
import sqlite3
import threading
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Sequence
from pathlib import Path

from kb_core.storage.ports import ChunkRow, ScoredChunk
from kb_core.storage.sqlite_wal import switch_to_wal
from kb_core.terms import STOP_WORDS

log = logging.getLogger(__name__)

__all__ = ["SqliteFullTextIndex", "fts5_available", "tokenize"]

_HAN = re.compile(r"[\u4E00-\u9FD5]")  # Python jieba's Han range (its `re_han_default`)
# How `tokens` were made; an index of an older version is re-tokenised when opened (PRAGMA user_version).
# 0: Python jieba's tokens; 1: jieba-rs, in unicode61's pieces.
TOKENS_VERSION = 1

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

# Above POSTINGS_BUDGET postings (the sum of the query's document frequencies), a search ranks candidates on its
# rarest tokens (as many as fit in RARE_POSTINGS) and scores the best CANDIDATES of them with every token here
# (see the module's docstring). FTS5's bm25() costs one to two microseconds per matching chunk on this
# hardware, the scoring here about 50 per candidate.
POSTINGS_BUDGET = 16_000
RARE_POSTINGS = 16_000
CANDIDATES = 200
# FTS5's bm25() (ext/fts5/fts5_aux.c): k1 = 1.2, b = 0.75
_K1 = 1.2
_B = 0.75
# unicode61's tokens: runs of letters and digits (categories L* and N*); everything else separates
_PIECE = re.compile(r"[^\W_]+")  # what str.isalnum() accepts
_DF_CACHE_MAX = 200_000


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
    """jieba's segmentation (`cut_for_search` by default) as jieba-rs computes it (rjieba: ~70 times faster
    than Python jieba, which was half of a reconcile's time), split into the pieces FTS5's
    `unicode61` keeps (runs of letters and digits), lower-cased, without stop words.

    The sub-words of `cut_for_search` are taken only of Chinese words longer than two characters, as Python
    jieba takes them: jieba-rs also splits ASCII words (`table_name` gave `table`, `name` twice) and re-cuts
    two-character words its HMM found (飞书 gave 飞, 书). So the tokens stay Python jieba's: 280 of 296 real
    pages tokenise identically, 0.1 % of all tokens differ (digits and letters run together: `99th`)."""
    import rjieba

    out: list[str] = []
    search = mode == "search"
    for word in rjieba.cut(text, True):
        if word.isascii():  # most words: ASCII letters and digits, or spaces and punctuation
            if word.isalnum():
                word = word.lower()
                if word not in STOP_WORDS:
                    out.append(word)
            elif len(word) > 1:
                out += [p for p in _PIECE.findall(word.lower()) if p not in STOP_WORDS]
            continue
        for token in (rjieba.cut_for_search(word, True) if search and len(word) > 2 and _HAN.search(word)
                      else (word,)):
            out += [p for p in _PIECE.findall(token.lower()) if p not in STOP_WORDS]
    return out


def _match_expression(tokens: Iterable[str]) -> str:
    """OR of quoted tokens (a quoted string is an FTS5 phrase: no operator or syntax leaks in)."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in dict.fromkeys(tokens))


def _varints(blob: bytes) -> list[int]:
    """SQLite's varints (big-endian, 7 bits a byte, the ninth byte whole), as FTS5 stores sizes and totals."""
    out, i = [], 0
    while i < len(blob):
        value = 0
        for j in range(9):
            byte = blob[i]
            i += 1
            if j == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        out.append(value)
    return out


def _pieces(text: str) -> list[str]:
    """unicode61's tokens of stored (already lower-cased) jieba tokens: a token with a dot, a plus or a hyphen
    ("2.0", "invalidparameter.instanceid") is several."""
    return text.split() if text.replace(" ", "").isalnum() else _PIECE.findall(text)


class _Stats:
    """What FTS5's bm25() reads about the whole index, and the document frequencies asked for so far; valid
    while the index is unchanged (`key`)."""

    __slots__ = ("key", "rows", "avgdl", "df")

    def __init__(self, key: tuple[int, int], rows: int, tokens: int):
        self.key = key
        self.rows = rows
        self.avgdl = tokens / rows if rows else 0.0
        self.df: dict[str, int] = {}


def _idf(rows: int, hits: int) -> float:
    idf = math.log((rows - hits + 0.5) / (hits + 0.5))
    return idf if idf > 0.0 else 1e-6


class _Bm25:
    """FTS5's bm25() of a row, computed as fts5Bm25Function does (the same operations in the same order, so the
    same double): `-sum(idf * (f * (k1 + 1)) / (f + k1 * (1 - b + b * D / avgdl)))` over the query's phrases in
    their order, f the phrase's occurrences in the row, D the row's length in tokens. A phrase the row does not
    hold adds 0.0, which changes no sum: it is skipped."""

    def __init__(self, tokens: list[str], idfs: list[float], avgdl: float):
        self._phrases = [(tuple(_pieces(t)), idf) for t, idf in zip(tokens, idfs, strict=True)]
        self._avgdl = avgdl

    def __call__(self, tokens: str, size: bytes) -> float:
        pieces = _pieces(tokens)
        counts = Counter(pieces)
        norm = _K1 * (1 - _B + _B * _varints(size)[0] / self._avgdl)
        score = 0.0
        for phrase, idf in self._phrases:
            if len(phrase) == 1:
                n = counts.get(phrase[0], 0)
            elif counts.get(phrase[0], 0):
                k = len(phrase)
                n = sum(1 for i in range(len(pieces) - k + 1)
                        if pieces[i] == phrase[0] and tuple(pieces[i:i + k]) == phrase)
            else:
                n = 0
            if n:
                f = float(n)
                score += idf * ((f * (_K1 + 1.0)) / (f + norm))
        return -1.0 * score


class SqliteFullTextIndex:
    """Chunks + FTS5 BM25 in one SQLite file. Scores: `-bm25()`, higher is better."""

    # False: every search is one FTS5 query, as before the two steps (benchmarks/bench_zh.py compares the two)
    two_steps = True

    def __init__(self, path: str | Path, *, mode: str = "search"):
        self._path = str(path)
        self._mode = mode
        self._local = threading.local()
        self._write_lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        self._writes = 0  # committed write transactions of this object (PRAGMA data_version sees the others)
        if self._path != ":memory:":
            Path(self._path).parent.mkdir(parents=True, exist_ok=True)
        with self._write_lock:
            con = self._connection()
            con.executescript(_SCHEMA)
        self._retokenize_if_older()

    @property
    def path(self) -> str:
        return self._path

    def _retokenize_if_older(self) -> None:
        """Tokens of an older tokenizer (`TOKENS_VERSION`) would not match a query's: made again from the
        chunks' text, in one transaction (the triggers update FTS5; about a second per 10,000 chunks)."""
        con = self._connection()
        if con.execute("PRAGMA user_version").fetchone()[0] >= TOKENS_VERSION:
            return
        with self._transaction() as con:
            if con.execute("PRAGMA user_version").fetchone()[0] >= TOKENS_VERSION:  # another process did it
                return
            rows = con.execute("SELECT id, text FROM chunks").fetchall()
            con.executemany("UPDATE chunks SET tokens = ? WHERE id = ?",
                            [(" ".join(tokenize(text, mode=self._mode)), rid) for rid, text in rows])
            con.execute(f"PRAGMA user_version = {TOKENS_VERSION}")
        if rows:
            log.info("made the full-text tokens of %d chunks again (tokenizer version %d) in %s",
                     len(rows), TOKENS_VERSION, self._path)

    # -- connections -------------------------------------------------------------------------------
    def _connection(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is None:
            # check_same_thread=False only so close() can close every thread's connection; each thread
            # uses its own.
            con = sqlite3.connect(self._path, timeout=30, isolation_level=None, check_same_thread=False)
            switch_to_wal(con, within_s=30)
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
    def search(self, query: str, limit: int, category: str | None = None, *,
               doc_ids: Collection[int] | None = None) -> list[ScoredChunk]:
        """`doc_ids`: only chunks of these documents (None: any)."""
        tokens = list(dict.fromkeys(tokenize(query, mode=self._mode)))
        if not tokens or limit <= 0 or (doc_ids is not None and not doc_ids):
            return []
        con = self._connection()
        if category is None and self.two_steps and limit * 4 <= CANDIDATES:
            allowed = None if doc_ids is None else doc_ids if isinstance(doc_ids, (set, frozenset)) else set(doc_ids)
            try:
                con.execute("BEGIN")  # one snapshot: the statistics and the candidates agree
                try:
                    found = self._search_in_two_steps(con, tokens, limit, allowed)
                finally:
                    con.execute("COMMIT")
            except (sqlite3.Error, IndexError, TypeError, ValueError, ZeroDivisionError):
                found = None  # an FTS5 without the shadow tables read here: one FTS5 query
            if found is not None:
                return found
        sql = (f"SELECT {_COLUMNS}, bm25(chunks_fts) AS r FROM chunks_fts JOIN chunks c ON c.id = chunks_fts.rowid "
               "WHERE chunks_fts MATCH ?")
        args: list = [_match_expression(tokens)]
        if category:
            sql += " AND c.category = ?"
            args.append(category)
        if doc_ids is not None:  # one parameter however many: a JSON array of integers
            sql += " AND c.doc_id IN (SELECT value FROM json_each(?))"
            args.append(json.dumps(sorted(int(d) for d in doc_ids)))
        sql += " ORDER BY r LIMIT ?"
        args.append(int(limit))
        rows = con.execute(sql, args).fetchall()
        return [ScoredChunk(ChunkRow(int(d), s, c, int(n), h, t), -float(r)) for d, s, c, n, h, t, r in rows]

    def _search_in_two_steps(self, con: sqlite3.Connection, tokens: list[str], limit: int,
                             allowed: Collection[int] | None = None) -> list[ScoredChunk] | None:
        """Candidates ranked by FTS5 on the rarest tokens, scored here with all of them; `None` when the query
        is small enough for one FTS5 query, or when too few chunks hold a rare token. `allowed`: only chunks of
        these documents are candidates (a caller's scope); too few of them among the candidates: `None`, and the
        one FTS5 query filters by document instead."""
        stats = self._stats(con)
        if stats.rows * len(tokens) <= POSTINGS_BUDGET:
            return None  # small enough whatever the frequencies: no need to look them up
        df = self._frequencies(con, stats, tokens)
        if sum(df.values()) <= POSTINGS_BUDGET:
            return None
        rare: set[str] = set()
        postings = 0
        for token in sorted(tokens, key=lambda t: df[t]):
            if rare and postings + df[token] > RARE_POSTINGS:
                break
            rare.add(token)
            postings += df[token]
        candidates = con.execute(
            "SELECT s.id, c.tokens, d.sz, c.doc_id FROM (SELECT rowid AS id, bm25(chunks_fts) AS r FROM chunks_fts "
            "WHERE chunks_fts MATCH ? ORDER BY r LIMIT ?) s JOIN chunks c ON c.id = s.id "
            "JOIN chunks_fts_docsize d ON d.id = s.id",
            (_match_expression(t for t in tokens if t in rare), max(CANDIDATES, limit))).fetchall()
        if allowed is not None:
            candidates = [c for c in candidates if c[3] in allowed]
        if len(candidates) < limit:
            return None  # chunks holding only common tokens may rank among the first `limit`
        bm25 = _Bm25(tokens, [_idf(stats.rows, df[t]) for t in tokens], stats.avgdl)
        best = sorted((bm25(toks, size), rowid) for rowid, toks, size, _doc in candidates)[:limit]
        rows = {row[0]: row[1:] for row in con.execute(
            f"SELECT c.id, {_COLUMNS} FROM chunks c WHERE c.id IN ({','.join('?' * len(best))})",
            [rowid for _r, rowid in best])}
        return [ScoredChunk(ChunkRow(int(d), s, c, int(n), h, t), -r)
                for r, rowid in best for d, s, c, n, h, t in [rows[rowid]]]

    # -- statistics --------------------------------------------------------------------------------
    def document_frequency(self, tokens: Iterable[str]) -> dict[str, int]:
        """How many chunks hold each token (an FTS5 phrase for a token of several unicode61 tokens), as FTS5's
        bm25() counts them; cached until the index changes. For rarity weights: see `row_count`."""
        con = self._connection()
        return self._frequencies(con, self._stats(con), list(dict.fromkeys(tokens)))

    def row_count(self) -> int:
        """The number of chunks FTS5's statistics count (the N of its IDF)."""
        con = self._connection()
        return self._stats(con).rows

    def _stats(self, con: sqlite3.Connection) -> _Stats:
        key = (int(con.execute("PRAGMA data_version").fetchone()[0]), self._writes)
        stats: _Stats | None = getattr(self._local, "stats", None)
        if stats is None or stats.key != key:
            block = con.execute("SELECT block FROM chunks_fts_data WHERE id = 1").fetchone()  # FTS5's totals
            rows, tokens = _varints(block[0])[:2] if block and block[0] else (0, 0)
            stats = self._local.stats = _Stats(key, rows, tokens)
            if not hasattr(self._local, "vocabulary"):
                con.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.chunks_vocab "
                            "USING fts5vocab(main, 'chunks_fts', 'row')")
                self._local.vocabulary = True
        return stats

    @staticmethod
    def _frequencies(con: sqlite3.Connection, stats: _Stats, tokens: list[str]) -> dict[str, int]:
        cache = stats.df
        missing = [t for t in tokens if t not in cache]
        if len(cache) + len(missing) > _DF_CACHE_MAX:
            cache.clear()
        for token in missing:
            pieces = _pieces(token)
            if len(pieces) == 1:
                row = con.execute("SELECT doc FROM temp.chunks_vocab WHERE term = ?", (pieces[0],)).fetchone()
                cache[token] = int(row[0]) if row else 0
            else:
                cache[token] = int(con.execute("SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?",
                                               (_match_expression([token]),)).fetchone()[0])
        return {t: cache[t] for t in tokens}

    def chunks_of(self, doc_id: int) -> list[ChunkRow]:
        rows = self._connection().execute(
            f"SELECT {_COLUMNS} FROM chunks c WHERE c.doc_id = ? ORDER BY c.chunk_no", (int(doc_id),)).fetchall()
        return [ChunkRow(int(d), s, c, int(n), h, t) for d, s, c, n, h, t in rows]

    def chunk_keys(self) -> list[tuple[int, int]]:
        return [(int(d), int(n)) for d, n in self._connection().execute("SELECT doc_id, chunk_no FROM chunks")]

    def count_chunks(self) -> int:
        return int(self._connection().execute("SELECT count(*) FROM chunks").fetchone()[0])

    # These two run on short-lived background threads: a connection of their own, closed at once, so that no
    # per-thread connection is left behind by each (`_connection` keeps one per thread until close()).
    def version(self) -> tuple[int, int]:
        """(chunks, highest row id): changes when chunks are added, replaced (a new row) or deleted, by any
        process; comparable across threads (PRAGMA data_version is per connection)."""
        with contextlib.closing(sqlite3.connect(self._path, timeout=30)) as con:
            count, top = con.execute("SELECT count(*), coalesce(max(id), 0) FROM chunks").fetchone()
        return int(count), int(top)

    def texts(self) -> Iterator[tuple[str, str]]:
        """(source, text) of every chunk, in storage order (for what is built over all of them)."""
        with contextlib.closing(sqlite3.connect(self._path, timeout=30)) as con:
            yield from con.execute("SELECT source, text FROM chunks ORDER BY id")

    def document_frequencies(self, tokens: Sequence[str]) -> tuple[dict[str, int], int]:
        """The chunks holding each token (tokens in none are left out) and the chunk count: the rarity of a
        query's terms for L1's relevance check (`ChunkStore.document_frequencies`)."""
        counts = self.document_frequency(t for t in tokens if t)
        return {t: n for t, n in counts.items() if n}, self.row_count()
