"""Cached summaries: a second page render recounts nothing; a write of this process and a
change from another KnowledgeBase on the same database drop the cache."""

from __future__ import annotations

import pytest
from support.documents import doc
from support.stores import summaries_of, two_knowledge_bases

from kb_core.bootstrap import parts_of


class Spy:
    """Counts the calls that read whole stores, around the real store methods."""

    def __init__(self, monkeypatch, kb):
        self.calls: dict[str, int] = {}
        for owner, name in [(parts_of(kb).metadata, "count_documents"), (parts_of(kb).metadata, "count_chunks"),
                            (parts_of(kb).metadata, "list_documents"), (parts_of(kb).vectors, "count_chunks"),
                            (parts_of(kb).folder, "markdown_files")]:
            self._wrap(monkeypatch, owner, name)

    def _wrap(self, monkeypatch, owner, name):
        real = getattr(owner, name)
        key = f"{type(owner).__name__}.{name}"

        def counted(*args, **kwargs):
            self.calls[key] = self.calls.get(key, 0) + 1
            return real(*args, **kwargs)

        monkeypatch.setattr(owner, name, counted)

    def total(self) -> int:
        return sum(self.calls.values())


def _render(kb):
    """What the pages read on every rerun."""
    return kb.status().counts, kb.documents.list(), kb.documents.categories(), kb.keywords.map()


@pytest.fixture
def pair(tmp_path, db_url):
    """A and B on one database and folder; each follows the feed only when the test polls (no timing)."""
    with two_knowledge_bases(tmp_path, db_url, refresh_interval=0) as opened:
        yield opened


def test_a_second_render_recounts_nothing_and_a_write_invalidates(pair, monkeypatch):
    a, _ = pair
    a.documents.upload("gateway-timeouts.md", doc("Gateway timeouts", ["ERR_GATEWAY_TIMEOUT", "API", "超时"]).encode(),
                       "api")
    parts_of(a).follower.poll()  # its own write comes back through the feed (and drops the cache once more)
    spy = Spy(monkeypatch, a)
    first = _render(a)
    assert spy.total() > 0 and first[0].database == 1
    before = dict(spy.calls)
    assert _render(a) == first
    assert spy.calls == before, "a second render read the stores again"

    a.documents.upload("cli-login.md", doc("CLI login", ["CLI", "login"]).encode(), "troubleshooting")
    counts, documents, categories, claims = _render(a)
    assert spy.calls["MetadataStore.count_documents"] == before["MetadataStore.count_documents"] + 1
    assert counts.database == 2 and len(documents) == 2 and categories == ["api", "troubleshooting"]
    assert "CLI" in {c.keyword for c in claims}


def test_a_change_from_another_knowledge_base_invalidates(pair, monkeypatch):
    a, b = pair
    spy = Spy(monkeypatch, b)
    assert _render(b)[0].database == 0 and b.documents.list() == []
    listed = spy.calls["MetadataStore.list_documents"]

    a.documents.upload("kafka-lag.md", doc("Kafka consumer lag", ["consumer lag", "Kafka"]).encode(), "runbooks")
    assert b.documents.list() == []  # B has not seen the change yet: still the cached list
    assert parts_of(b).follower.poll() >= 1
    counts, documents, categories, claims = _render(b)
    assert spy.calls["MetadataStore.list_documents"] == listed + 1
    assert counts.database == 1 and [d.file_path for d in documents] == ["knowledge_base/runbooks/kafka-lag.md"]
    assert categories == ["runbooks"] and "Kafka" in {c.keyword for c in claims}


def test_unindexed_files_are_the_files_a_sync_would_add(pair, tmp_path):
    a, _ = pair
    a.documents.upload("gateway-timeouts.md", doc("Gateway timeouts", ["ERR_GATEWAY_TIMEOUT"]).encode(), "api")
    by_hand = tmp_path / "knowledge_base" / "runbooks" / "重启网关.md"  # copied in by hand, as git does
    by_hand.parent.mkdir(parents=True)
    by_hand.write_text(doc("重启网关", ["重启", "gateway restart"]), encoding="utf-8")
    summaries_of(a).max_age = 0  # nobody announces a hand copy: the backstop age makes it visible
    assert a.documents.unindexed_files() == ["knowledge_base/runbooks/重启网关.md"]
    a.documents.reconcile()
    assert a.documents.unindexed_files() == []
