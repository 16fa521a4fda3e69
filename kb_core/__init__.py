"""kb_core: the knowledge-base library behind the console and the agents' tools (`lookup_knowledge`,
`read_document`).

It never imports streamlit. Importing it costs almost nothing: each public name below loads its module on
first use (PEP 562), so a process that answers from L0 never imports SQLAlchemy, pymilvus, torch or the MCP
stack.

Layout (each sub-package's docstring says what it owns and what it may import):

- `kb_core.documents`: what a document is and how it gets in (frontmatter, the folder and its path rule,
  chunking, lint, the document service that writes to every store);
- `kb_core.retrieval`: answering a query (L0 keyword index, L1 searcher, the hybrid lookup and its result);
- `kb_core.storage`: the adapters and their ports (SQL metadata + migrations and `kb migrate`, Milvus, embedding
  models);
- `kb_core.jobs`: long work (reconcile, re-index all, uploads) as jobs of the knowledge base's process;
- `kb_core.agent`: the agents' tools, `lookup_knowledge` and `read_document` (schemas, response model, call log
  and its statistics);
- `kb_core.evaluation`: answer quality on labelled queries (scoring, runs, the service, `kb evaluate`);
- `kb_core.ops`: logs, metrics, the guarded HTTP server, the percentile, versions, cached summaries;
- top level: this public API, the base modules `settings`, `errors`, `terms` (text normalisation), `progress`,
  `access`, then `knowledge_base` (the `KnowledgeBase` facade, delegating to `kb_core.services`) and
  `bootstrap` (the composition root);
  the `kb` command (`cli`) and the MCP server (`mcp`), above the facade; `kb_core.testing` holds offline test
  helpers.
"""

from __future__ import annotations

import importlib
from typing import Any

# public name -> the module that defines it (loaded on first use of the name): what agent code and the
# console's documented API need; the console's helpers are `kb_core.console`'s
_EXPORTS: dict[str, str] = {
    "Actor": "kb_core.access",
    "Role": "kb_core.access",
    "READ_TOOL_NAME": "kb_core.agent.tool",
    "TOOL_DESCRIPTION": "kb_core.agent.tool",
    "TOOL_NAME": "kb_core.agent.tool",
    "openai_tool_schema": "kb_core.agent.tool",
    "openai_tool_schemas": "kb_core.agent.tool",
    "default_knowledge_base": "kb_core.bootstrap",
    "lookup_knowledge": "kb_core.bootstrap",
    "open_knowledge_base": "kb_core.bootstrap",
    "read_document": "kb_core.bootstrap",
    "KnowledgeEntry": "kb_core.keywords.entry",
    "Frontmatter": "kb_core.documents.frontmatter",
    "has_frontmatter": "kb_core.documents.frontmatter",
    "parse_frontmatter": "kb_core.documents.frontmatter",
    "ReconcileReport": "kb_core.documents.reconcile",
    "DeleteOutcome": "kb_core.documents.service",
    "UploadOutcome": "kb_core.documents.service",
    "DocumentError": "kb_core.errors",
    "FrontmatterError": "kb_core.errors",
    "InvalidInputError": "kb_core.errors",
    "KnowledgeBaseError": "kb_core.errors",
    "SettingsError": "kb_core.errors",
    "UploadRejected": "kb_core.errors",
    "JobRecord": "kb_core.jobs.model",
    "JobState": "kb_core.jobs.model",
    "KnowledgeBase": "kb_core.knowledge_base",
    "KnowledgeBaseStatus": "kb_core.services.status",
    "KnowledgeIndex": "kb_core.keywords.index",
    "L0Match": "kb_core.keywords.index",
    "HybridLookup": "kb_core.retrieval.lookup",
    "L1Hit": "kb_core.retrieval.lookup",
    "L1Searcher": "kb_core.retrieval.lookup",
    "LookupResult": "kb_core.retrieval.lookup",
    "LookupTrace": "kb_core.retrieval.lookup",
    "Primary": "kb_core.retrieval.lookup",
    "Supplement": "kb_core.retrieval.lookup",
    "Settings": "kb_core.settings",
    "load_settings": "kb_core.settings",
    "Scope": "kb_core.documents.scope",
}

__all__ = sorted(_EXPORTS)


def lazy_attribute(namespace: dict[str, Any], exports: dict[str, str], renamed: dict[str, tuple[str, str]],
                   name: str) -> Any:
    """PEP 562 for a public face: the name's module imported on first use, the value kept in `namespace`."""
    if name in exports:
        module, attribute = exports[name], name
    elif name in renamed:
        module, attribute = renamed[name]
    else:
        raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), attribute)
    namespace[name] = value  # once: later uses are plain attribute reads
    return value


def __getattr__(name: str) -> Any:
    return lazy_attribute(globals(), _EXPORTS, {}, name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
