"""L0 opened with or without its snapshot, its entries, and the files it parses (tests/unit/test_l0_snapshot.py
and test_l0_snapshot_hostile.py)."""

from __future__ import annotations

from kb_core.keywords.index import KnowledgeIndex


def open_index(root, snapshot=True) -> KnowledgeIndex:
    index = KnowledgeIndex("knowledge_base", app_root=root,
                           snapshot_path=root / "l0.snap" if snapshot else None)
    index.load()
    return index


def view(index: KnowledgeIndex) -> list:
    return sorted(index.entries(), key=lambda e: e.file_path)


def parses(monkeypatch) -> list[str]:
    """Record every file the index parses (the real parser still runs)."""
    import kb_core.keywords.index as module

    parsed: list[str] = []
    real = module.entry_of_file

    def counting(folder, relative):
        parsed.append(relative)
        return real(folder, relative)

    monkeypatch.setattr(module, "entry_of_file", counting)
    return parsed
