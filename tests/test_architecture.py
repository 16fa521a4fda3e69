"""The package's shape: one error root, ports the adapters satisfy, no streamlit in kb_core."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import kb_core
from kb_core import errors

KB_CORE = Path(kb_core.__file__).parent


@pytest.mark.parametrize("name", [n for n in dir(errors) if n.endswith(("Error", "Rejected"))])
def test_every_error_derives_from_the_one_root(name):
    assert issubclass(getattr(errors, name), errors.KnowledgeBaseError)


def test_error_families():
    assert issubclass(errors.FrontmatterError, errors.InvalidInputError)
    assert issubclass(errors.ToolArgumentError, errors.InvalidInputError)
    assert issubclass(errors.SettingsError, errors.InvalidInputError)
    for backend in (errors.MetadataStoreError, errors.VectorStoreError, errors.EmbeddingError):
        assert issubclass(backend, errors.BackendError)
    rejected = errors.UploadRejected("only Markdown files")
    assert isinstance(rejected, errors.DocumentError) and isinstance(rejected, errors.InvalidInputError)
    assert rejected.step == "validate" and str(rejected) == "only Markdown files"
    assert "step" not in vars(errors.UploadRejected), "step is set per instance, not imitated by a class attribute"
    failed = errors.DocumentError("write vectors", "Milvus is down")
    assert failed.step == "write vectors" and str(failed) == "write vectors failed: Milvus is down"


def test_no_error_class_is_defined_outside_errors_py():
    offenders = []
    for path in KB_CORE.rglob("*.py"):
        if path.name == "errors.py" or "testing" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.name.endswith("Error"):
                offenders.append(f"{path.relative_to(KB_CORE)}:{node.name}")
    assert offenders == []


def test_kb_core_never_imports_streamlit():
    offenders = []
    for path in KB_CORE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            offenders += [f"{path.relative_to(KB_CORE)}: {n}" for n in names if n.split(".")[0] == "streamlit"]
    assert offenders == []


def test_storage_imports_nothing_above_it():
    """storage is the bottom layer: it may use the base modules, never documents, retrieval or agent."""
    offenders = []
    for path in (KB_CORE / "storage").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    ("kb_core.documents", "kb_core.retrieval", "kb_core.agent", "kb_core.knowledge_base",
                     "kb_core.bootstrap")):
                offenders.append(f"{path.relative_to(KB_CORE)}: {node.module}")
    assert offenders == []


def test_adapters_satisfy_the_ports(tmp_path):
    from kb_core.storage.embedding import FlagEmbedder
    from kb_core.storage.metadata_store import MetadataStore
    from kb_core.storage.ports import ChunkStore, Embedder, MetadataRepository
    from kb_core.storage.vector_store import MilvusVectorStore

    store = MetadataStore(f"sqlite:///{tmp_path / 'x.sqlite3'}")
    assert isinstance(store, MetadataRepository)
    assert isinstance(MilvusVectorStore(str(tmp_path / "m.db"), collection="c", dense_dim=None), ChunkStore)
    assert isinstance(FlagEmbedder(str(tmp_path / "no-such-model")), Embedder)
    store.dispose()


def test_public_names_are_unchanged():
    assert sorted(kb_core.__all__) == sorted([
        "DeleteOutcome", "DocumentError", "KnowledgeBase", "KnowledgeBaseStatus", "SyncReport", "UploadOutcome",
        "UploadRejected", "open_knowledge_base", "default_knowledge_base", "lookup_knowledge",
        "openai_tool_schema", "TOOL_NAME", "TOOL_DESCRIPTION", "Frontmatter", "FrontmatterError",
        "HybridLookup", "KnowledgeBaseError", "KnowledgeEntry", "KnowledgeIndex", "L0Match", "L1Hit",
        "L1Searcher", "LookupResult", "LookupTrace", "Primary", "Settings", "SettingsError", "Supplement",
        "has_frontmatter", "load_settings", "parse_frontmatter"])
    for name in kb_core.__all__:
        assert getattr(kb_core, name) is not None
