"""Where things are: the checkout, the tests and their data."""

from __future__ import annotations

from pathlib import Path

SUPPORT = Path(__file__).resolve().parent
TESTS = SUPPORT.parent
REPO = TESTS.parent
SAMPLE_KB = REPO / "knowledge_base"
FIXTURES = TESTS / "fixtures"
GOLDEN = TESTS / "golden"
