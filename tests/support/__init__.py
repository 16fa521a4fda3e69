"""Test helpers, by what they hold: paths, documents, fakes, stores, console (AppTest), servers, browser, hostile
content, the MCP server over HTTP, L0 snapshots; the entry scripts and child processes some tests run (app_entry,
crash_child, golden_gen). The model builders are kb_core.testing's. tests/conftest.py holds the fixtures and
marking hooks."""
