"""The package's shape: one error root, ports the adapters satisfy, no streamlit in kb_core, and the import
rules between the layers (`IMPORT_RULES`, one table)."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

import kb_core
from kb_core import errors

KB_CORE = Path(kb_core.__file__).parent
ROOT = KB_CORE.parent

# Which modules may not import which: importer -> what it must never import (a name covers the module and
# everything below it; "kb_core." covers every module of kb_core but its public faces: `kb_core` for agent code
# and the console's documented API, `kb_core.console` for the console's helpers).
# Bottom up: storage, then jobs, documents, retrieval; the facade (knowledge_base) and the composition root
# (bootstrap) above them; the console (app.py, pages/) above all of it, through the public face only.
# the facade and what stands on it, with the faces for code outside the library (the console's helpers, helpers
# for users' tests): nothing below the facade imports any of them (no arrow runs back up)
_FACADE_AND_ABOVE = ("kb_core.knowledge_base", "kb_core.bootstrap", "kb_core.cli", "kb_core.mcp", "kb_core.console",
                     "kb_core.testing")
# the services the facade delegates to, below it and above the tools
_SERVICES = ("kb_core.evaluation", "kb_core.services")
_ABOVE_STORAGE = ("kb_core.documents", "kb_core.keywords", "kb_core.retrieval", "kb_core.agent", *_SERVICES,
                  *_FACADE_AND_ABOVE)
# every layer stands on the base modules, so they import only each other: one arrow up from them is a circle
_ABOVE_BASE = ("kb_core.ops", "kb_core.storage", "kb_core.jobs", *_ABOVE_STORAGE)
IMPORT_RULES: dict[str, tuple[str, ...]] = {
    "kb_core.access": _ABOVE_BASE,
    "kb_core.errors": _ABOVE_BASE,
    "kb_core.progress": _ABOVE_BASE,
    "kb_core.settings": _ABOVE_BASE,
    "kb_core.terms": _ABOVE_BASE,
    "kb_core.storage": _ABOVE_STORAGE,
    # jobs run work the facade hands them as callables: they know the storage and the base modules only
    "kb_core.jobs": _ABOVE_STORAGE,
    # retrieval may import documents, never the other way round; the facade hands a document's work to the jobs
    "kb_core.documents": ("kb_core.jobs", "kb_core.retrieval", "kb_core.agent", *_SERVICES, *_FACADE_AND_ABOVE),
    # L0 reads the documents' parsers and folder; the write path in documents updates L0 through `keywords`
    # (module by module there are no circles: `test_no_import_circles_in_kb_core`)
    # the conversion of PDF, Word, PowerPoint, HTML and text into Markdown lives with the documents (the write path,
    # the upload preview, reconcile and the watcher call it) and may read the identifier rule of
    # keywords.suggestions, as documents may; it converts bytes alone: no store, no folder, no part of the write path
    "kb_core.documents.formats": ("kb_core.storage", "kb_core.ops", "kb_core.keywords.index", "kb_core.keywords.entry",
                                  "kb_core.documents.service", "kb_core.documents.folder", "kb_core.documents.batch",
                                  "kb_core.documents.lint", "kb_core.documents.reconcile",
                                  "kb_core.documents.folder_watcher", "kb_core.documents.trash"),
    "kb_core.keywords": ("kb_core.jobs", "kb_core.retrieval", "kb_core.agent", *_SERVICES, *_FACADE_AND_ABOVE),
    "kb_core.retrieval": ("kb_core.agent", *_SERVICES, *_FACADE_AND_ABOVE),
    # the agents' tools sit on retrieval; the MCP server that serves a facade is kb_core.mcp, above it
    "kb_core.agent": (*_SERVICES, *_FACADE_AND_ABOVE),
    # the facade hands the evaluation service itself and the `kb` command hands `kb evaluate` its opener
    "kb_core.evaluation": _FACADE_AND_ABOVE,
    # the facade's services (status, catalogue, editing, the playground, jobs, tool calls) stand on all of it
    "kb_core.services": _FACADE_AND_ABOVE,
    # logs, metrics, the guarded HTTP server, the percentile: beside the base modules, which every layer may use
    "kb_core.ops": ("kb_core.storage", "kb_core.jobs", *_ABOVE_STORAGE),
    # the console's helpers load on first use: the module itself stands on kb_core's face alone, so importing it
    # loads no layer
    "kb_core.console": ("kb_core.",),
    # helpers for a user's own tests and benchmarks: like the console's, its names load on first use (the table in
    # kb_core/testing/__init__.py), so the module stands on kb_core's face alone
    "kb_core.testing": ("kb_core.",),
    "app": ("kb_core.",),
    "pages": ("kb_core.",),
}

# exception classes of kb_core outside the family, each with its reason
OUTSIDE_THE_FAMILY = {
    # a BaseException on purpose: it must pass every `except Exception` of the lookup it is raised into
    "kb_core.agent.quick._L1Asked",
}


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


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def test_every_exception_class_in_kb_core_derives_from_the_one_root():
    """By base class, not by name: every exception class any kb_core module defines is a `KnowledgeBaseError`."""
    outside = []
    for path in sorted(KB_CORE.rglob("*.py")):
        name = _module_name(path)
        if ".migrations" in name or name.endswith("__main__"):  # alembic scripts; `python -m` runs on import
            continue
        module = importlib.import_module(name)
        for attribute, value in vars(module).items():
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == name \
                    and not issubclass(value, errors.KnowledgeBaseError):
                outside.append(f"{name}.{attribute}")
    assert sorted(outside) == sorted(OUTSIDE_THE_FAMILY)


def test_no_error_class_is_defined_outside_errors_py():
    offenders = []
    for path in KB_CORE.rglob("*.py"):
        if path.name == "errors.py" or "testing" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.name.endswith("Error"):
                offenders.append(f"{path.relative_to(KB_CORE)}:{node.name}")
    assert offenders == []


# A function longer than this does several things at once: each of its steps gets a name (a helper) instead.
MAX_FUNCTION_LINES = 80


def _long_functions(limit: int) -> list[str]:
    found = []
    for path in sorted(KB_CORE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    found.append(f"{path.relative_to(KB_CORE)}:{node.lineno} {node.name}: {lines} lines")
    return found


def test_no_function_in_kb_core_is_over_80_lines():
    assert _long_functions(MAX_FUNCTION_LINES) == []
    # the measure does find functions (methods and nested ones too): an empty walk would pass trivially
    assert _long_functions(MAX_FUNCTION_LINES // 2), "no function measured at all"


def test_kb_core_never_imports_streamlit():
    offenders = []
    for path in KB_CORE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            offenders += [f"{path.relative_to(KB_CORE)}: {n}" for n in names if n.split(".")[0] == "streamlit"]
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
    modules = {_module_name(p): p for p in KB_CORE.rglob("*.py")}
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


def _console_imports() -> dict[str, set[str]]:
    """app.py and each page -> the kb_core modules it names in an import."""
    graph: dict[str, set[str]] = {}
    for path in [ROOT / "app.py", *(ROOT / "pages").rglob("*.py")]:
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kb_core"):
                found.add(node.module)
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name.startswith("kb_core")}
        graph[_module_name(path)] = found
    return graph


PUBLIC_FACES = ("kb_core", "kb_core.console")


def _covers(rule: str, module: str) -> bool:
    if rule.endswith("."):
        return module.startswith(rule) and module not in PUBLIC_FACES
    return module == rule or module.startswith(rule + ".")


def test_the_import_rules_hold():
    graph = {**_kb_core_imports(), **_console_imports()}
    broken = sorted(f"{module} -> {target}" for module, targets in graph.items()
                    for importer, forbidden in IMPORT_RULES.items() if _covers(importer, module)
                    for target in targets if any(_covers(rule, target) for rule in forbidden))
    assert broken == []


def test_the_import_rules_name_real_modules():
    """A rule about a module that is gone (moved, renamed) would hold trivially: every name in the table is
    a module or package that exists."""
    known = {*_kb_core_imports(), *_console_imports()}
    names = {*IMPORT_RULES, *(rule for rules in IMPORT_RULES.values() for rule in rules)} - {"kb_core."}
    assert sorted(n for n in names if not any(_covers(n, m) for m in known)) == []


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


def test_the_facade_keeps_its_stores_private(tmp_path):
    from support.stores import make_settings

    kb = kb_core.open_knowledge_base(make_settings(tmp_path))
    try:
        public = {name for name in vars(kb) if not name.startswith("_")}
        assert public == set()
        for store in ("index", "metadata", "vectors", "embedder", "watcher", "summaries"):
            assert not hasattr(kb, store)
    finally:
        kb.close()


def test_the_faces_stay_small():
    """Agent code's face is small (at most 40 names); the console's helpers are a face of their own,
    and kb_core's top level holds at most 12 modules."""
    import kb_core.console
    import kb_core.testing

    assert len(kb_core.__all__) <= 40
    faces = (kb_core, kb_core.console, kb_core.testing)
    for face in faces:  # a name lives on one face, and every name a face offers loads
        assert all(not set(face.__all__) & set(other.__all__) for other in faces if other is not face)
        for name in face.__all__:
            assert getattr(face, name) is not None, f"{face.__name__}.{name}"
    top = [p for p in KB_CORE.glob("*.py") if p.name != "__init__.py"]
    assert len(top) <= 12, sorted(p.name for p in top)


def test_the_facade_keeps_to_lookups_status_lifecycle_and_services():
    """`KnowledgeBase` answers lookups, reports status, opens and closes, and hands out the services bound to
    the acting user; everything else is a service's (at most 30 public names)."""
    from kb_core.knowledge_base import KnowledgeBase

    public = sorted(name for name in vars(KnowledgeBase) if not name.startswith("_"))
    assert len(public) <= 30, public
    services = {"documents", "keywords", "trash", "jobs", "evaluation", "calls", "playground"}
    assert services <= set(public)
    assert all(isinstance(vars(KnowledgeBase)[name], property) for name in services)
