"""A signed-in viewer limited to some audiences under AppTest: its sign-in groups map to audiences
(`KB_GROUP_AUDIENCES`); the playground answers within them, and the pages that list documents list its pages
alone."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest
from support.console import APP, SIGNIN_AUTH, look_up
from support.documents import write_doc

SECRET = """---
title: Incident bridge numbers
keywords: [BRIDGE-NUMBERS-7]
summary: The phone bridges the on-call team dials into.
audience: [sre]
---

# Incident bridge numbers

Dial the primary bridge first; the fallback bridge is for when the primary is full.
"""


@pytest.fixture
def viewer(monkeypatch, app_root, sample_root, request):
    write_doc(sample_root, "knowledge_base/ops/bridges.md", SECRET)
    request.getfixturevalue("synced_sample")
    monkeypatch.setenv("KB_ROLES", json.dumps({"vic@example.com": "viewer", "sam@example.com": "viewer"}))
    monkeypatch.setenv("KB_GROUP_AUDIENCES", json.dumps({"support-team": ["support"], "oncall": ["sre"]}))

    def signed_in(email: str, groups: list[str], page: str = "playground") -> AppTest:
        at = AppTest.from_file(APP, default_timeout=60)
        at.secrets["auth"] = SIGNIN_AUTH
        at.user = {"is_logged_in": True, "email": email, "email_verified": True, "groups": groups}
        at.run()
        if page != "playground":
            at.switch_page(f"../../pages/{page}.py").run()
        assert not at.exception, at.exception
        return at

    return signed_in


def _answer_text(at: AppTest) -> str:
    return " ".join([m.value for m in at.markdown] + [c.value for c in at.code] + [j.value for j in at.json])


def test_a_viewer_reads_only_its_audiences_pages_in_the_playground(viewer):
    support = look_up(viewer("vic@example.com", ["support-team"]), "BRIDGE-NUMBERS-7")
    assert "bridges.md" not in _answer_text(support)
    oncall = look_up(viewer("sam@example.com", ["oncall"]), "BRIDGE-NUMBERS-7")
    assert "knowledge_base/ops/bridges.md" in _answer_text(oncall)


def _shown_text(at: AppTest) -> str:
    """Everything a page drew as text, tables included."""
    tables = " ".join(df.value.to_csv() for df in at.dataframe)
    return " ".join([_answer_text(at), tables, *(c.value for c in at.caption), *(t.label for t in at.tabs)])


def test_the_documents_and_evaluation_pages_list_only_a_limited_viewers_pages(viewer):
    """The pages that list documents are the same for a limited viewer, with its pages alone: the library keeps
    the others out (`kb.documents`, `kb.keywords`), so the page needs no guard of its own."""
    support = viewer("vic@example.com", ["support-team"], "documents")
    assert "bridges.md" not in _shown_text(support) and "BRIDGE-NUMBERS-7" not in _shown_text(support)
    assert any("timeout" in df.value.to_csv() for df in support.dataframe), "its own pages are listed"
    assert support.sidebar.metric, "the sidebar status is still drawn"
    oncall = viewer("sam@example.com", ["oncall"], "documents")
    assert "bridges.md" in _shown_text(oncall)
    evaluation = viewer("vic@example.com", ["support-team"], "evaluation")
    assert "bridges.md" not in _shown_text(evaluation)
