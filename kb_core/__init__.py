"""kb_core: the knowledge-base library behind the console and the agents' tools (`lookup_knowledge`,
`read_document`).

It never imports streamlit. Importing it costs almost nothing: each public name below loads its module on
first use (PEP 562), so a process that answers from L0 never imports SQLAlchemy, pymilvus, torch or the MCP
stack (issue 32).

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
  `access`, then `knowledge_base` (the `KnowledgeBase` facade, with `facade_editing` and `facade_jobs`) and
  `bootstrap` (the composition root);
  the `kb` command (`cli`) and the MCP server (`mcp`), above the facade; `kb_core.testing` holds offline test
  helpers.
"""

from __future__ import annotations

import importlib
from typing import Any

# public name -> the module that defines it (loaded on first use of the name)
_EXPORTS: dict[str, str] = {
    "Actor": "kb_core.access",
    "Role": "kb_core.access",
    "RoleMap": "kb_core.access",
    "SignedIn": "kb_core.access",
    "audiences_of": "kb_core.access",
    "service_actor": "kb_core.access",
    "REPLAY_CALLER": "kb_core.agent.call_stats",
    "confidence_of": "kb_core.agent.call_stats",
    "READ_TOOL_DESCRIPTION": "kb_core.agent.tool",
    "READ_TOOL_NAME": "kb_core.agent.tool",
    "TOOL_DESCRIPTION": "kb_core.agent.tool",
    "TOOL_NAME": "kb_core.agent.tool",
    "openai_read_tool_schema": "kb_core.agent.tool",
    "openai_tool_schema": "kb_core.agent.tool",
    "openai_tool_schemas": "kb_core.agent.tool",
    "default_knowledge_base": "kb_core.bootstrap",
    "lookup_knowledge": "kb_core.bootstrap",
    "open_knowledge_base": "kb_core.bootstrap",
    "read_document": "kb_core.bootstrap",
    "BatchAction": "kb_core.documents.batch",
    "BatchFile": "kb_core.documents.batch",
    "clean_document": "kb_core.documents.cleaning",
    "FrontmatterEdit": "kb_core.documents.document_edit",
    "KnowledgeEntry": "kb_core.documents.entry",
    "categories_below": "kb_core.documents.path_rule",
    "category_folders": "kb_core.documents.path_rule",
    "Frontmatter": "kb_core.documents.frontmatter",
    "has_frontmatter": "kb_core.documents.frontmatter",
    "parse_frontmatter": "kb_core.documents.frontmatter",
    "split_body": "kb_core.documents.frontmatter",
    "FrontmatterFields": "kb_core.documents.frontmatter_edit",
    "parse_section_lines": "kb_core.documents.frontmatter_edit",
    "section_lines": "kb_core.documents.frontmatter_edit",
    "ReconcileReport": "kb_core.documents.reconcile",
    "SectionChips": "kb_core.documents.sections",
    "section_chips": "kb_core.documents.sections",
    "DeleteOutcome": "kb_core.documents.service",
    "UploadOutcome": "kb_core.documents.service",
    "TrashItem": "kb_core.documents.trash",
    "AccessDeniedError": "kb_core.errors",
    "DocumentConflictError": "kb_core.errors",
    "DocumentError": "kb_core.errors",
    "EditConflictError": "kb_core.errors",
    "FrontmatterError": "kb_core.errors",
    "InvalidInputError": "kb_core.errors",
    "JobCancelledError": "kb_core.errors",
    "KnowledgeBaseError": "kb_core.errors",
    "RestoreConflictError": "kb_core.errors",
    "SettingsError": "kb_core.errors",
    "UploadRejected": "kb_core.errors",
    "HEADLINE": "kb_core.evaluation.runs",
    "ChangedQuery": "kb_core.evaluation.runs",
    "RunComparison": "kb_core.evaluation.runs",
    "compare_runs": "kb_core.evaluation.runs",
    "JobFile": "kb_core.jobs.model",
    "JobKind": "kb_core.jobs.model",
    "JobRecord": "kb_core.jobs.model",
    "JobState": "kb_core.jobs.model",
    "describe_seconds": "kb_core.jobs.model",
    "KnowledgeBase": "kb_core.knowledge_base",
    "KnowledgeBaseStatus": "kb_core.knowledge_base",
    "DocumentSuggestion": "kb_core.retrieval.attention",
    "MAX_TOP_K": "kb_core.retrieval.bench",
    "MIN_TOP_K": "kb_core.retrieval.bench",
    "BenchOptions": "kb_core.retrieval.bench",
    "BenchRow": "kb_core.retrieval.bench",
    "BenchRun": "kb_core.retrieval.bench",
    "HistoryEntry": "kb_core.retrieval.bench",
    "Retriever": "kb_core.retrieval.bench",
    "bench_link_params": "kb_core.retrieval.bench",
    "parse_bench_link": "kb_core.retrieval.bench",
    "KnowledgeIndex": "kb_core.retrieval.keyword_index",
    "L0Match": "kb_core.retrieval.keyword_index",
    "KeywordPlan": "kb_core.retrieval.keyword_plan",
    "KeywordPlanReport": "kb_core.retrieval.keyword_plan",
    "PlanItem": "kb_core.retrieval.keyword_plan",
    "PlanOutcome": "kb_core.retrieval.keyword_plan",
    "HybridLookup": "kb_core.retrieval.lookup",
    "L1Hit": "kb_core.retrieval.lookup",
    "L1Searcher": "kb_core.retrieval.lookup",
    "LookupResult": "kb_core.retrieval.lookup",
    "LookupTrace": "kb_core.retrieval.lookup",
    "Primary": "kb_core.retrieval.lookup",
    "Supplement": "kb_core.retrieval.lookup",
    "Settings": "kb_core.settings",
    "load_settings": "kb_core.settings",
    "percentile": "kb_core.ops.stats",
}
# public names that are another name in their module
_RENAMED: dict[str, tuple[str, str]] = {
    "MORE_SECTIONS": ("kb_core.documents.sections", "MORE"),
    "synonym_lines": ("kb_core.documents.synonyms", "as_lines"),
    "parse_synonym_lines": ("kb_core.documents.synonyms", "parse_lines"),
}

__all__ = sorted([*_EXPORTS, *_RENAMED])


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        module, attribute = _EXPORTS[name], name
    elif name in _RENAMED:
        module, attribute = _RENAMED[name]
    else:
        raise AttributeError(f"module 'kb_core' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value  # once: later uses are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
