"""kb_core: the knowledge-base library behind the console and the agents' `lookup_knowledge` tool.

It never imports streamlit. Heavy dependencies (torch, FlagEmbedding, pymilvus) load lazily.

Layout (each sub-package's docstring says what it owns and what it may import):

- `kb_core.documents`: what a document is and how it gets in (frontmatter, validation, chunking, lint,
  the document service that writes to every store);
- `kb_core.retrieval`: answering a query (L0 keyword index, L1 searcher, the hybrid lookup and its result);
- `kb_core.storage`: the adapters and their ports (SQL metadata + migrations, Milvus, embedding models);
- `kb_core.agent`: `lookup_knowledge` for agents (tool, schema, call log and its statistics, MCP server);
- top level: this public API, `settings`, `errors`, `terms` (text normalisation), `progress`, `stats`,
  `knowledge_base` (the `KnowledgeBase` facade) and `bootstrap` (the composition root);
  commands `python -m kb_core.mcp | migrate | bench`; `kb_core.testing` holds offline test helpers.
"""

from kb_core.agent.tool import TOOL_DESCRIPTION, TOOL_NAME, openai_tool_schema
from kb_core.bootstrap import default_knowledge_base, lookup_knowledge, open_knowledge_base
from kb_core.documents.frontmatter import Frontmatter, has_frontmatter, parse_frontmatter
from kb_core.documents.service import DeleteOutcome, SyncReport, UploadOutcome
from kb_core.errors import DocumentError, FrontmatterError, KnowledgeBaseError, SettingsError, UploadRejected
from kb_core.knowledge_base import KnowledgeBase, KnowledgeBaseStatus
from kb_core.retrieval.keyword_index import KnowledgeEntry, KnowledgeIndex, L0Match
from kb_core.retrieval.lookup import HybridLookup, L1Hit, L1Searcher, LookupResult, LookupTrace, Primary, Supplement
from kb_core.settings import Settings, load_settings

__all__ = [
    "DeleteOutcome",
    "DocumentError",
    "KnowledgeBase",
    "KnowledgeBaseStatus",
    "SyncReport",
    "UploadOutcome",
    "UploadRejected",
    "open_knowledge_base",
    "default_knowledge_base",
    "lookup_knowledge",
    "openai_tool_schema",
    "TOOL_NAME",
    "TOOL_DESCRIPTION",
    "Frontmatter",
    "FrontmatterError",
    "HybridLookup",
    "KnowledgeBaseError",
    "KnowledgeEntry",
    "KnowledgeIndex",
    "L0Match",
    "L1Hit",
    "L1Searcher",
    "LookupResult",
    "LookupTrace",
    "Primary",
    "Settings",
    "SettingsError",
    "Supplement",
    "has_frontmatter",
    "load_settings",
    "parse_frontmatter",
]
