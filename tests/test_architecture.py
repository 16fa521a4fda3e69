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


def test_public_names_are_kept():
    """Every name agent code imported from `kb_core` before the house was reshaped still imports."""
    before = {
        "DeleteOutcome", "DocumentError", "KnowledgeBase", "KnowledgeBaseStatus", "ReconcileReport", "UploadOutcome",
        "UploadRejected", "open_knowledge_base", "default_knowledge_base", "lookup_knowledge",
        "openai_tool_schema", "TOOL_NAME", "TOOL_DESCRIPTION", "Frontmatter", "FrontmatterError",
        "HybridLookup", "KnowledgeBaseError", "KnowledgeEntry", "KnowledgeIndex", "L0Match", "L1Hit",
        "L1Searcher", "LookupResult", "LookupTrace", "Primary", "Settings", "SettingsError", "Supplement",
        "has_frontmatter", "load_settings", "parse_frontmatter"}
    assert before <= set(kb_core.__all__)
    for name in kb_core.__all__:
        assert getattr(kb_core, name) is not None


def _kb_core_imports() -> dict[str, set[str]]:
    """module -> the kb_core modules it imports (anywhere in the file, type-checking imports included)."""
    modules = {".".join(p.relative_to(KB_CORE.parent).with_suffix("").parts).removesuffix(".__init__"): p
               for p in KB_CORE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kb_core"):
                found |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                          for a in node.names}
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name.startswith("kb_core")}
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def test_no_import_circles_in_kb_core():
    graph = _kb_core_imports()
    circles = []

    def visit(module: str, path: list[str]) -> None:
        for target in graph[module]:
            if target in path:
                circles.append(path[path.index(target):] + [target])
            elif target not in done:
                visit(target, path + [target])
        done.add(module)

    done: set[str] = set()
    for module in sorted(graph):
        if module not in done:
            visit(module, [module])
    assert circles == []


def test_documents_and_retrieval_import_each_other_in_one_direction_only():
    graph = _kb_core_imports()
    back = sorted(f"{m} -> {t}" for m, targets in graph.items() if m.startswith("kb_core.documents")
                  for t in targets if t.startswith("kb_core.retrieval"))
    assert back == []


def test_pages_and_app_import_only_the_public_face():
    root = KB_CORE.parent
    offenders = []
    for path in [root / "app.py", *(root / "pages").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kb_core."):
                offenders.append(f"{path.relative_to(root)}: {node.module}")
            elif isinstance(node, ast.Import):
                offenders += [f"{path.relative_to(root)}: {a.name}" for a in node.names
                              if a.name.startswith("kb_core.")]
    assert offenders == []


def test_the_facade_keeps_its_stores_private(tmp_path):
    from conftest import make_settings

    kb = kb_core.open_knowledge_base(make_settings(tmp_path))
    try:
        public = {name for name in vars(kb) if not name.startswith("_")}
        assert public == set()
        for store in ("index", "metadata", "vectors", "embedder", "watcher", "summaries"):
            assert not hasattr(kb, store)
    finally:
        kb.close()


def test_jobs_import_neither_documents_nor_retrieval_nor_the_facade():
    """kb_core.jobs runs work the facade hands it as callables: it knows the storage and the base modules only."""
    graph = _kb_core_imports()
    above = ("kb_core.documents", "kb_core.retrieval", "kb_core.agent", "kb_core.knowledge_base", "kb_core.bootstrap")
    offenders = sorted(f"{m} -> {t}" for m, targets in graph.items() if m.startswith("kb_core.jobs")
                       for t in targets if t.startswith(above))
    assert offenders == []
