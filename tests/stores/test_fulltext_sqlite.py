"""The SQLite FTS5 full-text index: BM25 as FTS5 computes it, the two-step search of long queries over large
indexes, and the document frequencies it exposes."""

from __future__ import annotations

import random

import pytest

from kb_core.storage import fulltext_sqlite
from kb_core.storage.fulltext_sqlite import SqliteFullTextIndex, tokenize
from kb_core.storage.ports import ChunkRow

_ZH = ("实例 集群 节点 地域 安全组 白名单 账号 权限 策略 "
       "存储 容量 带宽 流量 连接数 并发 吞吐量 延迟 副本 "
       "分片 索引 快照 备份 日志 监控 告警 阈值 指标 "
       "控制台 接口 请求 响应 签名 密钥 证书 域名 端口 "
       "协议 规格 配额 计费 续费 订单 镜像 容器 磁盘 "
       "内存 版本 升级 迁移 同步 恢复 回滚 高可用 容灾 "
       "加密 审计 标签 事件 任务 队列 消息 主题 订阅 "
       "消费者 生产者 重试 超时 限流 熔断 降级 灰度 发布 "
       "回调 函数 缓存 命中率 数据表 字段 慢查询 事务 "
       "连接池 会话 令牌").split()
_EN = ("gateway route upstream plugin consumer timeout retry cache token certificate policy quota bucket metric trace "
       "snapshot backup restore schema partition lease leader heartbeat failover probe registry namespace").split()
# tokens unicode61 splits further (FTS5 phrases of several tokens) and identifiers
_ODD = ["2.0", "v1.2.3", "node.js", "c++", "max_connections", "InvalidParameter.InstanceId", "E73011", "50%"]


def _text(rng: random.Random, words: int) -> str:
    out = []
    for _ in range(words):
        r = rng.random()
        out.append(rng.choice(_ODD) if r < 0.05 else rng.choice(_EN) if r < 0.3
                   else rng.choice(_ZH) + rng.choice(["", "", "的", "需要", "，", "。"]))
    return "".join(w if "\u4e00" <= w[:1] <= "\u9fff" else f" {w} " for w in out)


def _rows(n: int, seed: int = 3) -> list[ChunkRow]:
    rng = random.Random(seed)
    return [ChunkRow(doc_id=i // 4 + 1, source=f"knowledge_base/c{i % 3}/d{i // 4}.md", category=f"c{i % 3}",
                     chunk_no=i % 4, heading=f"H{i}", text=_text(rng, rng.randint(5, 120))) for i in range(n)]


@pytest.fixture
def index(tmp_path):
    index = SqliteFullTextIndex(tmp_path / "fulltext.sqlite3")
    index.upsert(_rows(400))
    yield index
    index.close()


def _fts5_scores(index: SqliteFullTextIndex, tokens: list[str]) -> dict[int, float]:
    con = index._connection()
    return dict(con.execute("SELECT rowid, bm25(chunks_fts) FROM chunks_fts WHERE chunks_fts MATCH ?",
                            (fulltext_sqlite._match_expression(tokens),)).fetchall())


def _queries(seed: int = 9, count: int = 40) -> list[str]:
    rng = random.Random(seed)
    return [_text(rng, rng.randint(1, 40)) for _ in range(count)] + ["2.0 升级", "node.js 超时", "c++ 50% 镜像"]


def test_bm25_computed_here_is_fts5s_own_to_the_last_bit(index):
    """The two-step search scores its candidates itself: every row FTS5 matches gets exactly FTS5's double."""
    con = index._connection()
    compared = 0
    for query in _queries():
        tokens = list(dict.fromkeys(tokenize(query)))
        stats = index._stats(con)
        df = index._frequencies(con, stats, tokens)
        bm25 = fulltext_sqlite._Bm25(tokens, [fulltext_sqlite._idf(stats.rows, df[t]) for t in tokens], stats.avgdl)
        expected = _fts5_scores(index, tokens)
        stored = dict(con.execute(
            f"SELECT c.id, c.tokens FROM chunks c WHERE c.id IN ({','.join('?' * len(expected))})", list(expected)))
        sizes = dict(con.execute("SELECT id, sz FROM chunks_fts_docsize"))
        for rowid, score in expected.items():
            assert bm25(stored[rowid], sizes[rowid]) == score, (query, rowid)
            compared += 1
    assert compared > 1000


def test_document_frequencies_are_fts5s_and_follow_writes(tmp_path, index):
    con = index._connection()
    for token in ["实例", "gateway", "2.0", "node.js", "nothing-like-this", "max"]:
        expected = con.execute("SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?",
                               (fulltext_sqlite._match_expression([token]),)).fetchone()[0]
        assert index.document_frequency([token]) == {token: expected}
    assert index.row_count() == 400
    before = index.document_frequency(["证书"])["证书"]
    index.upsert([ChunkRow(999, "knowledge_base/x/new.md", "x", 0, "", "证书 证书 轮换")])
    assert index.document_frequency(["证书"])["证书"] == before + 1 and index.row_count() == 401
    other = SqliteFullTextIndex(index.path)  # another connection (another process's writes look the same)
    try:
        other.delete_document(999)
    finally:
        other.close()
    assert index.document_frequency(["证书"])["证书"] == before and index.row_count() == 400


