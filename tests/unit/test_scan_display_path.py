"""`KnowledgeFolder.display_path`'s string fast path gives what the `PurePosixPath` join gives, for any base as
configured and any relative path. Self-contained (no conftest)."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kb_core.documents.folder import KnowledgeFolder

BASES = ["knowledge_base", ".", "/srv/kb", "kb/", "./kb", "a/b/c", "kb/../x"]


def _joined(base: str, relative) -> str:
    return str(PurePosixPath(Path(base).as_posix()) / PurePosixPath(Path(relative).as_posix()))


@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("relative", ["api/x.md", "x.md", "a/b/c/d.md", "./x.md", "a/./x.md", "a//x.md", "a/",
                                      ".", "..", "../x.md", "a/..", ".hidden/x.md", "a/.", "a\\b.md", "/abs.md",
                                      "//x.md", "", "a b/c d.md", "中文/文档.md", "a/.../b", "..x/y"])
def test_golden(base, relative, tmp_path):
    folder = KnowledgeFolder(base, app_root=tmp_path)
    assert folder.display_path(relative) == _joined(base, relative)


@settings(max_examples=500, deadline=None)
@given(st.sampled_from(BASES), st.text(alphabet="a./\\ é", max_size=12))
def test_equal_to_the_join(base, relative):
    folder = KnowledgeFolder(base, app_root="/nonexistent-root")
    assert folder.display_path(relative) == _joined(base, relative)
    assert folder.display_path(Path(relative)) == _joined(base, relative)
