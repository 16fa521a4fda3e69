"""The console renders the L0 index (AppTest, no browser)."""

from __future__ import annotations

from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parent.parent / "app.py")


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch, sample_root):
    monkeypatch.setenv("KB_APP_ROOT", str(sample_root))
    st.cache_resource.clear()
    yield
    st.cache_resource.clear()


def test_home_lists_the_documents_of_the_l0_index():
    at = AppTest.from_file(APP, default_timeout=30).run()
    assert not at.exception
    assert at.metric[0].value == "9"
    frame = at.dataframe[0].value
    assert "knowledge_base/api/payment-errors.md" in set(frame["file"])
    assert "knowledge_base/api/order-api.md" not in set(frame["file"])  # no frontmatter: not in L0


def test_home_shows_an_error_for_invalid_settings(monkeypatch):
    monkeypatch.setenv("KB_MAX_UPLOAD_BYTES", "-5")
    at = AppTest.from_file(APP, default_timeout=30).run()
    assert not at.exception
    assert "KB_MAX_UPLOAD_BYTES" in at.error[0].value
