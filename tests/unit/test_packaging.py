"""The package declares what kb_core imports.

A static scan of every `import` in kb_core/**/*.py, mapped to distributions through the installed metadata
(`importlib.metadata.packages_distributions()`), checked against pyproject.toml:

- an import at module level runs on `import kb_core.x`, so its distribution must be a core dependency;
- an import inside a function runs only when that feature is used: it may come from the extra the module
  belongs to (`MODULE_EXTRAS`), otherwise it must be core too.

Adding an undeclared import to kb_core makes this fail; so does moving a lazy import of an extra's package to
module level (an agent with only the core installed could no longer import kb_core).
"""

from __future__ import annotations

import ast
import fnmatch
import re
import sys
import tomllib
from importlib.metadata import packages_distributions

import pytest
from support.paths import REPO

PACKAGE = REPO / "kb_core"
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
PROJECT_NAME = PYPROJECT["project"]["name"]

# Which extra a module's lazy (function-level) imports may come from. Longest matching prefix wins; modules
# not listed are core: all their imports must be core dependencies.
MODULE_EXTRAS = {
    "kb_core/storage/embedding.py": "embeddings",  # FlagEmbedding, torch, numpy, huggingface_hub when loading
    "kb_core/storage/model_pull.py": "embeddings",  # huggingface_hub, to download the configured model
    "kb_core/mcp.py": "mcp",
    "kb_core/testing/": "dev",  # users' own tests: a milvus-lite server, offline model builders
}


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(requirement: str) -> tuple[str, set[str]]:
    """`"pkg[a,b]>=1; marker"` -> ("pkg", {"a", "b"})."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?", requirement)
    assert match, f"cannot parse requirement {requirement!r}"
    extras = {e.strip() for e in (match.group(2) or "").split(",") if e.strip()}
    return _normalize(match.group(1)), extras


def declared() -> dict[str | None, set[str]]:
    """Normalised distribution names per extra (None = core); an extra naming the project itself
    (`kb-console[console,...]`) gets those extras' names."""
    project = PYPROJECT["project"]
    raw: dict[str | None, list[str]] = {None: project.get("dependencies", [])}
    raw.update(project.get("optional-dependencies", {}))

    def names(extra: str | None, seen: frozenset = frozenset()) -> set[str]:
        found: set[str] = set()
        for requirement in raw[extra]:
            name, extras = _requirement_name(requirement)
            if name == _normalize(PROJECT_NAME):
                for other in extras - seen:
                    found |= names(other, seen | {other})
            else:
                found.add(name)
        return found

    return {extra: names(extra) for extra in raw}


def _extra_of(relative: str) -> str | None:
    matches = [prefix for prefix in MODULE_EXTRAS if relative == prefix or relative.startswith(prefix)]
    return MODULE_EXTRAS[max(matches, key=len)] if matches else None


def third_party_imports(source: str) -> list[tuple[str, int, bool]]:
    """(top-level module name, line, inside a function) for every absolute import that is not stdlib."""
    tree = ast.parse(source)
    found: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                names = [alias.name for alias in child.names]
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                names = [child.module]
            else:
                names = []
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in ("__future__", "kb_core"):
                    found.append((top, child.lineno, in_function))
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(tree, False)
    return found


def undeclared(relative: str, source: str, deps: dict[str | None, set[str]],
               distributions: dict[str, list[str]]) -> list[str]:
    """What `relative` imports that its install does not declare, one readable line each."""
    extra = _extra_of(relative)
    problems = []
    for top, line, in_function in third_party_imports(source):
        where = f"{relative}:{line} imports {top}"
        dists = {_normalize(d) for d in distributions.get(top, [])}
        if not dists:
            problems.append(f"{where}: no installed distribution provides it (cannot check it is declared)")
            continue
        allowed = deps[None] | (deps[extra] if in_function and extra else set())
        if not dists & allowed:
            scope = f"core or [{extra}]" if in_function and extra else "core"
            if not in_function and extra and dists & deps[extra]:
                scope += f" (it is in [{extra}], but a module-level import runs on `import`: import it lazily)"
            problems.append(f"{where} (distribution {'/'.join(sorted(dists))}): not declared in {scope}")
    return problems


@pytest.fixture(scope="module")
def distributions() -> dict[str, list[str]]:
    return packages_distributions()


def test_every_third_party_import_in_kb_core_is_declared(distributions):
    deps = declared()
    for extra in set(MODULE_EXTRAS.values()):
        assert extra in deps, f"MODULE_EXTRAS names [{extra}], which pyproject.toml does not define"
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(REPO).as_posix()
        problems += undeclared(relative, path.read_text(encoding="utf-8"), deps, distributions)
    assert problems == [], "undeclared dependencies:\n" + "\n".join(problems)


def test_the_scan_catches_what_it_should(distributions):
    """The check above is only worth something if it fails: an import of a declared-nowhere distribution, an
    extra's package imported by a core module, and an extra's package imported at module level."""
    deps = declared()
    assert undeclared("kb_core/x.py", "import pandas\n", deps, distributions)  # installed (pymilvus), undeclared
    assert undeclared("kb_core/x.py", "def f():\n    import torch\n", deps, distributions)  # core module
    assert undeclared("kb_core/storage/embedding.py", "import torch\n", deps, distributions)  # module level
    assert undeclared("kb_core/x.py", "from streamlit import session_state\n", deps, distributions)
    assert undeclared("kb_core/x.py", "import no_such_module_anywhere\n", deps, distributions)
    assert not undeclared("kb_core/storage/embedding.py", "def f():\n    import torch\n", deps, distributions)
    assert not undeclared("kb_core/x.py", "import json, os.path\nfrom . import y\nimport kb_core.z\n", deps,
                          distributions)


def test_the_extras_are_the_documented_ones():
    deps = declared()
    assert set(deps) >= {None, "console", "mysql", "embeddings", "mcp", "dev"}
    assert {"streamlit"} <= deps["console"] and {"pymysql"} <= deps["mysql"] and {"mcp"} <= deps["mcp"]
    assert deps["dev"] >= deps["console"] | deps["mysql"] | deps["embeddings"] | deps["mcp"] | {"pytest"}
    # torch stays pinned to the CPU wheel that lies on disk: a bare "torch" pulls a multi-GB CUDA build
    embeddings = PYPROJECT["project"]["optional-dependencies"]["embeddings"]
    torch = [r for r in embeddings if _requirement_name(r)[0] == "torch"]
    assert [r.replace(" ", "") for r in torch] == ["torch==2.13.0"]
    heavy = {"torch", "flagembedding", "transformers", "sentence-transformers", "streamlit", "mcp"}
    assert not deps[None] & heavy, "the core must stay light"
    assert PYPROJECT["project"]["scripts"]["kb"] == "kb_core.cli:main"


def test_every_data_file_kb_core_ships_is_package_data():
    """Non-.py files under kb_core (the Alembic template) and the migration scripts in versions/ (a namespace
    package without __init__.py) are in the wheel only if package-data names them."""
    patterns = PYPROJECT["tool"]["setuptools"]["package-data"]["kb_core"]
    needed = [p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*")
              if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc",)
              and (p.suffix != ".py" or not (p.parent / "__init__.py").exists())]
    missing = [n for n in needed if not any(fnmatch.fnmatch(n, pattern) for pattern in patterns)]
    assert missing == [], f"not in [tool.setuptools.package-data] kb_core: {missing}"
    assert any(n.startswith("storage/migrations/versions/") for n in needed)