def test_a_long_query_over_a_large_index_takes_two_steps_and_keeps_fts5s_scores(index, monkeypatch):
    """With every token counted as rare and room for every candidate, the two steps rank exactly as FTS5."""
    monkeypatch.setattr(fulltext_sqlite, "POSTINGS_BUDGET", 0)
    monkeypatch.setattr(fulltext_sqlite, "RARE_POSTINGS", 10**9)
    monkeypatch.setattr(fulltext_sqlite, "CANDIDATES", 1000)
    calls = []
    two_steps = SqliteFullTextIndex._search_in_two_steps
    monkeypatch.setattr(SqliteFullTextIndex, "_search_in_two_steps",
                        lambda self, *a: calls.append(1) or two_steps(self, *a))
    for query in _queries():
        tokens = list(dict.fromkeys(tokenize(query)))
        fts5 = _fts5_scores(index, tokens)
        hits = index.search(query, 20)
        assert len(hits) == min(20, len(fts5))
        keys = {(r.doc_id, r.chunk_no): rowid for rowid, r in _by_rowid(index).items()}
        got = [(keys[(h.row.doc_id, h.row.chunk_no)], -h.score) for h in hits]
        assert all(fts5[rowid] == score for rowid, score in got)
        assert got == sorted(got, key=lambda x: (x[1], x[0]))
        assert [s for _, s in got] == sorted(fts5.values())[:20]
    assert len(calls) == len(_queries())


def test_the_two_steps_find_what_one_query_finds_for_real_queries(index, monkeypatch):
    """Default settings, but thresholds small enough for this index: the rarest tokens choose the candidates.
    On queries cut from the chunks, the first hit is the one the single FTS5 query finds."""
    rng = random.Random(5)
    rows = _rows(400)
    queries = []
    for _ in range(30):
        text = rng.choice(rows).text
        start = rng.randrange(max(1, len(text) - 60))
        queries.append(text[start:start + 60])
    plain = {q: [(h.row, h.score) for h in index.search(q, 20)] for q in queries}
    monkeypatch.setattr(fulltext_sqlite, "POSTINGS_BUDGET", 300)
    monkeypatch.setattr(fulltext_sqlite, "RARE_POSTINGS", 300)
    monkeypatch.setattr(fulltext_sqlite, "CANDIDATES", 60)
    same_first = 0
    for q in queries:
        hits = [(h.row, h.score) for h in index.search(q, 20)]
        assert hits and all(s > 0 for _, s in hits)
        same_first += hits[0] == plain[q][0]
    assert same_first >= 27


def test_a_category_and_a_short_query_use_one_fts5_query(index, monkeypatch):
    monkeypatch.setattr(fulltext_sqlite, "POSTINGS_BUDGET", 0)
    monkeypatch.setattr(SqliteFullTextIndex, "_search_in_two_steps",
                        lambda *a: pytest.fail("category searches are one FTS5 query"))
    hits = index.search("实例 监控 告警 gateway", 5, category="c1")
    assert hits and all(h.row.category == "c1" for h in hits)


def _by_rowid(index: SqliteFullTextIndex) -> dict[int, ChunkRow]:
    con = index._connection()
    return {rowid: ChunkRow(int(d), s, c, int(n), h, t) for rowid, d, s, c, n, h, t in con.execute(
        "SELECT id, doc_id, source, category, chunk_no, heading, text FROM chunks")}


def test_the_switch_to_wal_waits_out_a_lock_sqlite_would_not_wait_for(tmp_path):
    """CI saw three processes opening one fresh folder: one got "database is locked" from `PRAGMA
    journal_mode=WAL` at once, busy timeout or not. Here a holder keeps the file exclusively locked until the
    first refusal, and a connection that never waits on its own (timeout 0) still switches."""
    import sqlite3

    from kb_core.storage.sqlite_wal import switch_to_wal

    path = tmp_path / "fresh.sqlite3"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    other = sqlite3.connect(path, timeout=0, isolation_level=None)
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        other.execute("PRAGMA journal_mode=WAL")  # the premise: refused while the holder holds it

    refusals = []

    def release_after_the_first_refusal(_seconds):
        refusals.append(_seconds)
        if holder.in_transaction:
            holder.execute("COMMIT")

    switch_to_wal(other, within_s=30, pause=release_after_the_first_refusal)
    assert refusals and other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_the_switch_to_wal_gives_up_at_its_deadline(tmp_path):
    import sqlite3

    from kb_core.storage.sqlite_wal import switch_to_wal

    path = tmp_path / "held.sqlite3"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    other = sqlite3.connect(path, timeout=0, isolation_level=None)
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        switch_to_wal(other, within_s=0.05)
    holder.execute("COMMIT")
