"""A document chunked by an older cleaning is re-indexed at the next opening: its file did not change,
so only the content version stored with its row tells that its chunks still hold what the cleaning now removes
(MDX component lines here). The opening starts a reconcile job; afterwards the chunks, the row's version and
what an agent is served are clean."""

from __future__ import annotations

import re
import threading
import time

from kb_core.bootstrap import parts_of
from kb_core.documents import cleaning, service
from kb_core.documents.chunking import CONTENT_VERSION

INSTALL = """---
title: Installing the gateway agent
keywords: [gateway-agent-install]
summary: How to install the gateway agent on each operating system.
---

# Installing the gateway agent

The agent ships as a single binary for every supported platform.

<Tabs groupId="os">
<TabItem value="linux" label="Linux">

Download the archive, unpack it into /opt/gateway-agent and start the systemd unit it contains.

</TabItem>
<TabItem value="macos" label="macOS">

Install it with the package manager tap and start it as a launchd service.

</TabItem>
</Tabs>

## Checking the agent

Run the status subcommand: it prints the agent's version and the gateway it is connected to.
"""
NEVER = re.compile(r"(?!)")


def _chunk_texts(kb) -> str:
    parts = parts_of(kb)
    return "\n".join(c.text for d in kb.documents.list() for c in parts.vectors.chunks_of(d.id))


def _reconcile_ended(kb, timeout: float = 120):
    deadline = time.monotonic() + timeout
    while True:
        jobs = kb.jobs.list(kinds=("reconcile",))
        if jobs and not jobs[0].active:
            return jobs[0]
        assert time.monotonic() < deadline, f"no reconcile job ended: {jobs}"
        time.sleep(0.05)


def test_documents_of_an_older_cleaning_are_re_indexed_at_the_next_opening(open_kb, monkeypatch):
    with monkeypatch.context() as old:  # the cleaning before version 2 kept component lines
        old.setattr(cleaning, "_JSX_LINE", NEVER)
        old.setattr(cleaning, "_PROBE_JSX", NEVER)
        old.setattr(service, "CONTENT_VERSION", None)  # a row from before the number
        first = open_kb()
        first.documents.upload("install.md", INSTALL.encode(), "agent")
        assert "<TabItem" in _chunk_texts(first)  # the premise: old chunks hold the residue
        assert [d.content_version for d in first.documents.list()] == [None]
        first.close()

    kb = open_kb()
    job = _reconcile_ended(kb)
    assert job.state == "succeeded", job
    assert [d.content_version for d in kb.documents.list()] == [CONTENT_VERSION]
    texts = _chunk_texts(kb)
    assert "systemd unit" in texts and "<Tab" not in texts and "</Tab" not in texts
    answer = kb.lookup_knowledge("install the gateway agent with the package manager tap as a launchd service")
    assert answer["found"] and "launchd" in str(answer), answer
    assert "<Tab" not in str(answer), answer


def test_an_opening_with_nothing_older_starts_no_job(open_kb):
    first = open_kb()
    first.documents.upload("install.md", INSTALL.encode(), "agent")
    first.close()
    kb = open_kb()
    for thread in threading.enumerate():  # the opening's look for older documents has ended
        if thread.name == "kb-reindex-changed":
            thread.join(60)
    parts = parts_of(kb)
    assert parts.metadata.count_indexed_otherwise(parts.documents.profile, CONTENT_VERSION) == 0
    assert kb.jobs.list(kinds=("reconcile",)) == []
