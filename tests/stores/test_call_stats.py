"""Tool-call summaries computed by the database (SQLite and MariaDB): buckets, found-rate, nearest-rank p95,
and the "needs attention" grouping."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import text

from kb_core.agent.call_stats import bucket_for, needs_attention
from kb_core.ops.stats import percentile

NOW = datetime.now(UTC).replace(minute=30, second=0, microsecond=0)



def _call(store, query, *, hours_ago, found=True, match=("exact_L0",), confidence="high", latency=5.0,
          error=None, sources=("knowledge_base/api/payment-errors.md",)):
    call_id = store.record_tool_call(
        tool_name="lookup_knowledge", arguments={"query": query, "section_title": None}, found=found,
        match_types=match if found else (), sources=sources if found else (), latency_ms=latency,
        request_id="r", caller="python", error=error, confidence=confidence if "exact_L0" in match else None)
    at = (NOW - timedelta(hours=hours_ago)).replace(tzinfo=None)
    with store._engine.begin() as connection:  # the log stamps "now"; the test needs a spread of times
        connection.execute(text("UPDATE tool_call SET created_at = :at WHERE id = :id"), {"at": at, "id": call_id})
    return call_id


def test_calls_found_rate_and_p95_per_hour(store):
    latencies = [float(i) for i in range(1, 21)]  # 20 calls two hours ago: p95 is the 19th, p50 the 10th
    for i, latency in enumerate(latencies):
        _call(store, f"ERR_{i}", hours_ago=2, latency=latency, found=i % 4 != 0)
    _call(store, "超时", hours_ago=0, latency=40.0)
    _call(store, "old", hours_ago=30, latency=1.0)  # outside the span
    _call(store, "bad", hours_ago=0, latency=0.1, found=False, error="invalid arguments: 'query' must not be empty")

    buckets = store.tool_call_buckets(NOW - timedelta(hours=24), "hour")
    assert [b.start for b in buckets] == [(NOW - timedelta(hours=2)).replace(minute=0), NOW.replace(minute=0)]
    first, last = buckets
    assert (first.calls, first.found, first.errors) == (20, 15, 0)
    assert first.found_rate == 0.75
    assert first.p95_ms == percentile(latencies, 95) == 19.0 and first.p50_ms == percentile(latencies, 50) == 10.0
    assert (last.calls, last.found, last.errors, last.p95_ms) == (2, 1, 1, 40.0)


def test_day_buckets_and_bucket_choice(store):
    for hours_ago in (0, 1, 49, 50, 51):
        _call(store, "ERR_TIMEOUT", hours_ago=hours_ago)
    buckets = store.tool_call_buckets(NOW - timedelta(days=7), "day")
    assert sum(b.calls for b in buckets) == 5
    assert all(b.start.hour == 0 for b in buckets) and len(buckets) in (2, 3)  # 2 days apart, maybe a midnight
    assert bucket_for(timedelta(hours=24)) == "hour" and bucket_for(timedelta(days=7)) == "day"
    assert store.tool_call_buckets(NOW + timedelta(hours=1), "hour") == []


def test_needs_attention_groups_by_normalised_query(store):
    _call(store, "ＥＲＲ＿ＴＩＭＥＯＵＴ ", hours_ago=3, found=False)  # full width + blank: one query with the next
    _call(store, "err_timeout", hours_ago=1, found=False)
    _call(store, "如何优化缓存", hours_ago=2, match=("semantic_L1",),
          sources=("knowledge_base/domain/cache-optimization.md",))
    _call(store, "超时", hours_ago=1, match=("exact_L0", "semantic_L1"), confidence="low")
    _call(store, "ERR_PAYMENT_DECLINED", hours_ago=1)  # unique exact answer: nothing to do
    _call(store, "   ", hours_ago=1, found=False, error="invalid arguments")  # the agent's mistake, not the KB's
    _call(store, "err_timeout", hours_ago=40, found=False)  # before the span

    groups = needs_attention(store.tool_calls_needing_attention(NOW - timedelta(hours=24)))
    rows = [(g.query, g.calls, g.not_found, g.l1_only, g.low_confidence) for g in groups]
    assert rows[0] == ("err_timeout", 2, 2, 0, 0)  # most not-found first, spelled as last asked
    assert sorted(rows[1:]) == [("如何优化缓存", 1, 0, 1, 0), ("超时", 1, 0, 0, 1)]
    assert groups[0].last_seen == (NOW - timedelta(hours=1))
    cache = "knowledge_base/domain/cache-optimization.md"
    assert [g.sources for g in groups if g.query == "如何优化缓存"] == [(cache,)]


def test_confidence_is_logged_with_each_call(open_kb, sample_root):
    kb = open_kb(sample_root)
    kb.documents.reconcile()
    kb.lookup_knowledge("ERR_TIMEOUT")
    kb.lookup_knowledge("超时")
    kb.lookup_knowledge("完全不存在的内容XYZ")
    by_query = {c.arguments["query"]: c.confidence for c in kb.calls.recent()}
    assert by_query == {"ERR_TIMEOUT": "high", "超时": "low", "完全不存在的内容XYZ": None}
    assert [g.query for g in kb.calls.needing_attention(timedelta(hours=1))] == ["完全不存在的内容XYZ", "超时"]
    assert sum(b.calls for b in kb.calls.buckets(timedelta(hours=1))) == 3
