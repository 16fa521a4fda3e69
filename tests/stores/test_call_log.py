"""Nothing dropped from the call log: the background writer stores calls in batches, a burst
is logged in full, a database that is down keeps the records waiting, and a bound that is hit (or a record the
database refuses) leaves a stored count the Tool calls page shows - never a silent gap."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from support.console import run_page
from support.documents import doc, write_doc
from support.stores import make_settings

from kb_core.agent.tool import CallRecorder
from kb_core.bootstrap import open_knowledge_base
from kb_core.errors import MetadataStoreError

PAYMENT = doc("支付网关错误码定义", ["ERR_TIMEOUT", "超时"], "记录支付网关错误码",
              "# 错误码\n\nERR_TIMEOUT 表示渠道在 3 秒内未响应。\n")


def _call(i: int, **extra) -> dict:
    return {"tool_name": "lookup_knowledge", "arguments": {"query": f"q{i}"}, "found": bool(i % 2),
            "match_types": ("exact_L0",), "sources": (), "latency_ms": 1.0, "request_id": f"r{i}",
            "caller": "test", **extra}


class _Gate:
    """A sink in front of a real store that lets nothing through until it is opened (a frozen database)."""

    def __init__(self, store):
        self.store = store
        self.open = threading.Event()
        self.batches: list[int] = []

    def record_tool_call(self, **fields):
        self.open.wait()
        return self.store.record_tool_call(**fields)

    def record_tool_calls(self, records, *, dropped=0, reason=""):
        self.open.wait()
        self.batches.append(len(records))
        return self.store.record_tool_calls(records, dropped=dropped, reason=reason)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_burst_of_3000_calls_is_logged_in_full_within_20_s(tmp_path, db_url):
    write_doc(tmp_path, "knowledge_base/api/payment-errors.md", PAYMENT)
    kb = open_knowledge_base(make_settings(tmp_path, db_url=db_url))
    try:
        kb.documents.reconcile()
        queries = ["ERR_TIMEOUT", "超时", "渠道未响应怎么办", "nothing-at-all-here"]

        def burst(offset: int) -> None:
            for i in range(offset, 3000, 4):
                kb.lookup_knowledge(queries[i % len(queries)], caller="burst")

        started = time.monotonic()
        threads = [threading.Thread(target=burst, args=(k,)) for k in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        answered = time.monotonic() - started
        assert kb.calls.flush(20 - answered), "the burst was not logged within 20 s"
        logged = time.monotonic() - started
        calls = [c for c in kb.calls.recent(5000) if c.caller == "burst"]
        print(f"3,000 calls answered in {answered:.1f} s, all logged {logged:.1f} s after the burst began")
        assert len(calls) == 3000
        assert sorted(c.request_id for c in calls if c.request_id) == sorted({c.request_id for c in calls})
        assert kb.calls.not_logged(timedelta(hours=1)) == 0
    finally:
        kb.close()


def test_records_wait_while_the_database_is_frozen_and_are_stored_in_batches(store):
    gate = _Gate(store)
    recorder = CallRecorder(gate, batch_size=100)
    before = datetime.now(UTC).replace(tzinfo=None)
    for i in range(1000):
        recorder.record(**_call(i))
    assert not recorder.flush(0.2)  # nothing can be written yet, and flush says so
    gate.open.set()
    assert recorder.flush(30)
    calls = store.recent_tool_calls(2000)
    assert [c.request_id for c in reversed(calls)] == [f"r{i}" for i in range(1000)]  # all, in order
    assert all(c.created_at.replace(tzinfo=None) >= before - timedelta(seconds=1) for c in calls)
    assert max(gate.batches) == 100 and sum(gate.batches) == 1000 and len(gate.batches) <= 12
    assert recorder.not_logged == 0 and store.tool_calls_dropped(before - timedelta(minutes=1)) == 0
    recorder.close()


def test_past_the_bound_calls_are_counted_and_the_count_is_stored(store, caplog):
    gate = _Gate(store)
    recorder = CallRecorder(gate, max_pending=10)
    since = datetime.now(UTC) - timedelta(minutes=1)
    with caplog.at_level("WARNING", logger="kb_core.agent.tool"):
        for i in range(25):
            recorder.record(**_call(i))
    assert recorder.not_logged == 15 and recorder.waiting_drops == 15
    assert any("queue was full" in r.getMessage() for r in caplog.records)
    gate.open.set()
    assert recorder.flush(30)
    assert len(store.recent_tool_calls()) == 10
    assert store.tool_calls_dropped(since) == 15  # stored, with the calls, in the database
    assert store.tool_calls_dropped(datetime.now(UTC) + timedelta(minutes=1)) == 0
    recorder.close()


def test_a_database_that_is_down_loses_nothing_once_it_is_back(store, caplog):
    class Flaky:
        def __init__(self):
            self.failures = 0

        def record_tool_call(self, **fields):  # pragma: no cover - the batch path is used
            raise AssertionError("unused")

        def record_tool_calls(self, records, *, dropped=0, reason=""):
            if self.failures < 4:
                self.failures += 1
                raise MetadataStoreError("injected: cannot record tool calls: server has gone away")
            return store.record_tool_calls(records, dropped=dropped, reason=reason)

    sink = Flaky()
    recorder = CallRecorder(sink)
    with caplog.at_level("WARNING", logger="kb_core.agent.tool"):
        for i in range(50):
            recorder.record(**_call(i))
        assert recorder.flush(30)
    assert sink.failures == 4
    assert len(store.recent_tool_calls()) == 50 and recorder.not_logged == 0
    assert any("could not record" in r.getMessage() and "trying again" in r.getMessage() for r in caplog.records)
    recorder.close()


def test_a_record_the_database_refuses_is_counted_and_the_rest_are_stored(store):
    class Picky:
        """Refuses any batch holding the poisoned call, and that call alone, while taking every other write."""

        def record_tool_call(self, **fields):
            if fields["caller"] == "poison":
                raise MetadataStoreError("injected: Data too long for column 'caller'")
            return store.record_tool_call(**fields)

        def record_tool_calls(self, records, *, dropped=0, reason=""):
            if any(r["caller"] == "poison" for r in records):
                raise MetadataStoreError("injected: Data too long for column 'caller'")
            return store.record_tool_calls(records, dropped=dropped, reason=reason)

    since = datetime.now(UTC) - timedelta(minutes=1)
    recorder = CallRecorder(Picky())
    recorder.MAX_BACKOFF = 0.05  # the retries before the check are quick in a test
    for i in range(20):
        recorder.record(**_call(i, caller="poison" if i == 7 else "test"))
    assert recorder.flush(30)
    assert len(store.recent_tool_calls()) == 19
    assert store.tool_calls_dropped(since) == 1 and recorder.not_logged == 1
    recorder.close()


def test_long_fields_are_cut_to_fit_instead_of_failing_the_batch(store):
    huge = {f"k{i}": "值" * 100 for i in range(400)}  # ~40,000 characters of JSON: more than TEXT takes in MySQL
    store.record_tool_calls([_call(1, caller="c" * 300, arguments=huge, error="e" * 100_000),
                             _call(2)])
    first, second = sorted(store.recent_tool_calls(), key=lambda c: c.request_id)
    assert len(first.caller) == 64 and len(first.error) == 16000 and "_raw" in first.arguments
    assert second.arguments == {"query": "q2"}


def test_the_tool_calls_page_shows_how_many_calls_are_not_in_the_log(app_root):
    from kb_core import load_settings

    kb = open_knowledge_base(load_settings())
    try:
        kb.lookup_knowledge("ERR_TIMEOUT")
        kb.calls.flush()
        from kb_core.bootstrap import parts_of

        parts_of(kb).metadata.record_tool_calls([], dropped=1234, reason="the call log's queue was full")
    finally:
        kb.close()
    at = run_page("tool_calls")
    assert not at.exception, at.exception
    [warning] = [w.value for w in at.warning if "not in the log" in w.value]
    assert "1,234 tool calls of the last 7 days are not in the log" in warning
